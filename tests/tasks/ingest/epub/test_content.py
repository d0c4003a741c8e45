"""Content documents as text: ruby, scripts, entities, line breaks, note marks, <pre>, Gutenberg boilerplate."""
from __future__ import annotations

from tests.tasks.ingest.epub.helpers import all_text, load_bytes, make_epub


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


def test_soft_hyphens_and_zero_width_removed(tmp_path):
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "<p>hy\u00adphen\u200bated 中\u2060文</p>")]))
    assert book.chapters[0].paragraphs == ("hyphenated 中文",)


def test_pre_lines_are_paragraphs(tmp_path):
    pre = "<pre>床前明月光，\n疑是地上霜。\n\n舉頭望明月，</pre><p>完。</p>"
    book = load_bytes(tmp_path, make_epub([("c.xhtml", pre)]))
    assert book.chapters[0].paragraphs == ("床前明月光，", "疑是地上霜。", "舉頭望明月，", "完。")


def test_undeclared_epub_prefix_and_html_entities(tmp_path):
    raw = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><body>'
           '<p>Caf&eacute; &hellip; ok<a epub:type="noteref" href="#n">1</a></p>'
           '<aside epub:type="footnote" id="n"><p>Note.</p></aside></body></html>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "")], raw_docs={"c.xhtml": raw}))
    assert book.chapters[0].paragraphs == ("Café … ok", "Note.")


def test_epub2_style_note_marks_without_epub_type(tmp_path):
    body = ('<p>甲說<sup><a href="#fn1" id="r1">1</a></sup>，乙答<a href="notes.xhtml#n2"><sup>[2]</sup></a>。'
            '他有10<sup>2</sup>個，見<a href="#sec">第二節</a>。</p><p id="fn1">1 甲是人名。</p>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert book.chapters[0].paragraphs[0] == "甲說，乙答。他有102個，見第二節。"


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
