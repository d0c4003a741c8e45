"""The `render-book` Prefect flow: one flow run per book, one task run per stage.

The flow body is flows.pipeline.render with each stage submitted as a task; the business logic lives in
tasks/ and runs the same without a server.  Progress goes to a Prefect progress artifact (and tqdm on a
terminal)."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows import pipeline
from flows.progress import TqdmProgress
from tasks import stages

PROGRESS_EVERY_S = 2.0      # seconds between progress-artifact updates

# Thin task wrappers.  The manifest, not Prefect's cache, decides what is done.
TASKS = {
    stages.prepare: task(stages.prepare, name="prepare", cache_policy=NO_CACHE, retries=1),
    stages.synthesize: task(stages.synthesize, name="synthesize", cache_policy=NO_CACHE, retries=2,
                            retry_delay_seconds=5),
    stages.package: task(stages.package, name="package", cache_policy=NO_CACHE, retries=1),
}


def _task_call(fn, *args, **kwargs):
    return TASKS[fn](*args, **kwargs)


class ArtifactProgress:
    """on_done(done, total) → a Prefect progress artifact (throttled) plus tqdm on a terminal."""

    def __init__(self):
        self.artifact_id = None
        self.last = 0.0
        self.tqdm = TqdmProgress()

    def __call__(self, done: int, total: int) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        self.tqdm(done, total)
        pct = 100.0 * done / total if total else 100.0
        now = time.monotonic()
        if self.artifact_id is None:
            self.artifact_id = create_progress_artifact(progress=pct, key="render-progress",
                                                        description="segments rendered")
        elif done == total or now - self.last >= PROGRESS_EVERY_S:
            update_progress_artifact(artifact_id=self.artifact_id, progress=pct)
        else:
            return
        self.last = now


@flow(name="render-book", log_prints=True)
def render_book_flow(book: str, out: str | None = None, model: str | None = None, voice: str | None = None,
                     formats: list[str] | None = None, device: str | None = None, dtype: str | None = None,
                     int8: bool = False, compile: bool = False, max_batch: int | None = None,
                     threads: int | None = None, allow_gaps: bool = False, chapters: str | None = None,
                     lexicon: str | None = None, t2s: bool = True, guard: bool = True,
                     guard_attempts: int | None = None):
    """Render one book (parameters as the CLI's options; None keeps the default; device "auto" picks cuda
    when the worker sees a GPU).  Returns the book dir.  In a deployment run, a book already being rendered
    by another process is skipped (a Completed state saying so), not failed; a direct call raises
    BookLocked.  At the end: the source's sha256 (for the nightly scan) and a table artifact per book."""
    from prefect.states import Completed

    from manifests.source import record_source_hash, source_sha256
    from manifests.lock import BookLocked
    from tasks.options import options_from_params

    log = get_run_logger()
    device = resolve_device(device)
    opts = options_from_params(book, out=out, model=model, voice=voice, formats=formats, device=device,
                               dtype=dtype, int8=int8, compile=compile, max_batch=max_batch, threads=threads,
                               allow_gaps=allow_gaps, chapters=chapters, lexicon=lexicon, t2s=t2s, guard=guard,
                               guard_attempts=guard_attempts)
    log.info("rendering %s into %s (model %s, device %s, CUDA_VISIBLE_DEVICES=%s, host %s, pid %d)",
             opts.book, opts.book_dir, opts.engine.model, opts.engine.device,
             os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), socket.gethostname(), os.getpid())
    sha = source_sha256(opts.book) if opts.book.is_file() else None
    progress = ArtifactProgress()
    try:
        result = pipeline.render(opts, call=_task_call, on_done=progress)
    except BookLocked as e:
        if not _from_deployment():
            raise                            # a direct call (the CLI with a server): the caller decides
        log.warning("skipped, already running: %s", e)
        return Completed(message=f"skipped, already running: {e}", data=None)
    finally:
        progress.tqdm.close()
    if progress.artifact_id is None:
        progress(1, 1)                       # nothing to render: still show 100 %
    book_dir = Path(result["book_dir"])
    if sha is not None:
        record_source_hash(book_dir, opts.book, sha)
    rows = book_table(book_dir)
    _table_artifact(book_dir, rows)
    log.info("%s: %d chapters, %d segments rendered, %d reused, %d failed, %.1f min of audio", book_dir,
             len(rows), result.get("rendered", 0), result.get("adopted", 0) + result.get("already_done", 0),
             sum(r["failed"] for r in rows), sum(r["seconds"] or 0 for r in rows) / 60)
    return str(book_dir)


def resolve_device(device: str | None) -> str | None:
    """"auto" (the deployments' default): cuda when this worker sees a GPU (CUDA_VISIBLE_DEVICES), else cpu."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _from_deployment() -> bool:
    from prefect.context import get_run_context

    return get_run_context().flow_run.deployment_id is not None


def book_table(book_dir: Path) -> list[dict]:
    """One row per chapter: segments done/failed, rendered seconds, and the final file's duration and loudness
    (from manifests.summary and report.json)."""
    import json

    from manifests import load, summary
    from tasks.audio.package import REPORT_NAME

    try:
        report = json.loads((book_dir / REPORT_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {}
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


def _table_artifact(book_dir: Path, rows: list[dict]) -> None:
    from prefect.artifacts import create_table_artifact

    from flows.nightly import artifact_key

    total = sum(r["seconds"] or 0 for r in rows)
    create_table_artifact(key=artifact_key("book", str(book_dir)), table=rows,
                          description=f"{book_dir.name}: {len(rows)} chapters, {total / 60:.1f} min, "
                                      f"{sum(r['failed'] for r in rows)} failed segments")
