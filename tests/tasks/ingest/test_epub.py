"""EPUB ingest: spine order, TOC titles (nav and NCX), continuations, notes, ruby, metadata, Gutenberg
boilerplate, the 山海經 sections, and the whole EPUB corpus."""
from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path

import pytest

from tasks.book import Book
from tasks.errors import BookError
from tasks.ingest import load_book
from tests.conftest import CORPUS, corpus_missing, corpus_path

XHTML = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>{title}</title><style>p {{ color: red }}</style></head>
<body>{body}</body></html>"""


def zip_bytes(entries: list[tuple[str, bytes | str]], *, mimetype: bool = True,
              compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP with entries in this order (duplicates allowed: zipfile only warns)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(buf, "w") as zf:
            if mimetype:
                zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
            for name, data in entries:
                zf.writestr(name, data, compress_type=compression)
    return buf.getvalue()


def make_epub(docs: list[tuple[str, str]], *, toc: list[tuple[str, str]] | list | None = None, ncx: bool = False,
              nav: bool = True, linear: dict[str, str] | None = None, meta: str = "", manifest_extra: str = "",
              extra: list[tuple[str, bytes | str]] | None = None, opf_head: str = "",
              raw_docs: dict[str, str] | None = None) -> bytes:
    """docs: (file name, body XHTML) in spine order.  toc: (href, title) entries, or nested lists
    [(href, title, [children...])]; None = one entry per doc titled from the file name."""
    toc = [(n, n.rsplit(".", 1)[0]) for n, _ in docs] if toc is None else toc
    linear = linear or {}
    raw_docs = raw_docs or {}
    files: list[tuple[str, bytes | str]] = [("META-INF/container.xml", """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>""")]
    items, refs = [], []
    for i, (name, body) in enumerate(docs):
        items.append(f'<item id="d{i}" href="{name}" media-type="application/xhtml+xml"/>')
        lin = f' linear="{linear[name]}"' if name in linear else ""
        refs.append(f'<itemref idref="d{i}"{lin}/>')
        files.append((f"OEBPS/{name}", raw_docs.get(name) or XHTML.format(title=name, body=body)))

    def nav_ol(entries) -> str:
        lis = []
        for e in entries:
            kids = f"<ol>{nav_ol(e[2])}</ol>" if len(e) > 2 and e[2] else ""
            lis.append(f'<li><a href="{e[0]}">{e[1]}</a>{kids}</li>')
        return "".join(lis)

    def ncx_points(entries, counter=[0]) -> str:
        pts = []
        for e in entries:
            counter[0] += 1
            kids = ncx_points(e[2], counter) if len(e) > 2 and e[2] else ""
            pts.append(f'<navPoint id="n{counter[0]}" playOrder="{counter[0]}"><navLabel><text>{e[1]}</text>'
                       f'</navLabel><content src="{e[0]}"/>{kids}</navPoint>')
        return "".join(pts)

    spine_toc = ""
    if nav:
        items.append('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>')
        files.append(("OEBPS/nav.xhtml", XHTML.format(title="nav", body=f'<nav epub:type="toc"><ol>{nav_ol(toc)}'
                                                                         f'</ol></nav>')))
    if ncx:
        items.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
        spine_toc = ' toc="ncx"'
        files.append(("OEBPS/toc.ncx", '<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/'
                                       'z3986/2005/ncx/" version="2005-1"><head/><docTitle><text>T</text>'
                                       f'</docTitle><navMap>{ncx_points(toc)}</navMap></ncx>'))
    opf = f"""<?xml version="1.0" encoding="utf-8"?>{opf_head}
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>
{meta or '<dc:title>測試書</dc:title><dc:creator>作者甲</dc:creator><dc:language>zh-CN</dc:language>'}</metadata>
<manifest>{''.join(items)}{manifest_extra}</manifest><spine{spine_toc}>{''.join(refs)}</spine></package>"""
    files.insert(1, ("OEBPS/content.opf", opf))
    return zip_bytes(files + (extra or []))


def load_bytes(tmp_path: Path, data: bytes, name: str = "book.epub", **kw) -> Book:
    p = tmp_path / name
    p.write_bytes(data)
    return load_book(p, **kw)


def all_text(book: Book) -> str:
    return "\n".join(p for c in book.chapters for p in c.paragraphs)


# ------------------------------------------------------------------------------------------- structure
def test_spine_order_wins_over_toc_order_titles_from_toc(tmp_path):
    data = make_epub([("c1.xhtml", "<h1>一</h1><p>甲段。</p>"), ("c2.xhtml", "<h1>二</h1><p>乙段。</p>")],
                     toc=[("c2.xhtml", "第二章 乙"), ("c1.xhtml", "第一章 甲")])
    book = load_bytes(tmp_path, data)
    assert [c.title for c in book.chapters] == ["第一章 甲", "第二章 乙"]
    assert [c.paragraphs for c in book.chapters] == [("一", "甲段。"), ("二", "乙段。")]
    assert [c.index for c in book.chapters] == [0, 1]


def test_heading_matching_toc_title_is_not_repeated(tmp_path):
    data = make_epub([("c1.xhtml", "<h2>CHAPTER I.<br/>START</h2><p>Text one.</p>")],
                     toc=[("c1.xhtml", "CHAPTER I. START")])
    book = load_bytes(tmp_path, data)
    assert book.chapters[0].title == "CHAPTER I. START"
    assert book.chapters[0].paragraphs == ("Text one.",)


def test_ncx_only_epub2_with_nested_toc(tmp_path):
    docs = [("a.xhtml", '<h1 id="p1">卷一</h1><p>序文。</p><h2 id="s1">第一回</h2><p>一回文。</p>'
                        '<h2 id="s2">第二回</h2><p>二回文。</p>')]
    toc = [("a.xhtml#p1", "卷一", [("a.xhtml#s1", "第一回 始"), ("a.xhtml#s2", "第二回 終")])]
    book = load_bytes(tmp_path, make_epub(docs, toc=toc, ncx=True, nav=False))
    assert [c.title for c in book.chapters] == ["卷一", "第一回 始", "第二回 終"]
    assert [c.paragraphs for c in book.chapters] == [("序文。",), ("一回文。",), ("二回文。",)]


def test_spine_item_without_toc_entry_heading_or_continuation(tmp_path):
    docs = [("c1.xhtml", "<h1>第一章</h1><p>開始。</p>"),
            ("c1b.xhtml", "<p>接著上一段的續文。</p>"),          # a split chunk: continues chapter 1
            ("x.xhtml", "<h2>插曲</h2><p>插曲內容。</p>"),     # untitled in the TOC but has a heading
            ("c2.xhtml", "<h1>第二章</h1><p>結束。</p>")]
    book = load_bytes(tmp_path, make_epub(docs, toc=[("c1.xhtml", "第一章"), ("c2.xhtml", "第二章")]))
    assert [c.title for c in book.chapters] == ["第一章", "插曲", "第二章"]
    assert book.chapters[0].paragraphs == ("開始。", "接著上一段的續文。")
    assert book.chapters[1].paragraphs == ("插曲內容。",)


def test_non_linear_items_not_read_inline(tmp_path):
    docs = [("c1.xhtml", "<p>正文。</p>"), ("pop.xhtml", "<p>彈出的注釋頁。</p>"), ("c2.xhtml", "<p>正文二。</p>")]
    book = load_bytes(tmp_path, make_epub(docs, linear={"pop.xhtml": "no"}))
    assert "彈出的注釋頁" not in all_text(book)
    assert [c.title for c in book.chapters] == ["c1", "c2"]


def test_empty_chapters_dropped(tmp_path):
    docs = [("cover.xhtml", '<div><img src="cover.jpg" alt="封面"/></div>'), ("c1.xhtml", "<p>內容。</p>"),
            ("blank.xhtml", "<p> </p><p>\u3000</p>")]
    book = load_bytes(tmp_path, make_epub(docs))
    assert [c.title for c in book.chapters] == ["c1"]


def test_notes_at_chapter_end_or_skipped(tmp_path):
    body1 = ('<p>他說了一句話<a epub:type="noteref" href="#n1">1</a>，然後走了。</p>'
             '<aside epub:type="footnote" id="n1"><p>注一：這句話出自古書。</p></aside><p>第二段。</p>')
    body2 = '<p>另一章<a epub:type="noteref" href="notes.xhtml#e1">[2]</a>的內容。</p>'
    notes = '<section epub:type="endnotes"><h2>註釋</h2><aside epub:type="endnote" id="e1"><p>尾注二。</p></aside></section>'
    docs = [("c1.xhtml", body1), ("c2.xhtml", body2), ("notes.xhtml", notes)]
    toc = [("c1.xhtml", "一"), ("c2.xhtml", "二")]
    book = load_bytes(tmp_path, make_epub(docs, toc=toc))
    c1, c2 = book.chapters[0].paragraphs, book.chapters[1].paragraphs
    assert c1 == ("他說了一句話，然後走了。", "第二段。", "注一：這句話出自古書。")
    assert c2[0] == "另一章的內容。" and "尾注二。" in c2            # endnote follows the chapter that cites it
    assert all_text(book).count("尾注二。") == 1
    skipped = load_bytes(tmp_path, make_epub(docs, toc=toc), name="skip.epub", notes="skip")
    assert "注一" not in all_text(skipped) and "尾注二" not in all_text(skipped)
    assert skipped.chapters[0].paragraphs == ("他說了一句話，然後走了。", "第二段。")


def test_ruby_scripts_styles_images_br_entities(tmp_path):
    body = ('<p><ruby>漢<rp>(</rp><rt>かん</rt><rp>)</rp>字</ruby>を読む。</p><script>alert("x")</script>'
            '<p>第一行<br/>第二行</p><p>A&nbsp;B &amp; C&mdash;D &#x4E2D;</p><img src="a.png" alt="圖片說明"/>'
            '<p><span class="pagenum">12</span>頁碼不讀。</p><style>.x{}</style>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert book.chapters[0].paragraphs == ("漢字を読む。", "第一行", "第二行", "A B & C—D 中", "頁碼不讀。")


def test_cjk_source_line_breaks_collapse(tmp_path):
    body = "<p>這是一個\n    很長的段落，\n  在原始碼裡換了行。 English  words\n stay   apart.</p>"
    book = load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert book.chapters[0].paragraphs == ("這是一個很長的段落，在原始碼裡換了行。 English words stay apart.",)


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


def test_language_from_content_when_opf_has_none(tmp_path):
    raw = ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xml:lang="zh-TW"><body><p>文。</p>'
           '</body></html>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "")], meta="<dc:title>T</dc:title>",
                                          raw_docs={"c.xhtml": raw}))
    assert book.meta.language == "zh-TW"


def test_gutenberg_boilerplate_dropped(tmp_path):
    head = ('<div class="pg-boilerplate"><h2>The Project Gutenberg eBook of 書</h2><p>This eBook is for the use '
            'of anyone anywhere</p><span>*** START OF THE PROJECT GUTENBERG EBOOK 書 ***</span></div>'
            '<p>Produced by Someone</p><h1>第一章</h1><p>正文開始。</p>')
    tail = ('<h1>第二章</h1><p>正文結束。</p><p>End of Project Gutenberg\'s 書, by Anon</p>'
            '<div><span>*** END OF THE PROJECT GUTENBERG EBOOK 書 ***</span><p>Updated editions will replace '
            'the previous one</p></div>')
    lic = "<h2>THE FULL PROJECT GUTENBERG LICENSE</h2><p>PLEASE READ THIS BEFORE YOU DISTRIBUTE</p>"
    docs = [("a.xhtml", head), ("b.xhtml", tail), ("lic.xhtml", lic)]
    book = load_bytes(tmp_path, make_epub(docs, toc=[("lic.xhtml", "THE FULL PROJECT GUTENBERG™ LICENSE")]))
    assert [c.title for c in book.chapters] == ["第一章", "第二章"]
    assert all_text(book) == "正文開始。\n正文結束。"


def test_control_characters_stripped_from_titles(tmp_path):
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "<p>文。</p>")], toc=[("c.xhtml", "第\u009b一\u0085章")]))
    assert book.chapters[0].title == "第一章"


def test_undeclared_epub_prefix_and_html_entities(tmp_path):
    raw = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><body>'
           '<p>Caf&eacute; &hellip; ok<a epub:type="noteref" href="#n">1</a></p>'
           '<aside epub:type="footnote" id="n"><p>Note.</p></aside></body></html>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "")], raw_docs={"c.xhtml": raw}))
    assert book.chapters[0].paragraphs == ("Café … ok", "Note.")


# ------------------------------------------------------------------------------------------- corpus
def test_shanhaijing_sections_from_xhtml_headings():
    book = load_book(corpus_path("epub", "gutenberg", "pg25288-shanhaijing-zh.epub"))
    titles = [c.title for c in book.chapters]
    assert titles == ["南山經", "西山經", "北山經", "東山經", "中山經", "海外南經", "海外西經", "海外北經", "海外東經",
                      "海內南經", "大荒南經", "海內西經", "海內北經", "海內東經", "大荒東經", "大荒西經", "大荒北經",
                      "海內經"]
    assert book.chapters[0].paragraphs[0].startswith("南山經之首曰鵲山")
    text = all_text(book)
    assert "Gutenberg" not in text and "Produced by" not in text and "LICENSE" not in text
    assert book.meta.title == "山海經" and book.meta.language == "zh" and book.meta.cover_mime == "image/png"
    # Hard-wrapped lines rendered as separate <p>s are joined again: "...帝乃</p><p>命禹卒布土以定九州。".
    last = book.chapters[-1].paragraphs[-1]
    assert last.startswith("洪水滔天") and last.endswith("帝乃命禹卒布土以定九州。")
    assert any(p.endswith("其名曰類，自為牝牡，食者不妒。") for p in book.chapters[0].paragraphs)


def test_robinson_crusoe_chapters():
    book = load_book(corpus_path("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub"))
    titles = [c.title for c in book.chapters]
    assert len(titles) == 20 and titles[0] == "CHAPTER I. START IN LIFE"
    assert titles[-1] == "CHAPTER XX. FIGHT BETWEEN FRIDAY AND A BEAR"
    assert book.chapters[0].paragraphs[0].startswith("I was born in the year 1632")
    assert "Gutenberg" not in all_text(book)


def test_wasteland_notes_and_line_numbers():
    book = load_book(corpus_path("epub", "idpf-epub3-samples", "wasteland.epub"))
    assert [c.title for c in book.chapters][1:] == ["I. THE BURIAL OF THE DEAD", "II. A GAME OF CHESS",
                                                    "III. THE FIRE SERMON", "IV. DEATH BY WATER",
                                                    "V. WHAT THE THUNDER SAID"]
    burial = book.chapters[1].paragraphs
    assert "Out of this stony rubbish? Son of man," in burial   # no "*" note mark, no line number "20"
    assert "Line 20. Cf. Ezekiel 2:1." in burial  # note 1 read at the end of the chapter that cites it
    assert burial.index("Out of this stony rubbish? Son of man,") < burial.index("Line 20. Cf. Ezekiel 2:1.")
    assert book.chapters[2].paragraphs[-1] != burial[-1]
    skipped = load_book(corpus_path("epub", "idpf-epub3-samples", "wasteland.epub"), notes="skip")
    assert not any("Ezekiel 2:1" in p for c in skipped.chapters for p in c.paragraphs)
    assert len(skipped.chapters[1].paragraphs) < len(burial)


def test_kusamakura_ruby_base_text_only():
    book = load_book(corpus_path("epub", "idpf-epub3-samples", "kusamakura-japanese-vertical-writing.epub"))
    assert [c.title for c in book.chapters][1:14] == ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一",
                                                      "十二", "十三"]
    assert book.chapters[1].paragraphs[0] == "山路を登りながら、こう考えた。"
    assert "智に働けば角が立つ。" in book.chapters[1].paragraphs[1]


EXPECTED_ERRORS = {
    "ocf-container-not-ocf-error.epub": "not an EPUB (an Office Open XML document, e.g. .docx)",
    "ocf-zip-unreadable-empty-fatal.epub": "empty file",
    "ocf-zip-unreadable-image-with-epub-extension-fatal.epub": "not an EPUB or text file (JPEG image)",
    "ocf-zip-unreadable-no-end-header-fatal.epub": "truncated or corrupt ZIP archive",
    "page-blanche-bitmaps-in-spine.epub": "no readable text",
}


def test_every_corpus_epub_ingests_or_fails_cleanly():
    """Walk every EPUB in the corpus: a Book whose chapters have text, or the expected one-line BookError;
    never another exception and never an unexpected parser failure converted at the boundary."""
    root = CORPUS / "epub"
    files = sorted(root.rglob("*.epub"))
    if not files:
        corpus_missing(root)
    outcomes = {}
    for f in files:
        try:
            book = load_book(f)
        except BookError as e:
            assert "\n" not in str(e) and str(f) in str(e)
            outcomes[f.name] = e.problem
            continue
        assert book.chapters and all(c.paragraphs and all(c.paragraphs) for c in book.chapters), f
        assert all(p == p.strip() for c in book.chapters for p in c.paragraphs), f
        outcomes[f.name] = "ok"
    errors = {k: v for k, v in outcomes.items() if v != "ok"}
    assert errors == {k: v for k, v in EXPECTED_ERRORS.items() if k in outcomes}
    assert len(outcomes) >= 70


def test_no_toc_at_all_titles_from_headings_or_book_title(tmp_path):
    docs = [("intro.xhtml", "<p>沒有標題的開頭。</p>"), ("c1.xhtml", "<h1>第一章</h1><p>甲。</p>"),
            ("c1b.xhtml", "<p>甲續。</p>"), ("c2.xhtml", "<h1>第二章</h1><p>乙。</p>")]
    book = load_bytes(tmp_path, make_epub(docs, nav=False, ncx=False))
    assert [c.title for c in book.chapters] == ["測試書", "第一章", "第二章"]  # book title, then <h1>s
    assert book.chapters[1].paragraphs == ("甲。", "甲續。")


def test_document_title_as_fallback_title(tmp_path):
    raw = XHTML.format(title="序言", body="<p>沒有標題的開頭。</p>")
    book = load_bytes(tmp_path, make_epub([("intro.xhtml", "")], nav=False, raw_docs={"intro.xhtml": raw}))
    assert book.chapters[0].title == "序言"


def test_liber_esther_no_boilerplate_titles():
    book = load_book(corpus_path("epub", "gutenberg", "pg826-Liber_Esther-la.epub"))
    assert not any("Gutenberg" in c.title for c in book.chapters)
    assert book.chapters[1].title == "1. REGINA VASTHI EICITUR, 1:1-22."
    assert "Gutenberg" not in all_text(book)


def test_epub2_style_note_marks_without_epub_type(tmp_path):
    body = ('<p>甲說<sup><a href="#fn1" id="r1">1</a></sup>，乙答<a href="notes.xhtml#n2"><sup>[2]</sup></a>。'
            '他有10<sup>2</sup>個，見<a href="#sec">第二節</a>。</p><p id="fn1">1 甲是人名。</p>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert book.chapters[0].paragraphs[0] == "甲說，乙答。他有102個，見第二節。"


def test_soft_hyphens_and_zero_width_removed(tmp_path):
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "<p>hy\u00adphen\u200bated 中\u2060文</p>")]))
    assert book.chapters[0].paragraphs == ("hyphenated 中文",)


def test_pre_lines_are_paragraphs(tmp_path):
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "<pre>床前明月光，\n疑是地上霜。\n\n舉頭望明月，</pre><p>完。</p>")]))
    assert book.chapters[0].paragraphs == ("床前明月光，", "疑是地上霜。", "舉頭望明月，", "完。")


def test_zipped_txt_novel(tmp_path):
    text = "第一章 甲\n\n　　甲文。\n\n第二章 乙\n\n　　乙文。\n"
    data = zip_bytes([("小說/書.txt", text.encode("gb18030") * 1), ("小說/readme.url", b"x")], mimetype=False)
    book = load_bytes(tmp_path, data, name="novel.zip")
    assert book.meta.source_format == "txt" and [c.title for c in book.chapters] == ["第一章 甲", "第二章 乙"]
    with pytest.raises(BookError, match="no package document"):
        load_bytes(tmp_path, zip_bytes([("a.txt", b"x"), ("b.txt", b"y")], mimetype=False), name="two.zip")
