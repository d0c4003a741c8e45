"""Issue 42, acceptance 1: a real Chromium drives the studio over the whole path on random-tiny weights — upload
examples/daodejing.epub, hear two voice candidates, pick one, start (schedule "chapters", one row a batch), chapter
1 plays while later chapters still render, the studio killed mid-render (its render with it) and started again:
the book is resumable and resumes; then in the player a sentence is flagged and re-taken, the chapter comes back
re-packaged with the new take, and the M4B downloads.  The pages' screenshots are taken on the way (the README's
and docs/'s: CHATTTS_RENDER_SCREENSHOTS=docs saves them there)."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from manifests.crashpoints import HOLD
from tests.browser import console_errors
from tests.flows.helpers import SAMPLE, cli_env, pause_at, wait_held
from tests.tasks.site.studio.helpers import StudioProcess, free_port, request

pytest.importorskip("ChatTTS")

WAIT_S = 300                        # s: hang guard for a state the page must reach
SCREENSHOTS_ENV = "CHATTTS_RENDER_SCREENSHOTS"
HOLD_AT = 4                         # the render holds at its 4th segment written: chapter 1 (3) done, the rest not
TITLE = "道德经（前三章）"


def wait(driver, condition: str, timeout: float = WAIT_S):
    """Until the JavaScript expression is true in the page (a hang guard, not a timing)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: d.execute_script(f"try {{ return Boolean({condition}); }} catch (e) {{ return false; }}"))


def shot(driver, tmp_path: Path, name: str, top: str | None = None) -> None:
    """The page's screenshot (docs/studio-NAME.png), scrolled to the top or to the element `top` selects."""
    if top is None:
        driver.execute_script("window.scrollTo(0, 0);")
    else:
        driver.execute_script(f"document.querySelector({json.dumps(top)}).scrollIntoView();")
    path = tmp_path / f"studio-{name}.png"
    assert driver.save_screenshot(str(path))
    if os.environ.get(SCREENSHOTS_ENV):
        Path(os.environ[SCREENSHOTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(os.environ[SCREENSHOTS_ENV]) / path.name)


def field(driver, name: str, value: str) -> None:
    box = driver.find_element("css selector", f"#render-form [name={name}]")
    box.clear()
    box.send_keys(value)


def takes(port: int, segment: str) -> dict:
    return json.loads(request(port, "GET", f"/api/books/daodejing/takes?segment={segment}")[2])


@pytest.mark.timeout(1500)
def test_upload_voices_render_listen_kill_resume_fix_download(browser, tmp_path):
    import psutil

    root, crash = tmp_path / "root", tmp_path / "crash"
    env = cli_env(CHATTTS_RENDER_VOICES=str(tmp_path / "voices"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    studio = StudioProcess(root, port, {**env, **pause_at(crash, "segment-written", HOLD_AT, HOLD)})
    try:
        # --- upload: the library's file field, then the book's page
        browser.get(base + "/")
        browser.find_element("id", "file").send_keys(str(SAMPLE))
        wait(browser, f"document.getElementById('book-title').textContent === {json.dumps(TITLE)}")
        assert browser.current_url == f"{base}/books/daodejing/"
        chapters = [e.text for e in browser.find_elements("css selector", "#chapters .chapter-title")]
        assert chapters == ["前言", "第一章", "第二章", "第三章"]

        # --- hear two voice candidates, pick the second
        field(browser, "model", "random-tiny")
        field(browser, "max_batch", "1")
        assert browser.find_element("css selector", "[name=schedule]").get_attribute("value") == "chapters"
        browser.find_element("id", "hear-voices").click()
        wait(browser, "document.querySelectorAll('#candidates li').length === 2")
        heard = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const players = Array.from(document.querySelectorAll("#candidates audio"));
            Promise.all(players.map(a => new Promise((ok, bad) => {
                a.addEventListener("timeupdate", function t() {
                    if (a.currentTime > 0.2) { a.removeEventListener("timeupdate", t); a.pause(); ok(a.duration); }
                });
                a.addEventListener("error", () => bad(a.src), {once: true});
                a.play().catch(bad);
            }))).then(done, (e) => done(["failed", String(e)]));""")
        assert len(heard) == 2 and all(isinstance(d, float) and d > 1 for d in heard), heard
        browser.find_elements("css selector", "#candidates button.use")[1].click()
        assert browser.find_element("css selector", "[name=voice]").get_attribute("value") == "seed:2223"
        shot(browser, tmp_path, "book")

        # --- start: chapter 1 plays while the later chapters are still to render
        browser.find_element("id", "start").click()
        wait(browser, "location.pathname.endsWith('/render')")
        marker = wait_held(crash, "segment-written", exited=lambda: studio.proc.poll() is not None)
        renderer = int(marker.suffix[1:])
        wait(browser, "!document.querySelector('#render-chapters li[data-chapter=\"1\"] button.play').disabled")
        assert browser.find_element("css selector", '#render-chapters li[data-chapter="4"] .count').text == "0/3"
        browser.find_element("css selector", '#render-chapters li[data-chapter="1"] button.play').click()
        wait(browser, "!document.getElementById('listen').paused && "
                      "document.getElementById('listen').currentTime > 0.3")
        assert browser.execute_script("return document.getElementById('listen').dataset.chapter") == "1"
        wait(browser, "document.querySelector('#jobs tr[data-state=\"running\"]') !== null")
        assert browser.find_element("css selector", '#render-chapters li[data-chapter="4"] .count').text == "0/3"
        shot(browser, tmp_path, "render")
        assert console_errors(browser) == []

        # --- kill the studio mid-render: its render dies with it, the manifest keeps what was committed
        studio.kill()
        t0 = time.monotonic()
        while psutil.pid_exists(renderer) and psutil.Process(renderer).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() - t0 < 30, "the render outlived the studio"
            time.sleep(0.1)
        studio = StudioProcess(root, port, env)
        browser.get(base + "/")
        cut = [e for e in console_errors(browser) if not e.startswith(f"{base}/api/events?book=daodejing - Failed to "
                                                                       "load resource: net::ERR_")]
        assert cut == []                                   # but the event stream of the killed studio, cut
        row = browser.find_element("css selector", 'tr.book[data-book="daodejing"]')
        assert "resumable" in row.text and row.get_attribute("data-status") == "partial"
        browser.get(base + "/books/daodejing/render")
        wait(browser, "!document.getElementById('resume-book').hidden")
        assert browser.find_element("css selector", '#render-chapters li[data-chapter="1"] .count').text == "3/3"
        browser.find_element("id", "resume-book").click()
        wait(browser, "document.querySelector('#files a[data-format=\"m4b\"]') !== null")
        m4b = browser.find_element("css selector", '#files a[data-format="m4b"]').get_attribute("href")

        # --- the player: flag a sentence, take a new take; the chapter comes back with it
        browser.get(base + "/books/daodejing/files/index.html")
        wait(browser, "document.querySelector('#text article[data-chapter=\"0\"]:not([hidden])') !== null")
        before = takes(port, "1.2")
        chapter_file = next(f["file"] for f in json.loads(request(port, "GET", "/api/books/daodejing/progress")[2])
                            ["files"] if f["chapter"] == 1 and f["format"] == "flac")
        old_audio = request(port, "GET", f"/books/daodejing/files/{quote(chapter_file)}")[2]
        browser.find_element("css selector", '#text button.flag[data-seg="1.2"]').click()
        wait(browser, "document.querySelector('#studio-fix-list li[data-seg=\"1.2\"] button.retake') !== null")
        browser.execute_script("window.beforeTheFix = true;")
        browser.find_element("css selector", '#studio-fix-list li[data-seg="1.2"] button.retake').click()
        wait(browser, "window.beforeTheFix === undefined && "
                      "document.getElementById('studio-fix-status').textContent.includes('done')")
        after = takes(port, "1.2")
        assert (before["kept"], len(before["takes"])) == (1, 1) and (after["kept"], len(after["takes"])) == (2, 2)
        assert request(port, "GET", f"/books/daodejing/files/{quote(chapter_file)}")[2] != old_audio
        src = browser.execute_script("return document.getElementById('audio').getAttribute('src');")
        assert src == quote(chapter_file)                          # the player plays the re-packaged chapter
        wait(browser, "document.getElementById('audio').readyState >= 1")
        shot(browser, tmp_path, "player", top="section.reader")

        # --- take the M4B away
        status, headers, body = request(port, "GET", m4b.removeprefix(base))
        assert status == 200 and headers["content-disposition"].startswith("attachment")
        assert body[4:8] == b"ftyp" and len(body) > 10_000
        browser.get(base + "/")
        wait(browser, "document.querySelector('tr.book[data-status=\"done\"]') !== null")
        shot(browser, tmp_path, "library")
        assert console_errors(browser) == []
    finally:
        studio.stop()
