"""What a render tells its user: the per-chapter table (the manifest joined with report.json), the status
listing and the one line a render ends with.  Plain functions over a book dir; the CLI prints them, the flow
turns the table into a Prefect artifact."""
from __future__ import annotations

from pathlib import Path

from engine.units import hms
from manifests.store import load, summary
from tasks.bookdir import read_report


def book_table(book_dir: Path) -> list[dict]:
    """One row per chapter: segments done/failed, rendered seconds, and the final file's duration and loudness
    (from manifests.summary and report.json)."""
    report = read_report(book_dir)
    files: dict[int, dict] = {}
    for f in report.get("files", []):
        if f.get("chapter") is not None:
            files.setdefault(f["chapter"], f)            # the first format's file of each chapter
    rows = []
    for s in summary(load(book_dir)):
        f = files.get(s["chapter"], {})
        rows.append({"chapter": s["chapter"] + 1, "title": s["title"], "segments": s["done"] + s["pending"]
                     + s["failed"], "done": s["done"], "failed": s["failed"],
                     "seconds": f.get("seconds", round(s["done_s"], 3)), "lufs": f.get("integrated_lufs"),
                     "true_peak_dbtp": f.get("true_peak_dbtp"), "file": f.get("file", "")})
    return rows


def format_status(rows: list[dict]) -> str:
    """`chattts-render status`: per chapter done / pending / failed, audio rendered and about how much is left
    (rows: manifests.summary)."""
    lines = [f"{'ch':>4}  {'done':>5} {'pend':>5} {'fail':>5}  {'audio':>8}  {'left~':>8}  title"]
    for r in rows:
        lines.append(f"{r['chapter'] + 1:>4}  {r['done']:>5} {r['pending']:>5} {r['failed']:>5}  "
                     f"{hms(r['done_s']):>8}  {hms(r['remaining_s']):>8}  {r['title']}")
    tot = {k: sum(r[k] for r in rows) for k in ("done", "pending", "failed", "done_s", "remaining_s")}
    lines.append(f"total {tot['done']} done, {tot['pending']} pending, {tot['failed']} failed; "
                 f"{hms(tot['done_s'])} rendered, about {hms(tot['remaining_s'])} of audio left")
    return "\n".join(lines)


def summary_line(book_dir: Path, rows: list[dict], result: dict, seconds: float) -> str:
    """The one line a render ends with: chapters, segments (rendered / reused / failed), minutes, time
    (rows: manifests.summary; result: flows.pipeline.render's counts, when the render ran here)."""
    counts = ""
    if "rendered" in result:
        failed = f", {result['failed']} failed: gaps listed in report.json" if result.get("failed") else ""
        counts = f" ({result['rendered']} rendered, {result['adopted'] + result['already_done']} reused{failed})"
    return (f"{book_dir}: {len(rows)} chapters, {sum(r['done'] for r in rows)} segments{counts}, "
            f"{sum(r['done_s'] for r in rows) / 60:.1f} min of audio, {seconds:.1f} s")
