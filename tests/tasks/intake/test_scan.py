"""The nightly's intake scan (no server): which books need rendering tonight and why."""
from __future__ import annotations

import pytest

from manifests import STATUS_DONE, STATUS_PENDING
from manifests.lock import BookLock
from tasks.errors import BookError
from tasks.intake.scan import (
    CHANGED,
    COMPLETE,
    INCOMPLETE,
    NEW,
    RUNNING,
    book_state,
    books_in,
    scan_books,
)
from tests.flows.helpers import fake_render, write_txt_book


def test_book_states(tmp_path):
    out = tmp_path / "out"
    books = [write_txt_book(tmp_path / f"{n}.txt", chapters=1, sentences=2 + i)
             for i, n in enumerate(("new", "done", "edited", "half", "nohash", "noreport", "busy", "halfnohash"))]
    fake_render(books[1], out)
    fake_render(books[2], out)
    books[2].write_text(books[2].read_text(encoding="utf-8") + "　　又一句。\n", encoding="utf-8")
    fake_render(books[3], out, statuses=(STATUS_DONE, STATUS_PENDING))
    fake_render(books[4], out, record=False)
    fake_render(books[5], out, report=False)
    busy_dir = fake_render(books[6], out, statuses=(STATUS_DONE, STATUS_PENDING))
    fake_render(books[7], out, statuses=(STATUS_DONE, STATUS_PENDING), record=False)   # a killed first render
    got = {}
    with BookLock(busy_dir):                             # another render holds the lock
        for b in books:
            got[b.stem] = book_state(b, out).state
    assert got == {"new": NEW, "done": COMPLETE, "edited": CHANGED, "half": INCOMPLETE, "nohash": CHANGED,
                   "noreport": INCOMPLETE, "busy": RUNNING, "halfnohash": INCOMPLETE}
    assert book_state(books[6], out).state == INCOMPLETE  # the lock is gone with its holder
    assert not (out / "new").exists()                    # scanning writes nothing


def test_book_states_in_a_store(s3_server, tmp_path):
    """With `out` a store URL the states come from the store's copy of each book (manifest parts, source record,
    report.json); a book whose lease is live is running.  The scan writes nothing to the store."""
    import json
    import time

    from tasks.bookdir import LEASE_NAME
    from tests.s3server import environ_with

    cat, local = tmp_path / "cat", tmp_path / "local"
    cat.mkdir()
    books = [write_txt_book(cat / f"{n}.txt", chapters=1, sentences=2 + i)
             for i, n in enumerate(("new", "done", "edited", "half", "noreport", "busy", "expired"))]
    for b in books[1:]:
        fake_render(b, local, statuses=(STATUS_DONE, STATUS_PENDING) if b.stem == "half" else (STATUS_DONE,) * 2,
                    report=b.stem != "noreport")
    books[2].write_text(books[2].read_text(encoding="utf-8") + "　　又一句。\n", encoding="utf-8")
    fs, bucket = s3_server.filesystem(), s3_server.bucket("scan")
    for b in books[1:]:
        fs.put(str(local / b.stem), f"{bucket}/out/", recursive=True)
    other = "elsewhere/boot:42:token"                  # a render on another machine
    for stem, expires in (("busy", time.time() + 100), ("expired", time.time() - 1)):
        fs.pipe_file(f"{bucket}/out/{stem}/{LEASE_NAME}", json.dumps({"holder": other, "expires": expires}).encode())
    before = sorted(fs.find(bucket))
    url = f"s3://{bucket}/out"
    with environ_with({**s3_server.env(), "CHATTTS_RENDER_SCRATCH": str(tmp_path / "scratch")}):
        got = {s.book.rsplit("/", 1)[-1][:-4]: (s.state, s.book_dir) for s in scan_books(cat, url)}
    assert got == {"new": (NEW, f"{url}/new"), "done": (COMPLETE, f"{url}/done"),
                   "edited": (CHANGED, f"{url}/edited"), "half": (INCOMPLETE, f"{url}/half"),
                   "noreport": (INCOMPLETE, f"{url}/noreport"), "busy": (RUNNING, f"{url}/busy"),
                   "expired": (COMPLETE, f"{url}/expired")}
    fs.invalidate_cache()
    assert sorted(fs.find(bucket)) == before


def test_books_in_and_conflicts(tmp_path):
    cat = tmp_path / "cat"
    (cat / "sub").mkdir(parents=True)
    (cat / ".hidden").mkdir()
    a = write_txt_book(cat / "a.txt", 1, 2)
    b = write_txt_book(cat / "sub" / "b.TXT", 1, 2)
    (cat / "c.epub").write_bytes(b"PK")
    (cat / "notes.md").write_text("x")
    write_txt_book(cat / ".hidden" / "h.txt", 1, 2)
    assert books_in(cat) == sorted([a, b, cat / "c.epub"])
    with pytest.raises(BookError, match="does not exist"):
        books_in(tmp_path / "missing")
    write_txt_book(cat / "sub" / "a.txt", 1, 3)            # same output folder as cat/a.txt
    with pytest.raises(BookError, match="same folder"):
        scan_books(cat, tmp_path / "out")


def test_outputs_inside_the_catalogue_are_not_books(tmp_path):
    """An output folder inside the catalogue holds read-along EPUBs (--format epub): they are not scanned."""
    cat = tmp_path / "cat"
    (cat / "output" / "a").mkdir(parents=True)
    book = write_txt_book(cat / "a.txt", 1, 2)
    (cat / "output" / "a" / "a.epub").write_bytes(b"PK")
    assert [s.book for s in scan_books(cat, cat / "output")] == [str(book.resolve())]
