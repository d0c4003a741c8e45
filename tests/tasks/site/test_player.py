"""Issue 13 §2: the book's web player, OUT/<book>/index.html — written by every render and `package`, its text
and sentence times those of the subtitles, and used in a real headless chromium from file:// (highlight,
click to play, keys, the position remembered, the M4B when there are no chapter files)."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from flows.cli import main
from tasks.audio.subtitles import TimedText, by_sentence
from tests.browser import console_errors
from tests.flows.helpers import SAMPLE

SCREENSHOT_ENV = "CHATTTS_RENDER_SCREENSHOT"    # also save the player's screenshot there (the README's PNG)
WAIT_S = 60                                      # hang guard for a condition the page must reach
SEEK_TOLERANCE_S = 0.050


def srt_items(path: Path) -> list[TimedText]:
    """The cues of an SRT file, as written (milliseconds)."""
    items = []
    for block in path.read_text(encoding="utf-8").strip().split("\n\n"):
        _, times, *text = block.split("\n")
        a, b = (sum(int(x) * m for x, m in zip(re.split(r"[:,]", t.strip()), (3_600_000, 60_000, 1000, 1)))
                for t in times.split("-->"))
        items.append(TimedText(a, b, "\n".join(text)))
    return items


def chapter_srts(book_dir: Path) -> list[Path]:
    return sorted(book_dir.glob("[0-9][0-9][0-9] - *.srt"))


def page_chapters(page: Path):
    """The page's chapter articles (lxml elements)."""
    from lxml import html

    return html.fromstring(page.read_bytes()).xpath("//article[@data-chapter]")


def page_sentences(page: Path) -> list[list[tuple[int, int, str]]]:
    """Per chapter of the page: (start ms, end ms, text) of every sentence span."""
    return [[(round(float(s.get("data-start")) * 1000), round(float(s.get("data-end")) * 1000), s.text_content())
             for s in a.xpath(".//span[contains(concat(' ', @class, ' '), ' s ')]")]
            for a in page_chapters(page)]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture
def book(rendered_book, tmp_path):
    """A copy of the rendered sample book this test may change."""
    dest = tmp_path / "out" / rendered_book.name
    shutil.copytree(rendered_book, dest)
    return dest


def test_render_and_package_write_the_page(book):
    page = book / "index.html"
    first = page.read_bytes()
    page.unlink()
    (book / "002 - 第一章.flac").unlink()         # this chapter is packaged again, the others carried over
    assert main(["package", str(SAMPLE), "--out", str(book.parent), "--format", "flac,m4b"]) == 0
    assert page.read_bytes() == first             # rebuilt from report.json and the manifest, byte for byte
    text = first.decode("utf-8")
    assert "<h1>道德经（前三章）</h1>" in text and '<p class="author">老子</p>' in text
    assert 'src="cover.png"' in text and "https://" not in text and "http://" not in text   # nothing remote


def test_an_epub_only_book_gets_its_text_and_says_why_nothing_plays(book):
    """The EPUB's audio is inside the EPUB: a book packaged as epub alone has its text, no source to play,
    and a line saying so."""
    assert main(["package", str(SAMPLE), "--out", str(book.parent), "--format", "epub"]) == 0
    text = (book / "index.html").read_text(encoding="utf-8")
    assert 'id="no-audio"' in text and "packaged as epub only" in text
    assert '"files":{}' in text and '"book":{}' in text                      # (the page's player data)
    assert [len(c) for c in page_sentences(book / "index.html")] == [len(by_sentence(srt_items(p)))
                                                                     for p in chapter_srts(book)]


def test_sentences_are_the_subtitle_cues_and_the_original_text(book):
    """Each chapter's spans: the SRT cues split by sentence (the same milliseconds), the manifest's original
    text in reading order; each chapter's page text the chapter's original text (text.json: title and
    paragraphs, a paragraph per <p>); and the chapter summary of report.json."""
    import manifests
    from tasks.audio.readalong import load_text

    got = page_sentences(book / "index.html")
    srts = chapter_srts(book)
    assert len(got) == len(srts) == 4
    for spans, srt in zip(got, srts):
        want = by_sentence(srt_items(srt))
        assert [(s, e) for s, e, _ in spans] == [(t.start_ms, t.end_ms) for t in want]
        assert [squash(t) for _, _, t in spans] == [squash(t.text) for t in want]
    rows = manifests.load(book).to_pylist()
    for c, spans in enumerate(got):
        source = "".join(r["source_text"] for r in rows if r["chapter"] == c)
        assert squash("".join(t for _, _, t in spans)) == squash(source)
    units = load_text(book)
    for c, article in enumerate(page_chapters(book / "index.html")):
        assert [squash(p.text_content()) for p in article.xpath("./p")] == [squash(u) for u in units[c]]
    report = json.loads((book / "report.json").read_text(encoding="utf-8"))
    text = (book / "index.html").read_text(encoding="utf-8")
    for f in (f for f in report["files"] if f["chapter"] is not None):
        assert f"<td>{f['integrated_lufs']:.1f} LUFS</td><td>{f['true_peak_dbtp']:.1f} dBTP</td>" in text


def _audio(driver, script: str):
    return driver.execute_script(f"const a = document.getElementById('audio'); {script}")


def _wait(driver, condition: str):
    """Wait until the JavaScript expression `condition` (with `a`, the audio element) is true."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(lambda d: _audio(d, f"return Boolean({condition});"))


ACTIVE_JS = ("Array.from(document.querySelectorAll('article:not([hidden]) .s'))"
             ".flatMap((s, i) => s.classList.contains('active') ? [i] : [])")


def _active(driver) -> list[int]:
    """The highlighted sentences of the chapter shown, by position."""
    return driver.execute_script(f"return {ACTIVE_JS};")


def _seek_by(driver, action) -> tuple[float, list[int]]:
    """Do `action`; when the seek it starts has landed (the 'seeked' event), the player's time and the sentences
    the page has highlighted by then (its own listener runs first).  Every seek a test starts goes through
    here, and earlier ones have landed and their events are dispatched first (no seek in progress, then a
    frame and a task later), so the event is this action's."""
    _wait(driver, "a.readyState >= 1 && !a.seeking")
    _audio(driver, "a.playbackRate = 0;")          # time stands still while 'playing': it lands where it seeked
    driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => setTimeout(done, 0));")
    _wait(driver, "!a.seeking")
    _audio(driver, "window.landed = null; a.addEventListener('seeked', () => { window.landed = [a.currentTime, "
                   f"{ACTIVE_JS}]; }}, {{once: true}});")
    action()
    _wait(driver, "window.landed !== null")
    time, active = driver.execute_script("return window.landed;")
    return time, active


def test_player_in_a_real_browser(browser, book, tmp_path):
    """Acceptance 2 (player): no console errors; the player's time set into the 3rd sentence lights it; a click
    on the 5th plays from its cue start (±50 ms); space and ←/→; the position survives a reload; a screenshot."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    want = by_sentence(srt_items(chapter_srts(book)[1]))           # 第一章: six sentences
    browser.set_window_size(1000, 680)
    browser.get((book / "index.html").as_uri())
    _wait(browser, "a.readyState >= 1")
    assert console_errors(browser) == []
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == "道德经（前三章）"

    assert _seek_by(browser, browser.find_elements(By.CSS_SELECTOR, "nav.chapters button")[1].click) == (0, [])
    assert _audio(browser, "return a.getAttribute('src');").startswith("002")
    third = want[2]
    _, lit = _seek_by(browser, lambda: _audio(browser, f"a.currentTime = {(third.start_ms + third.end_ms) / 2000};"))
    assert lit == [2]

    spans = browser.find_elements(By.CSS_SELECTOR, "article:not([hidden]) .s")
    assert len(spans) == len(want) == 6
    landed, lit = _seek_by(browser, spans[4].click)
    assert abs(landed - want[4].start_ms / 1000) <= SEEK_TOLERANCE_S and lit == [4]
    _wait(browser, "!a.paused")                                    # a click plays

    keys = ActionChains(browser)
    keys.send_keys(" ").perform()                                  # space: pause
    _wait(browser, "a.paused")
    keys.send_keys(" ").perform()                                  # space: play
    _wait(browser, "!a.paused")
    keys.send_keys(" ").perform()
    _wait(browser, "a.paused")
    right, lit = _seek_by(browser, lambda: keys.send_keys(Keys.ARROW_RIGHT).perform())    # →: the next sentence
    assert abs(right - want[5].start_ms / 1000) <= SEEK_TOLERANCE_S and lit == [5]
    left, lit = _seek_by(browser, lambda: keys.send_keys(Keys.ARROW_LEFT).perform())      # ←: the previous one
    assert abs(left - want[4].start_ms / 1000) <= SEEK_TOLERANCE_S and lit == [4]

    stored = json.loads(browser.execute_script(
        "return localStorage.getItem('chattts-render:daodejing:道德经（前三章）');"))
    assert stored["chapter"] == 1 and abs(stored["time"] - want[4].start_ms / 1000) <= SEEK_TOLERANCE_S
    shot = tmp_path / "player.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get(SCREENSHOT_ENV):
        shutil.copyfile(shot, os.environ[SCREENSHOT_ENV])

    browser.refresh()                                              # the position is remembered
    _wait(browser, f"Math.abs(a.currentTime - {stored['time']}) < 0.001 && !a.seeking "
                   "&& document.querySelector('article:not([hidden]) .s.active')")
    assert browser.find_elements(By.CSS_SELECTOR, "nav.chapters button")[1].get_attribute("aria-current") == "true"
    assert _active(browser) == [4]
    assert console_errors(browser) == []


def test_m4b_only_book_plays_its_chapters_at_their_offsets(browser, book):
    """Without chapter files the page plays the M4B: a sentence of the 2nd chapter seeks to the chapter's
    offset plus its cue, which is the book-wide subtitles' cue (±50 ms)."""
    from selenium.webdriver.common.by import By

    assert main(["package", str(SAMPLE), "--out", str(book.parent), "--format", "m4b"]) == 0   # no chapter files
    book_wide = by_sentence(srt_items(book / "道德经（前三章）.srt"))
    browser.get((book / "index.html").as_uri())
    _wait(browser, "a.readyState >= 1")
    assert _audio(browser, "return a.getAttribute('src');").endswith(".m4b")
    offset = json.loads((book / "report.json").read_text(encoding="utf-8"))["chapters"][0]["seconds"]
    chapter, _ = _seek_by(browser, browser.find_elements(By.CSS_SELECTOR, "nav.chapters button")[1].click)
    assert abs(chapter - offset) <= 0.001                         # the 2nd chapter starts where the 1st ends
    spans = browser.find_elements(By.CSS_SELECTOR, "article:not([hidden]) .s")
    first_of_chapter = next(i for i, t in enumerate(book_wide) if t.text.strip() == "第一章")
    landed, lit = _seek_by(browser, spans[4].click)
    assert abs(landed - book_wide[first_of_chapter + 4].start_ms / 1000) <= SEEK_TOLERANCE_S and lit == [4]
    assert console_errors(browser) == []
