"""The archive on its own: names stay inside it (any case, first duplicate), hrefs resolve against their folder,
a damaged entry is a one-line BookError naming it.  (Bombs, XXE and DRM: tests/tasks/ingest/test_hostile.py.)"""
from __future__ import annotations

import zipfile

import pytest

from tasks.errors import BookError
from tasks.ingest.epub.archive import Archive, join_href
from tests.tasks.ingest.epub.helpers import zip_bytes


def test_names_stay_inside_the_archive_first_duplicate_wins_any_case():
    z = Archive(zip_bytes([("OEBPS/Text/C1.xhtml", "first"), ("OEBPS/Text/C1.xhtml", "second"),
                           ("../up.xhtml", "x"), ("OEBPS/../../up2.xhtml", "x"), ("/abs.xhtml", "y"),
                           ("OEBPS\\win.xhtml", "w")], mimetype=False), "b.epub")
    assert sorted(z.entries) == ["OEBPS/Text/C1.xhtml", "OEBPS/win.xhtml", "abs.xhtml"]
    assert z.read("OEBPS/Text/C1.xhtml") == b"first"
    assert z.resolve("oebps/text/c1.XHTML") == "OEBPS/Text/C1.xhtml"        # books made on Windows
    assert z.resolve("OEBPS/Text/../Text/./C1.xhtml") == "OEBPS/Text/C1.xhtml"
    assert z.resolve("../up.xhtml") is None and z.resolve("OEBPS/../../up2.xhtml") is None
    assert not z.has("OEBPS/Text/C2.xhtml")
    with pytest.raises(KeyError):
        z.read("OEBPS/Text/C2.xhtml")


def test_join_href_resolves_against_the_folder_unquoted_without_fragment():
    assert join_href("OEBPS/Text", "c%201.xhtml#p3") == "OEBPS/Text/c 1.xhtml"
    assert join_href("OEBPS/Text", "../Images/a.png") == "OEBPS/Images/a.png"
    assert join_href("", " OEBPS/c.xhtml ") == "OEBPS/c.xhtml"
    assert join_href("OEBPS", "#n1") == ""                                  # a fragment in the same document


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_damaged_entry_is_a_book_error_naming_it(compression):
    body = ("<p>" + "".join(chr(0x4E00 + i * 7919 % 20_000) for i in range(3000)) + "</p>").encode()
    data = bytearray(zip_bytes([("OEBPS/c.xhtml", body)], mimetype=False, compression=compression))
    start = data.index(b"OEBPS/c.xhtml") + len("OEBPS/c.xhtml")           # the entry's data follows its name
    data[start + 100:start + 140] = bytes(40)
    z = Archive(bytes(data), "b.epub")
    with pytest.raises(BookError) as ei:
        z.read("OEBPS/c.xhtml")
    assert ei.value.problem.startswith("truncated or corrupt ZIP archive (")
    assert ei.value.problem.endswith(": OEBPS/c.xhtml") and "\n" not in str(ei.value)
