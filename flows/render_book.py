"""The `render-book` Prefect flow: one flow run per book, one task run per stage.

The flow body is flows.pipeline.render with each stage submitted as a task; the business logic lives in
tasks/ and runs the same without a server.  Progress goes to a Prefect progress artifact (and tqdm on a
terminal)."""
from __future__ import annotations

import os
import socket
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context
from prefect.states import Completed

from flows import pipeline, shards as shards_flow
from flows.concurrency import one_run_per_book
from flows.options import options_from_params
from flows.progress import ArtifactProgress, table_artifact
from flows.signature import takes_render_params
from manifests.lock import BookLocked
from tasks import stages
from tasks.fleet.shards import check_count
from tasks.site.catalogue import SiteOptions, write_catalogue
from tasks.site.status import book_table

# Thin task wrappers.  The manifest, not Prefect's cache, decides what is done.
TASKS = {
    stages.prepare: task(stages.prepare, name="prepare", cache_policy=NO_CACHE, retries=1),
    stages.synthesize: task(stages.synthesize, name="synthesize", cache_policy=NO_CACHE, retries=2,
                            retry_delay_seconds=5),
    stages.freeze_references: task(stages.freeze_references, name="freeze-references", cache_policy=NO_CACHE,
                                   retries=2, retry_delay_seconds=5),
    stages.package: task(stages.package, name="package", cache_policy=NO_CACHE, retries=1),
}


@task(name="write-catalogue", cache_policy=NO_CACHE)
def catalogue_task(out: str, site: SiteOptions) -> int:
    """OUT/index.html and OUT/feed.xml; the number of books listed."""
    return len(write_catalogue(out, site))


def _task_call(fn, *args, **kwargs):
    return TASKS[fn](*args, **kwargs)


@flow(name="render-book", log_prints=True)
@takes_render_params()
def render_book_flow(catalogue: bool = False, base_url: str | None = None, shards: int = 1, shard: int | None = None,
                     shard_token: str | None = None, **render):
    """Render one book (the render parameters are the CLI's options by their Python names: flows/params.py;
    device "auto" picks cuda when the worker sees a GPU).  Returns the book dir.
    In a deployment run, a book already being rendered by another process is skipped (a Completed state saying
    so), not failed; a direct call raises BookLocked.  At the end: a table artifact per book (pipeline.render
    records the source's sha256 for the nightly scan); with catalogue (the nightly's runs), OUT/index.html and
    OUT/feed.xml rewritten (base_url: where OUT is served).  shards > 1 (a deployment run): the book's segments
    over that many runs of this deployment, packaged once (flows/shards.py); shard and shard_token are set by such
    a run for the runs it starts."""
    log = get_run_logger()
    site = SiteOptions(base_url=base_url) if catalogue else None
    opts = options_from_params(**render)
    log.info("rendering %s into %s (model %s, device %s, CUDA_VISIBLE_DEVICES=%s, host %s, pid %d)",
             opts.book, opts.book_dir, opts.engine.model, opts.engine.device,
             os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), socket.gethostname(), os.getpid())
    progress = ArtifactProgress()
    if shard is not None:                    # one shard of a parent run that holds the book
        try:
            counts = pipeline.render_shard(opts, shard, shard_token or "", call=_task_call, on_done=progress)
        finally:
            progress.tqdm.close()
        log.info("%s: shard %d rendered %d segments (%d reused)", opts.book_dir, shard, counts["rendered"],
                 counts["adopted"] + counts["already_done"])
        return counts
    if check_count(shards) > 1 and not _from_deployment():
        raise ValueError("shards > 1: the other shards run as runs of this run's deployment; start the render "
                         "from one (prefect deployment run 'render-book/adhoc' --param shards=N …)")
    fan_out = shards_flow.fan_out(shards, _task_call, progress) if shards > 1 else None
    try:
        with one_run_per_book(opts):          # across machines: Prefect's concurrency limit, keyed by the book
            on_prepared = None if site is None else (lambda _: _rewrite_catalogue(str(opts.out), site, log))
            result = pipeline.render(opts, call=_task_call, on_done=progress, fan_out=fan_out,
                                     on_prepared=on_prepared)
    except BookLocked as e:
        if not _from_deployment():
            raise                            # a direct call (the CLI with a server): the caller decides
        log.warning("skipped, already running: %s", e)
        return Completed(message=f"skipped, already running: {e}", data=None)
    finally:
        progress.tqdm.close()
        if site is not None:
            _rewrite_catalogue(str(opts.out), site, log)
    if progress.artifact_id is None:
        progress(1, 1)                       # nothing to render: still show 100 %
    book_dir = Path(result["book_dir"])
    rows = book_table(book_dir)
    total = sum(r["seconds"] or 0 for r in rows)
    table_artifact("book", str(book_dir), rows, f"{book_dir.name}: {len(rows)} chapters, {total / 60:.1f} min, "
                                                f"{sum(r['failed'] for r in rows)} failed segments")
    log.info("%s: %d chapters, %d segments rendered, %d reused, %d failed, %.1f min of audio", book_dir,
             len(rows), result.get("rendered", 0), result.get("adopted", 0) + result.get("already_done", 0),
             sum(r["failed"] for r in rows), sum(r["seconds"] or 0 for r in rows) / 60)
    return str(book_dir)


def _rewrite_catalogue(out: str, site: SiteOptions, log) -> None:
    """After the book, finished or failed: a catalogue that cannot be written is logged, never the book's
    outcome (nor does it hide the render's own error)."""
    try:
        catalogue_task(out, site)
    except Exception as e:  # noqa: BLE001 — any failure of the page is logged, never the book's outcome
        log.warning("%s: the catalogue was not rewritten: %s", out, e)


def _from_deployment() -> bool:
    return get_run_context().flow_run.deployment_id is not None
