"""The books of an output root as the catalogue page and the feed show them: one BookEntry per `OUT/<book>/`
that holds a manifest — its status, duration, formats, player page, the file a podcast app downloads and when
it finished.  Read-only: the manifest, book.json and report.json, and whether the book's lock is held.

Status (the first that applies):
    partial   a render holds the book's lock now, or segments are pending (percent: segments done of the
              latest plan)
    failed    segments failed and no packaging put silence in their place (reason: how many, the first one)
    partial   every segment is done but the book was never packaged (report.json is missing)
    done      every segment is done (or, with --allow-gaps, silence) and report.json was written
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from manifests.lock import render_in_flight
from manifests.status import STATUS_DONE, STATUS_FAILED, STATUS_PENDING
from manifests.store import load, manifest_dir
from tasks.audio.names import FORMATS
from tasks.bookdir import PAGE_NAME, QA_PAGE, REPORT_NAME, read_book_json, read_report

DONE, PARTIAL, FAILED = "done", "partial", "failed"
Stat = Callable[[str], "tuple[int, float | None] | None"]   # a book file's (bytes, mtime s or None) by relative
                                                            # path; None: no such file


@dataclass(frozen=True)
class BookEntry:
    folder: str                      # OUT/<folder>/
    title: str
    author: str
    language: str
    status: str                      # done | partial | failed
    percent: float                   # segments done of the latest plan, 0..100
    rendering: bool                  # a live process renders it now (its lock is held)
    reason: str                      # failed: why; done with gaps: how many are silence
    seconds: float                   # done: the packaged duration; otherwise the audio rendered so far
    chapters: int
    formats: tuple[str, ...]         # as packaged (report.json)
    player: str | None               # the player page's file name, when written
    qa: str | None                   # the QA page's file name (tasks/site/qa.py), when written
    cover: str | None                # the cover's file name
    enclosure: str | None            # the M4B, else the first chapter file of the first format
    enclosure_format: str | None
    enclosure_bytes: int
    finished: datetime | None        # UTC: when report.json was written (its last packaging ended)
    report_sha256: str               # changes when the packaged outputs change (the feed's guid)


def local_stat(book_dir: Path) -> Stat:
    """The Stat of a book folder on this machine."""
    def stat(rel: str) -> tuple[int, float] | None:
        p = Path(book_dir) / rel
        if not p.is_file():
            return None
        st = p.stat()
        return st.st_size, st.st_mtime
    return stat


def book_entry(book_dir: Path, stat: Stat | None = None, rendering: bool | None = None) -> BookEntry | None:
    """The entry of one book folder; None when it holds no manifest rows (not a book).  A book in a store
    (tasks.fleet.mirror.catalogue_view): book_dir holds its manifest, book.json and report.json, `stat` answers
    for the store's files and `rendering` is its lease; by default both are the folder's own."""
    book_dir = Path(book_dir)
    stat = stat or local_stat(book_dir)
    rows = load(book_dir).to_pylist()
    if not rows:
        return None
    count = {s: sum(r["status"] == s for r in rows) for s in (STATUS_DONE, STATUS_PENDING, STATUS_FAILED)}
    failed = [r for r in rows if r["status"] == STATUS_FAILED]
    info, report = read_book_json(book_dir), read_report(book_dir)
    rendering = render_in_flight(book_dir) if rendering is None else rendering
    if rendering or count[STATUS_PENDING]:
        status, reason = PARTIAL, ""
    elif failed and not report.get("gaps"):
        r = failed[0]
        status, reason = FAILED, (f"{len(failed)} segments failed (first: chapter {r['chapter'] + 1}, segment "
                                  f"{r['segment'] + 1}: {r['error'] or 'no error recorded'})")
    elif not report:                                   # rendered, not packaged yet (stopped while packaging)
        status, reason = PARTIAL, ""
    else:
        status, reason = DONE, f"{len(failed)} segments are silence (--allow-gaps)" if failed else ""
    if status == DONE:
        seconds = sum(c["seconds"] for c in report.get("chapters", []))
    else:
        seconds = sum(r["duration_s"] or 0.0 for r in rows if r["status"] == STATUS_DONE)
    enclosure = _enclosure(stat, report)
    enclosure_stat = stat(enclosure) if enclosure else None
    report_path, report_stat = book_dir / REPORT_NAME, stat(REPORT_NAME)
    cover = info.get("cover_file")
    return BookEntry(
        folder=book_dir.name, title=info.get("title") or book_dir.name, author=info.get("author", ""),
        language=info.get("language", ""), status=status, percent=round(100.0 * count[STATUS_DONE] / len(rows), 1),
        rendering=rendering, reason=reason, seconds=round(seconds, 3), chapters=len({r["chapter"] for r in rows}),
        formats=tuple(report.get("formats", [])) if report else (),
        player=PAGE_NAME if stat(PAGE_NAME) else None,
        qa=QA_PAGE if stat(QA_PAGE) else None,
        cover=cover if cover and stat(cover) else None,
        enclosure=enclosure, enclosure_format=Path(enclosure).suffix[1:] if enclosure else None,
        enclosure_bytes=enclosure_stat[0] if enclosure_stat else 0,
        finished=(datetime.fromtimestamp(report_stat[1], UTC).replace(microsecond=0)
                  if report and report_stat and report_stat[1] is not None else None),
        report_sha256=hashlib.sha256(report_path.read_bytes()).hexdigest() if report else "")


def _enclosure(stat: Stat, report: dict) -> str | None:
    """The book's M4B when packaged as one, else the first chapter audio file listed (not the EPUB's); None
    when it is not there."""

    files = report.get("files", [])
    first = next((f["file"] for f in files if f.get("format") == "m4b"), None) or next(
        (f["file"] for f in files if f.get("format") in FORMATS), None)
    return first if first and stat(first) else None


def scan_output(out: Path) -> list[BookEntry]:
    """Every book folder of the output root, by folder name (hidden folders and temp folders skipped)."""
    folders = sorted(p for p in Path(out).iterdir()
                     if p.is_dir() and not p.name.startswith(".") and manifest_dir(p).is_dir())
    return [e for e in (book_entry(p) for p in folders) if e is not None]
