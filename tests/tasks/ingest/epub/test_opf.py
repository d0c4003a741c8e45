"""The package document (OPF): spine order, linear items, TOC titles from nav and NCX (nested), metadata and cover."""
from __future__ import annotations

from tests.tasks.ingest.epub.helpers import all_text, load_bytes, make_epub


def test_spine_order_wins_over_toc_order_titles_from_toc(tmp_path):
    data = make_epub([("c1.xhtml", "<h1>一</h1><p>甲段。</p>"), ("c2.xhtml", "<h1>二</h1><p>乙段。</p>")],
                     toc=[("c2.xhtml", "第二章 乙"), ("c1.xhtml", "第一章 甲")])
    book = load_bytes(tmp_path, data)
    assert [c.title for c in book.chapters] == ["第一章 甲", "第二章 乙"]
    assert [c.paragraphs for c in book.chapters] == [("一", "甲段。"), ("二", "乙段。")]
    assert [c.index for c in book.chapters] == [0, 1]


def test_ncx_only_epub2_with_nested_toc(tmp_path):
    docs = [("a.xhtml", '<h1 id="p1">卷一</h1><p>序文。</p><h2 id="s1">第一回</h2><p>一回文。</p>'
                        '<h2 id="s2">第二回</h2><p>二回文。</p>')]
    toc = [("a.xhtml#p1", "卷一", [("a.xhtml#s1", "第一回 始"), ("a.xhtml#s2", "第二回 終")])]
    book = load_bytes(tmp_path, make_epub(docs, toc=toc, ncx=True, nav=False))
    assert [c.title for c in book.chapters] == ["卷一", "第一回 始", "第二回 終"]
    assert [c.paragraphs for c in book.chapters] == [("序文。",), ("一回文。",), ("二回文。",)]


def test_non_linear_items_not_read_inline(tmp_path):
    docs = [("c1.xhtml", "<p>正文。</p>"), ("pop.xhtml", "<p>彈出的注釋頁。</p>"), ("c2.xhtml", "<p>正文二。</p>")]
    book = load_bytes(tmp_path, make_epub(docs, linear={"pop.xhtml": "no"}))
    assert "彈出的注釋頁" not in all_text(book)
    assert [c.title for c in book.chapters] == ["c1", "c2"]


def test_control_characters_stripped_from_titles(tmp_path):
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "<p>文。</p>")], toc=[("c.xhtml", "第\u009b一\u0085章")]))
    assert book.chapters[0].title == "第一章"


def test_metadata_and_cover(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + b"cover-bytes"
    data = make_epub([("c.xhtml", "<p>文。</p>")],
                     manifest_extra='<item id="cov" href="img/cover.png" media-type="image/png" '
                                    'properties="cover-image"/>',
                     extra=[("OEBPS/img/cover.png", png)])
    book = load_bytes(tmp_path, data)
    m = book.meta
    assert (m.title, m.author, m.language, m.source_format) == ("測試書", "作者甲", "zh-CN", "epub")
    assert m.cover == png and m.cover_mime == "image/png"
    assert m.source_path.endswith("book.epub")


def test_epub2_cover_meta(tmp_path):
    jpg = b"\xff\xd8\xff\xe0jpeg"
    data = make_epub([("c.xhtml", "<p>文。</p>")],
                     meta='<dc:title>T</dc:title><meta name="cover" content="cimg"/>',
                     manifest_extra='<item id="cimg" href="c.jpg" media-type="image/jpeg"/>',
                     extra=[("OEBPS/c.jpg", jpg)])
    book = load_bytes(tmp_path, data)
    assert book.meta.cover == jpg and book.meta.cover_mime == "image/jpeg"
    assert book.meta.title == "T" and book.meta.language == "und"  # no dc:language, no xml:lang
