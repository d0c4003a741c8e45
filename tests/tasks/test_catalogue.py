"""The catalogue scan (no server): which books need rendering tonight and why."""
from __future__ import annotations

import pytest

from manifests import STATUS_DONE, STATUS_PENDING
from manifests.lock import BookLock
from tasks.catalogue import (CHANGED, COMPLETE, INCOMPLETE, NEW, RUNNING, book_state, catalogue_books,
                             scan_catalogue)
from tasks.errors import BookError
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


def test_catalogue_books_and_conflicts(tmp_path):
    cat = tmp_path / "cat"
    (cat / "sub").mkdir(parents=True)
    (cat / ".hidden").mkdir()
    a = write_txt_book(cat / "a.txt", 1, 2)
    b = write_txt_book(cat / "sub" / "b.TXT", 1, 2)
    (cat / "c.epub").write_bytes(b"PK")
    (cat / "notes.md").write_text("x")
    write_txt_book(cat / ".hidden" / "h.txt", 1, 2)
    assert catalogue_books(cat) == sorted([a, b, cat / "c.epub"])
    with pytest.raises(BookError, match="does not exist"):
        catalogue_books(tmp_path / "missing")
    write_txt_book(cat / "sub" / "a.txt", 1, 3)            # same output folder as cat/a.txt
    with pytest.raises(BookError, match="same folder"):
        scan_catalogue(cat, tmp_path / "out")


def test_outputs_inside_the_catalogue_are_not_books(tmp_path):
    """An output folder inside the catalogue holds read-along EPUBs (--format epub): they are not scanned."""
    cat = tmp_path / "cat"
    (cat / "output" / "a").mkdir(parents=True)
    book = write_txt_book(cat / "a.txt", 1, 2)
    (cat / "output" / "a" / "a.epub").write_bytes(b"PK")
    assert [s.book for s in scan_catalogue(cat, cat / "output")] == [str(book.resolve())]
