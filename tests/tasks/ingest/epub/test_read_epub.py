"""read_epub: the language from the content when the OPF names none, a zipped TXT novel."""
from __future__ import annotations

import pytest

from tasks.errors import BookError
from tests.tasks.ingest.epub.helpers import load_bytes, make_epub, zip_bytes


def test_language_from_content_when_opf_has_none(tmp_path):
    raw = ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xml:lang="zh-TW"><body><p>文。</p>'
           '</body></html>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "")], meta="<dc:title>T</dc:title>",
                                          raw_docs={"c.xhtml": raw}))
    assert book.meta.language == "zh-TW"


def test_zipped_txt_novel(tmp_path):
    text = "第一章 甲\n\n　　甲文。\n\n第二章 乙\n\n　　乙文。\n"
    data = zip_bytes([("小說/書.txt", text.encode("gb18030") * 1), ("小說/readme.url", b"x")], mimetype=False)
    book = load_bytes(tmp_path, data, name="novel.zip")
    assert book.meta.source_format == "txt" and [c.title for c in book.chapters] == ["第一章 甲", "第二章 乙"]
    with pytest.raises(BookError, match="no package document"):
        load_bytes(tmp_path, zip_bytes([("a.txt", b"x"), ("b.txt", b"y")], mimetype=False), name="two.zip")
