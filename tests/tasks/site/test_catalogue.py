"""Issue 13 §3: the output root's catalogue page and podcast feed.  An output root with a finished M4B book, a
finished FLAC-only book, one with gaps packaged as silence, a partial one, one being rendered and a failed one:
each gets its status; the feed (parsed by feedparser) lists exactly the finished books, each enclosure the
file's size and type; the page works in a real browser and links to the players."""
from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest

import manifests
from flows.cli import main
from manifests import commit
from manifests.lock import BookLock
from tasks.site.catalogue import SiteOptions, write_catalogue
from tasks.site.library import scan_output
from tests.browser import console_errors
from tests.flows.helpers import fake_render, write_txt_book

BASE = "http://nas.local:8000/books/"
ITUNES = "http://www.itunes.com/dtds/podcast-1.0.dtd"
TYPES = {".m4b": "audio/mp4", ".flac": "audio/flac"}


@pytest.fixture(scope="module")
def out(rendered_book, tmp_path_factory):
    """The output root described in the module docstring (the locked book's lock is taken by the tests)."""
    root = tmp_path_factory.mktemp("catalogue")
    out = root / "out"
    shutil.copytree(rendered_book, out / "daodejing")                                  # done, M4B
    txt = write_txt_book(root / "flaconly.txt", chapters=2, sentences=4)
    assert main([str(txt), "--model", "random-tiny", "--out", str(out), "--format", "flac"]) == 0   # done, FLAC
    fake_render(write_txt_book(root / "halfway.txt"), out, statuses=("done", "pending", "pending"), report=False)
    shutil.copytree(out / "flaconly", out / "locked")                  # finished, being rendered again now
    edited = shutil.copytree(out / "flaconly", out / "edited")         # finished, then edited: a segment pending
    row = manifests.load(edited).to_pylist()[-1]
    commit(edited, [{**row, "status": "pending", "samples": 0, "duration_s": 0.0}])
    failed = fake_render(write_txt_book(root / "failed.txt"), out, statuses=("done", "done"), report=False)
    commit(failed, [{"plan_id": "p", "chapter": 0, "chapter_title": "一", "segment": 1, "text": "天地玄黄。",
                     "status": "failed", "error": "duration 0.3 s does not fit 5 characters", "attempts": 3}])
    gaps = fake_render(write_txt_book(root / "gaps.txt"), out, statuses=("done", "failed"))
    report = json.loads((gaps / "report.json").read_text())
    (gaps / "report.json").write_text(json.dumps({**report, "gaps": [{"chapter": 0, "segment": 1}]}))
    (out / "notabook").mkdir()
    return out


@pytest.fixture
def locked(out):
    with BookLock(out / "locked"):
        yield


def test_each_book_has_its_status(out, locked):
    entries = {e.folder: e for e in scan_output(out)}
    assert {f: (e.status, e.rendering) for f, e in entries.items()} == {
        "daodejing": ("done", False), "flaconly": ("done", False), "gaps": ("done", False),
        "halfway": ("partial", False), "locked": ("partial", True), "failed": ("failed", False),
        "edited": ("partial", False)}
    assert entries["halfway"].percent == pytest.approx(100 / 3, abs=0.1)
    assert entries["edited"].percent == pytest.approx(500 / 6, abs=0.1)
    assert entries["failed"].reason == ("1 segments failed (first: chapter 1, segment 2: duration 0.3 s does not "
                                        "fit 5 characters)")
    assert entries["gaps"].reason == "1 segments are silence (--allow-gaps)"
    assert entries["daodejing"].enclosure == "道德经（前三章）.m4b"
    assert entries["flaconly"].enclosure.endswith(".flac") and entries["flaconly"].enclosure.startswith("001 - ")


def test_feed_lists_exactly_the_finished_books(out, locked):
    """Acceptance 3: parsed by a real feed parser; one item per finished book with its file present, each
    enclosure's length that file's size and its type; cover, duration, pubDate, links under --base-url."""
    import feedparser

    write_catalogue(out, SiteOptions(base_url=BASE))
    feed = feedparser.parse((out / "feed.xml").read_bytes())
    assert not feed.bozo, feed.bozo_exception
    assert feed.version == "rss20" and feed.namespaces.get("itunes") == ITUNES
    # gaps is done, but its fake render has no audio file to enclose; locked and edited are partial, with the
    # files of their last render still there (and flaconly's title)
    assert all(list((out / f).glob("001 - *.flac")) for f in ("locked", "edited"))
    finished = ("daodejing", "flaconly")
    titles = [json.loads((out / f / "book.json").read_text(encoding="utf-8"))["title"] for f in finished]
    assert sorted(item.title for item in feed.entries) == sorted(titles)
    for item in feed.entries:
        [enc] = item.enclosures
        assert enc.href.startswith(BASE)
        path = out / unquote(enc.href[len(BASE):])
        assert path.is_file() and int(enc.length) == path.stat().st_size
        assert enc.type == TYPES[path.suffix]
        book_dir = path.parent
        assert item.link == BASE + f"{book_dir.name}/index.html" and (book_dir / "index.html").is_file()
        mtime = datetime.fromtimestamp((book_dir / "report.json").stat().st_mtime, UTC)
        assert datetime(*item.published_parsed[:6], tzinfo=UTC) == mtime.replace(microsecond=0)
        seconds = sum(c["seconds"] for c in json.loads((book_dir / "report.json").read_text())["chapters"])
        assert int(item.itunes_duration) == round(seconds)
    dao = next(i for i in feed.entries if i.title == "道德经（前三章）")
    assert dao.image.href == BASE + "daodejing/cover.png" and dao.author == "老子"
    assert feed.feed.image.href == BASE + "daodejing/cover.png"


def test_feed_links_are_relative_without_a_base_url_and_the_bytes_are_stable(out, locked):
    import feedparser

    write_catalogue(out)
    first = (out / "feed.xml").read_bytes(), (out / "index.html").read_bytes()
    write_catalogue(out)
    assert ((out / "feed.xml").read_bytes(), (out / "index.html").read_bytes()) == first
    for item in feedparser.parse(first[0]).entries:
        assert (out / unquote(item.enclosures[0].href)).is_file()


def test_bad_base_urls_are_refused():
    for url in ("nas.local/books", "ftp://nas.local/", "http:///x", "http://nas.local/?a=1"):
        with pytest.raises(ValueError, match="--base-url"):
            SiteOptions(base_url=url)


def test_catalogue_page_in_a_real_browser(browser, out, locked):
    """Acceptance 2 (catalogue page): no console errors, every book's status, and the link to a player opens it."""
    from selenium.webdriver.common.by import By

    write_catalogue(out)
    browser.get((out / "index.html").as_uri())
    assert console_errors(browser) == []
    rows = {r.get_attribute("data-folder"): r for r in browser.find_elements(By.CSS_SELECTOR, "tr.book")}
    assert {f: r.get_attribute("data-status") for f, r in rows.items()} == {
        "daodejing": "done", "flaconly": "done", "gaps": "done", "halfway": "partial", "locked": "partial",
        "failed": "failed", "edited": "partial"}
    status = {f: r.find_element(By.CSS_SELECTOR, "td.status").text for f, r in rows.items()}
    assert status["halfway"] == "partial 33.3 %" and status["locked"] == "partial 100 % (rendering now)"
    assert status["failed"].startswith("failed: 1 segments failed (first: chapter 1, segment 2: duration 0.3 s")
    rows["daodejing"].find_element(By.LINK_TEXT, "道德经（前三章）").click()
    assert Path(unquote(browser.current_url.removeprefix("file://"))) == out / "daodejing" / "index.html"
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == "道德经（前三章）"
    assert console_errors(browser) == []
