"""The `nightly-catalogue` flow: scan a catalogue folder and start one `render-book` deployment run per book
that needs rendering — new, changed (by the source file's sha256) or incomplete per its manifest
(tasks/intake/scan.py decides which).

Each book becomes its own flow run (run_deployment), so it lands on whichever worker of the pool is free; the
schedule, the pool and the workers are Prefect's.  A book whose render is in flight is skipped: its book-dir
flock is held (tried non-blockingly) or a run for it is still waiting for a worker (asked of the server here).

The output root's catalogue page and feed (tasks/site/catalogue.py) are written after the scan, and again by
each render-book run it starts: when its book is planned (listed as partial, rendering) and when it ends."""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.context import get_run_context
from prefect.deployments import run_deployment

from flows.params import BY_NAME, check
from flows.progress import table_artifact
from flows.render_book import catalogue_task
from flows.shards import wait_for
from flows.signature import takes_render_params
from tasks.fleet.shards import segments_left, shard_count
from tasks.fleet.storage import is_url
from tasks.intake.scan import INCOMPLETE, BookState, scan_books
from tasks.site.catalogue import SiteOptions

RENDER_DEPLOYMENT = "render-book/adhoc"
WAITING_STATES = ("SCHEDULED", "PENDING")   # a run not started yet holds no lock: ask the server


@task(name="scan-catalogue", cache_policy=NO_CACHE)
def scan_task(catalogue: str, out: str) -> list[BookState]:
    return scan_books(catalogue, out)


def _waiting_books(deployment: str) -> set[str]:
    """Books of runs of `deployment` that are scheduled or pending (created, not yet started)."""
    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name(deployment)
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                type=FlowRunFilterStateType(any_=[StateType(s) for s in WAITING_STATES]))))
    return {str(Path(r.parameters.get("book", "")).resolve()) for r in runs if r.parameters.get("book")}


@flow(name="nightly-catalogue")
@takes_render_params(exclude=("book",), own_first=True)
def nightly_catalogue_flow(catalogue: str = "catalogue", deployment: str = RENDER_DEPLOYMENT, wait: bool = False,
                           base_url: str | None = None, segments_per_shard: int | None = None, max_shards: int = 8,
                           **render) -> list[dict]:
    """Start a `deployment` run for every book in `catalogue` that is new, changed or incomplete in `out` (a
    folder or a store URL), with the render parameters given here (flows/params.py: every book in this voice, with
    this model …).  Relative paths are taken from the working directory (the repo root for the deployments).  With
    wait, block until those runs finish and fail when one did not complete.  base_url: where OUT is served (the
    feed's links; None: relative).  segments_per_shard: a book with more segments left than this renders over
    several workers (render-book's shards: one per segments_per_shard, at most max_shards)."""
    log = get_run_logger()
    site = SiteOptions(base_url=base_url)
    check(render)                                              # a bad value fails here, not in every book's run
    out = render["out"]
    changed = {k: v for k, v in render.items() if k != "out" and v != BY_NAME[k].default}   # the rest: defaults
    in_store = is_url(out)             # a store: its books' state is read there; no catalogue page (a folder's)
    catalogue_dir, out_root = Path(catalogue).resolve(), out if in_store else str(Path(out).resolve())
    states = scan_task(str(catalogue_dir), out_root)
    waiting = _waiting_books(deployment)
    run_id = get_run_context().flow_run.id
    rows, started = [], []
    for s in states:
        row = {"book": Path(s.book).name, "state": s.state, "flow_run": ""}
        if s.needs_render and s.book in waiting:
            row["state"] = "waiting"
            log.info("%s: a run is already waiting for a worker; not starting another", s.book)
        elif s.needs_render:
            params = {"book": s.book, "out": out_root, **changed, "catalogue": not in_store, "base_url": base_url}
            if segments_per_shard is not None:
                left = segments_left(Path(s.book), s.book_dir, planned=s.state == INCOMPLETE)   # a folder or a URL
                params["shards"] = shard_count(left, segments_per_shard, max_shards)
            key = hashlib.sha256(f"{run_id}\x1f{s.book}\x1f{s.sha256}".encode()).hexdigest()[:32]
            fr = run_deployment(deployment, parameters={k: v for k, v in params.items() if v is not None},
                                timeout=0, idempotency_key=key, tags=["nightly"])
            row["flow_run"] = fr.name
            started.append(fr)
            log.info("%s (%s): started %s (%d shards)", s.book, s.state, fr.name, params.get("shards", 1))
        else:
            log.info("%s: %s, nothing to do", s.book, s.state)
        rows.append(row)
    table_artifact("nightly", str(catalogue_dir), rows,
                   f"nightly catalogue {catalogue_dir}: {len(started)} renders started")
    if not in_store:
        Path(out_root).mkdir(parents=True, exist_ok=True)
        catalogue_task(out_root, site)                 # every book in OUT as it stands now
    if wait and started:
        wait_for(started)
    return [asdict(s) for s in states]
