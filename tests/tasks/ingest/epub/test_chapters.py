"""Blocks into chapters: TOC entries, headings and continuation chunks; titles not repeated; notes placed."""
from __future__ import annotations

from tests.tasks.ingest.epub.helpers import XHTML, all_text, load_bytes, make_epub


def test_heading_matching_toc_title_is_not_repeated(tmp_path):
    data = make_epub([("c1.xhtml", "<h2>CHAPTER I.<br/>START</h2><p>Text one.</p>")],
                     toc=[("c1.xhtml", "CHAPTER I. START")])
    book = load_bytes(tmp_path, data)
    assert book.chapters[0].title == "CHAPTER I. START"
    assert book.chapters[0].paragraphs == ("Text one.",)


def test_spine_item_without_toc_entry_heading_or_continuation(tmp_path):
    docs = [("c1.xhtml", "<h1>第一章</h1><p>開始。</p>"),
            ("c1b.xhtml", "<p>接著上一段的續文。</p>"),          # a split chunk: continues chapter 1
            ("x.xhtml", "<h2>插曲</h2><p>插曲內容。</p>"),     # untitled in the TOC but has a heading
            ("c2.xhtml", "<h1>第二章</h1><p>結束。</p>")]
    book = load_bytes(tmp_path, make_epub(docs, toc=[("c1.xhtml", "第一章"), ("c2.xhtml", "第二章")]))
    assert [c.title for c in book.chapters] == ["第一章", "插曲", "第二章"]
    assert book.chapters[0].paragraphs == ("開始。", "接著上一段的續文。")
    assert book.chapters[1].paragraphs == ("插曲內容。",)


def test_empty_chapters_dropped(tmp_path):
    docs = [("cover.xhtml", '<div><img src="cover.jpg" alt="封面"/></div>'), ("c1.xhtml", "<p>內容。</p>"),
            ("blank.xhtml", "<p> </p><p>\u3000</p>")]
    book = load_bytes(tmp_path, make_epub(docs))
    assert [c.title for c in book.chapters] == ["c1"]


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


def test_notes_at_chapter_end_or_skipped(tmp_path):
    body1 = ('<p>他說了一句話<a epub:type="noteref" href="#n1">1</a>，然後走了。</p>'
             '<aside epub:type="footnote" id="n1"><p>注一：這句話出自古書。</p></aside><p>第二段。</p>')
    body2 = '<p>另一章<a epub:type="noteref" href="notes.xhtml#e1">[2]</a>的內容。</p>'
    notes = ('<section epub:type="endnotes"><h2>註釋</h2><aside epub:type="endnote" id="e1"><p>尾注二。</p></aside>'
             '</section>')
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
