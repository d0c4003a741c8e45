"""Output names: safe on every filesystem, chapter and book stems, names that stay inside the book dir."""
from __future__ import annotations

import pytest

from tasks.audio.names import MAX_NAME_BYTES, book_stem, chapter_file_names, chapter_stem, inside, safe_name
from tasks.errors import OutputError

HOSTILE = ["../..", "a/b", "CON", "con.txt", "Nul", "LPT1", "com9 ", "x" * 300, "第" * 300, "📖" * 80,
           'bad:*?"<>|\\name', "trailing. . .", "  spaces  ", "\x00\x1fctl\x7f", "..", ".", "",
           "\u202eevil\u202c", "e\u0301" * 150, "👩\u200d👩\u200d👧" * 30]


@pytest.mark.parametrize("title", HOSTILE)
def test_safe_name_is_safe(title):
    s = safe_name(title)
    assert len(s.encode("utf-8")) <= MAX_NAME_BYTES
    assert not any(c in s for c in '/\\:*?"<>|')
    assert ".." not in s
    assert not any(ord(c) < 32 or ord(c) == 127 for c in s)
    assert s == s.strip(" .")
    assert s.split(".")[0].strip().upper() not in {"CON", "PRN", "AUX", "NUL", "COM1", "COM9", "LPT1"}
    stem = chapter_stem(4, 250, title, "flac")
    assert stem.startswith("005 - ") or stem == "005"
    assert len(f"{stem}.flac".encode()) <= MAX_NAME_BYTES


def test_safe_name_keeps_ordinary_titles():
    assert safe_name("第一章 风起") == "第一章 风起"
    assert safe_name("Chapter 1: The Start") == "Chapter 1_ The Start"
    assert chapter_stem(0, 3, "序") == "001 - 序"
    assert chapter_stem(9, 1200, "") == "0010"


def test_inside_refuses_escape(tmp_path):
    with pytest.raises(OutputError):
        inside(tmp_path, "../x.flac")
    with pytest.raises(OutputError):
        inside(tmp_path, "a/b.flac")
    assert inside(tmp_path, "ok.flac").parent == tmp_path.resolve()


def test_chapter_file_names_share_the_srt_stem_and_skip_m4b():
    names = chapter_file_names(0, 2, "序", ("flac", "opus", "m4b"), ("srt", "vtt"))
    assert names == ["001 - 序.flac", "001 - 序.opus", "001 - 序.srt", "001 - 序.vtt"]
    long = chapter_file_names(0, 2, "长" * 100, ("flac", "opus"), ("lrc",))
    assert all(len(n.encode("utf-8")) <= MAX_NAME_BYTES for n in long)


def test_book_stem():
    assert book_stem("道德经") == "道德经"
    assert book_stem("../..") == "…_…" and book_stem("") == "book" and book_stem("CON") == "CON_"
    assert len(f"{book_stem('书' * 300)}.m4b".encode()) <= MAX_NAME_BYTES
