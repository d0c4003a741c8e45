"""Issue 42's last security point, in a real browser: a book whose title, author, chapter names and text hold
markup and script (and the hostile titles of the file-name tests) is shown as that text on every studio page —
the library, the book, its render, its player with the studio's fix panel, the preview's text — and nothing of it
runs or becomes an element."""
from __future__ import annotations

import html
import json
import subprocess
import sys

import pytest

from tests.browser import console_errors
from tests.conftest import ROOT
from tests.flows.helpers import cli_env
from tests.tasks.audio.test_names import HOSTILE as HOSTILE_NAMES
from tests.tasks.ingest.epub.helpers import make_epub
from tests.tasks.site.studio.helpers import Studio, upload

pytest.importorskip("ChatTTS")

TITLE = '<img src=x onerror="window.__pwned=1">《标题》{{ 7*7 }}'
AUTHOR = "<script>window.__pwned=2</script>作者"
CHAPTERS = ['</script><script>window.__pwned=3</script>第一章', '"><svg onload="window.__pwned=4"> 第二章 '
            + HOSTILE_NAMES[0] + " " + HOSTILE_NAMES[10]]
TEXTS = ["天地<b>玄黄</b>，宇宙洪荒。", "日月盈昃，<i onmouseover=\"window.__pwned=5\">辰宿列张</i>。"]
PAGES = ("/", "/books/book/", "/books/book/render", "/books/book/files/index.html")
INJECTED = "img[src='x'], svg, b, i[onmouseover]"
OURS = {(ROOT / "tasks/site/static" / n).read_text(encoding="utf-8").strip() for n in ("fix.js", "player.js")}


def injected(driver) -> list:
    """Elements the book's markup would have made, and inline scripts that are not the player's own."""
    scripts = driver.execute_script("return Array.from(document.querySelectorAll('script:not([src])'))"
                                    ".filter(s => s.type !== 'application/json').map(s => s.textContent.trim());")
    return driver.find_elements("css selector", INJECTED) + [s for s in scripts if s not in OURS]


def hostile_epub() -> bytes:
    e = html.escape
    docs = [(f"c{i}.xhtml", f"<h1>{e(t)}</h1><p>{e(x)}</p>") for i, (t, x) in enumerate(zip(CHAPTERS, TEXTS))]
    return make_epub(docs, toc=[(f"c{i}.xhtml", e(t)) for i, t in enumerate(CHAPTERS)],
                     meta=f"<dc:title>{e(TITLE)}</dc:title><dc:creator>{e(AUTHOR)}</dc:creator>"
                          "<dc:language>zh-CN</dc:language>")


def test_titles_chapter_names_and_texts_with_markup_render_as_text(browser, tmp_path):
    studio = Studio(tmp_path / "root")
    try:
        status, got = upload(studio.port, hostile_epub(), "book.epub")
        assert status == 200, got
        render = subprocess.run([sys.executable, "-m", "flows.cli", str(studio.root / ".studio/books/book.epub"),
                                 "--out", str(studio.root), "--model", "random-tiny", "--format", "flac"],
                                cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
        assert render.returncode == 0, render.stderr[-2000:]
        for page in PAGES:
            browser.get(studio.origin + page)
            browser.execute_script("document.querySelectorAll('[onmouseover]').forEach(e => e.dispatchEvent("
                                   "new MouseEvent('mouseover')));")
            assert browser.execute_script("return window.__pwned === undefined;"), page
            assert injected(browser) == [], page
            text = browser.execute_script("return document.body.innerText;")
            assert TITLE in text and AUTHOR in text, page
        browser.get(studio.origin + "/books/book/")
        assert browser.find_element("id", "book-title").text == TITLE
        assert browser.find_element("css selector", "header.book .author").text == AUTHOR
        names = [e.get_attribute("textContent")
                 for e in browser.find_elements("css selector", "#chapters .chapter-title")]
        assert [" ".join(n.split()) for n in names] == [" ".join(c.split()) for c in CHAPTERS]
        assert "天地<b>玄黄</b>" in browser.find_element("id", "segments").get_attribute("textContent")
        browser.get(studio.origin + "/books/book/render")
        browser.find_element("css selector", '#render-chapters li[data-chapter="2"] button.play').click()
        browser.execute_script("document.getElementById('listen').pause();")
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(browser, 60).until(lambda d: "<i onmouseover" in d.find_element("id", "listen-text").text)
        assert browser.execute_script("return window.__pwned === undefined;")
        assert injected(browser) == []
        names = [e.get_attribute("textContent") for e in browser.find_elements("css selector",
                                                                               "#render-chapters .chapter-title")]
        assert [" ".join(n.split()) for n in names] == [" ".join(c.split()) for c in CHAPTERS]
        browser.get(studio.origin + "/books/book/files/index.html")
        data = json.loads(browser.find_element("id", "studio-data").get_attribute("textContent"))
        assert data["book"] == "book"
        assert browser.execute_script("return window.__pwned === undefined;")
        assert console_errors(browser) == []
    finally:
        studio.close()
