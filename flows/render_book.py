"""The `render-book` Prefect flow: one flow run per book, one task run per stage.

The flow body is flows.pipeline.render with each stage submitted as a task; the business logic lives in
tasks/ and runs the same without a server.  Progress goes to a Prefect progress artifact (and tqdm on a
terminal)."""
from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, task
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
                     threads: int | None = None, allow_gaps: bool = False) -> str:
    """Render one book (parameters as the CLI's options; None keeps the default)."""
    from tasks.options import options_from_params

    opts = options_from_params(book, out=out, model=model, voice=voice, formats=formats, device=device,
                               dtype=dtype, int8=int8, compile=compile, max_batch=max_batch, threads=threads,
                               allow_gaps=allow_gaps)
    progress = ArtifactProgress()
    try:
        result = pipeline.render(opts, call=_task_call, on_done=progress)
    finally:
        progress.tqdm.close()
    if progress.artifact_id is None:
        progress(1, 1)                       # nothing to render: still show 100 %
    return str(result["book_dir"])
