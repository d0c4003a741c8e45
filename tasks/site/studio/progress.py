"""A book's progress as the studio shows it, read from its manifest (the truth: the same whether the render runs in
the studio, on the command line, or was killed): per chapter segments done / pending / failed, audio rendered
and left, whether it can be played now (every segment done); the render's speed and time left from successive
readings; and a chapter's preview, assembled from its segments as packaging assembles it (tasks.audio.assemble),
so a chapter plays the moment it is rendered, before the book is packaged."""
from __future__ import annotations

import io
import time
from collections import deque
from pathlib import Path

from engine.units import estimate_seconds
from manifests.lock import render_in_flight
from manifests.status import STATUS_DONE, STATUS_FAILED
from manifests.store import load
from tasks.audio.assemble import AssembleOptions, Piece, assemble_chapter
from tasks.book import segment_name
from tasks.bookdir import read_report

SPEED_WINDOW_S = 120.0          # s of readings the speed is measured over
SUBTITLES = ("srt", "vtt", "lrc")   # written beside every audio file (tasks/audio/subtitles.py)
READ_ATTEMPTS = 3               # a manifest read that meets a compaction is tried again


def manifest_rows(book_dir: Path) -> list[dict]:
    """The book's manifest rows (reading order); [] when there is none.  A read that meets a compaction (its
    parts replaced under it) is tried again."""
    for attempt in range(READ_ATTEMPTS):
        try:
            return load(book_dir).to_pylist()
        except (OSError, ValueError):
            if attempt == READ_ATTEMPTS - 1:
                raise
            time.sleep(0.1)
    return []


def book_progress(book_dir: Path, rows: list[dict] | None = None) -> dict | None:
    """{chapters: [{index, number, title, total, done, failed, done_s, left_s, playable}], total, done, failed,
    done_s, left_s, percent, rendering (a live process holds the book), packaged (report.json)}; None before the
    book was planned."""
    rows = manifest_rows(book_dir) if rows is None else rows
    if not rows:
        return None
    chapters: dict[int, dict] = {}
    for r in rows:
        c = chapters.setdefault(r["chapter"], {"index": r["chapter"], "number": r["chapter"] + 1,
                                               "title": r["chapter_title"], "total": 0, "done": 0, "failed": 0,
                                               "done_s": 0.0, "left_s": 0.0})
        c["total"] += 1
        if r["status"] == STATUS_DONE:
            c["done"] += 1
            c["done_s"] += r["duration_s"] or 0.0
        else:
            c["failed"] += r["status"] == STATUS_FAILED
            c["left_s"] += estimate_seconds(r["text"])
    listed = [chapters[k] for k in sorted(chapters)]
    for c in listed:
        c["playable"] = c["done"] == c["total"]
        c["done_s"], c["left_s"] = round(c["done_s"], 2), round(c["left_s"], 2)
    total, done = len(rows), sum(c["done"] for c in listed)
    return {"chapters": listed, "total": total, "done": done, "failed": sum(c["failed"] for c in listed),
            "done_s": round(sum(c["done_s"] for c in listed), 2), "left_s": round(sum(c["left_s"] for c in listed), 2),
            "percent": round(100.0 * done / total, 1), "rendering": render_in_flight(book_dir),
            "packaged": bool(read_report(book_dir))}


class Speedometer:
    """A render's speed from successive progress readings of one book: segments per minute, audio seconds per
    wall second over the last SPEED_WINDOW_S, and the time left at that pace."""

    def __init__(self):
        self.readings: deque[tuple[float, int, float]] = deque()

    def add(self, progress: dict, now: float | None = None) -> dict:
        """Record a reading; {segments_per_min, audio_per_wall, eta_s} (None until two readings differ)."""
        now = time.monotonic() if now is None else now
        if self.readings and progress["done"] < self.readings[-1][1]:
            self.readings.clear()                         # re-planned (a fix, an edit): start again
        self.readings.append((now, progress["done"], progress["done_s"]))
        while len(self.readings) > 2 and now - self.readings[1][0] > SPEED_WINDOW_S:
            self.readings.popleft()
        t0, d0, a0 = self.readings[0]
        dt, dd, da = now - t0, progress["done"] - d0, progress["done_s"] - a0
        if dt <= 0 or dd <= 0:
            return {"segments_per_min": None, "audio_per_wall": None, "eta_s": None}
        rate = da / dt
        return {"segments_per_min": round(60 * dd / dt, 2), "audio_per_wall": round(rate, 3),
                "eta_s": round(progress["left_s"] / rate) if rate > 0 else None}


class Watch:
    """One book watched by the pages: its progress read again only when its manifest folder or report.json changed
    (a commit adds a part; packaging writes the report), whether a process renders it looked at every time, and
    its speed."""

    def __init__(self, book_dir: Path):
        self.book_dir, self.speed = Path(book_dir), Speedometer()
        self._seen: tuple | None = None
        self._progress: dict | None = None

    def read(self) -> tuple[dict | None, dict]:
        """(book_progress, the speed: Speedometer.add)."""
        seen = (_mtime(self.book_dir / "manifest"), _mtime(self.book_dir / "report.json"))
        if seen != self._seen or self._progress is None:
            self._progress, self._seen = book_progress(self.book_dir), seen
        elif self._progress is not None:
            self._progress = {**self._progress, "rendering": render_in_flight(self.book_dir)}
        p = self._progress
        return p, (self.speed.add(p) if p is not None else {})


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def chapter_preview(book_dir: Path, chapter: int, rows: list[dict] | None = None) -> tuple[bytes, list[dict]] | None:
    """Chapter `chapter` (0-based) assembled from its segments as packaging assembles it, as 16-bit WAV bytes, and
    its cues [{start, end, text, segment}] (seconds; the book's text); None unless every segment is done."""
    import soundfile as sf

    rows = [r for r in (manifest_rows(book_dir) if rows is None else rows) if r["chapter"] == chapter]
    if not rows or any(r["status"] != STATUS_DONE for r in rows):
        return None
    audio = assemble_chapter([Piece(Path(book_dir) / r["audio_path"], r["pause_after"], r["source_text"],
                                    r["voice_id"]) for r in rows], AssembleOptions())
    buf = io.BytesIO()
    sf.write(buf, audio.audio, audio.sample_rate, format="WAV", subtype="PCM_16")
    cues = [{"start": round(c.start_s, 3), "end": round(c.end_s, 3), "text": c.text,
             "segment": segment_name(chapter, rows[c.segment_index]["segment"])} for c in audio.cues]
    return buf.getvalue(), cues


def downloads(book_dir: Path) -> list[dict]:
    """The packaged files to take away, from report.json, with the subtitles beside each: [{file, format, chapter
    (1-based, or None for the book's own: M4B, read-along EPUB), title}], the book's own first."""
    report = read_report(book_dir)
    titles = {c.get("index"): c.get("title", "") for c in report.get("chapters", [])}
    out, seen = [], set()
    for f in report.get("files", []):
        chapter = None if f.get("chapter") is None else f["chapter"] + 1
        names = [(f.get("file") or "", f.get("format", ""))]
        names += [(Path(names[0][0]).with_suffix(f".{ext}").name, ext) for ext in SUBTITLES]
        for name, fmt in names:
            if name and name not in seen and (Path(book_dir) / name).is_file():
                seen.add(name)
                out.append({"file": name, "format": fmt, "chapter": chapter, "title": titles.get(f.get("chapter"), "")})
    return sorted(out, key=lambda f: (f["chapter"] is not None, f["chapter"] or 0))
