"""The nightly catalogue's plain functions (no server): which books need rendering and why; the per-book
table; and the no-server CLI staying quiet (no Prefect import, nothing on stderr)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.nightly import (CHANGED, COMPLETE, INCOMPLETE, NEW, RUNNING, artifact_key, book_state,
                           catalogue_books, read_source_hash, record_source_hash, scan_catalogue, source_sha256)
from manifests import STATUS_DONE, STATUS_PENDING, commit
from manifests.lock import BookLock
from tasks.errors import BookError
from tests.conftest import ROOT
from tests.flows.helpers import write_txt_book


def fake_render(book: Path, out: Path, statuses=(STATUS_DONE, STATUS_DONE), report: bool = True,
                record: bool = True) -> Path:
    """A book dir as a render leaves it: manifest rows with these statuses, report.json, the source hash."""
    book_dir = out / book.stem
    book_dir.mkdir(parents=True, exist_ok=True)
    commit(book_dir, [{"plan_id": "p", "chapter": 0, "chapter_title": "一", "segment": i, "text": "天地玄黄。",
                       "status": s, "duration_s": 2.5 if s == STATUS_DONE else 0.0, "attempts": 1}
                      for i, s in enumerate(statuses)])
    if report:
        (book_dir / "report.json").write_text(json.dumps({"files": [
            {"file": "001 - 一.flac", "format": "flac", "chapter": 0, "seconds": 5.2, "integrated_lufs": -18.0,
             "true_peak_dbtp": -1.5}]}))
    if record:
        record_source_hash(book_dir, book, source_sha256(book))
    return book_dir


def test_source_hash_round_trip(tmp_path):
    book = write_txt_book(tmp_path / "b.txt", chapters=1, sentences=2)
    assert read_source_hash(tmp_path / "out" / "b") is None
    record_source_hash(tmp_path / "out" / "b", book, source_sha256(book))
    assert read_source_hash(tmp_path / "out" / "b") == source_sha256(book)
    assert source_sha256(book) != source_sha256(write_txt_book(tmp_path / "c.txt", chapters=2, sentences=2))


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


def test_artifact_keys_are_valid_and_distinct():
    import re

    keys = [artifact_key("book", n) for n in ("/o/道德经", "/o/Dao De Jing", "/o/道德经2", "/o/x_y.z")]
    assert all(re.fullmatch(r"[a-z0-9-]+", k) for k in keys)
    assert len(set(keys)) == len(keys)


def test_book_table_from_manifest_and_report(tmp_path):
    from flows.render_book import book_table

    book = write_txt_book(tmp_path / "t.txt", 1, 2)
    book_dir = fake_render(book, tmp_path / "out", statuses=(STATUS_DONE, "failed", STATUS_DONE))
    assert book_table(book_dir) == [{"chapter": 1, "title": "一", "segments": 3, "done": 2, "failed": 1,
                                     "seconds": 5.2, "lufs": -18.0, "true_peak_dbtp": -1.5,
                                     "file": "001 - 一.flac"}]


def test_cli_without_server_is_quiet_and_never_imports_prefect(tmp_path):
    """A successful render without a server: exit 0, nothing on stderr, Prefect never imported."""
    book = write_txt_book(tmp_path / "q.txt", chapters=1, sentences=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "print('PREFECT_IMPORTED' if any(m == 'prefect' or m.startswith('prefect.') for m in sys.modules) "
            "else 'NO_PREFECT'); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, str(book), "--model", "random-tiny", "--out",
                        str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert "NO_PREFECT" in p.stdout and (tmp_path / "out" / "q" / "report.json").is_file()
