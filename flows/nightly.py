"""The `nightly-catalogue` flow: scan a catalogue folder and start one `render-book` deployment run per book
that needs rendering — new, changed (by the source file's sha256) or incomplete per its manifest.

Each book becomes its own flow run (run_deployment), so it lands on whichever worker of the pool is free; the
schedule, the pool and the workers are Prefect's.  A book whose render is in flight is skipped: its book-dir
flock is held (tried non-blockingly) or a run for it is still waiting for a worker.  The plain functions here
(scan_catalogue, book_state, the source-hash record) need no server; only the flow talks to Prefect."""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from manifests.source import read_source_hash, record_source_hash, source_sha256  # noqa: F401 (re-exported)

CATALOGUE_SUFFIXES = (".epub", ".txt")
RENDER_DEPLOYMENT = "render-book/adhoc"
WAITING_STATES = ("SCHEDULED", "PENDING")   # a run not started yet holds no lock: ask the server

# Why a book is (not) rendered tonight.
NEW, CHANGED, INCOMPLETE, COMPLETE, RUNNING = "new", "changed", "incomplete", "complete", "running"
TO_RENDER = (NEW, CHANGED, INCOMPLETE)


@dataclass(frozen=True)
class BookState:
    book: str           # absolute path of the source file
    book_dir: str       # OUT/<slug>
    sha256: str
    state: str          # new | changed | incomplete | complete | running

    @property
    def needs_render(self) -> bool:
        return self.state in TO_RENDER


def render_complete(book_dir: str | Path) -> bool:
    """Every segment of the latest plan is done and the outputs were packaged (report.json exists)."""
    from manifests import STATUS_DONE, load
    from tasks.audio.package import REPORT_NAME

    book_dir = Path(book_dir)
    table = load(book_dir)
    if table.num_rows == 0 or not (book_dir / REPORT_NAME).is_file():
        return False
    return all(s == STATUS_DONE for s in table.column("status").to_pylist())


def render_in_flight(book_dir: str | Path) -> bool:
    """True when a live process holds the book dir's lock (tried non-blockingly, released at once)."""
    from manifests.lock import BookLock, BookLocked

    if not Path(book_dir).is_dir():          # BookLock would create it: a missing dir has no holder
        return False
    try:
        BookLock(book_dir).acquire().release()
    except BookLocked:
        return True
    return False


def book_state(book: str | Path, out: str | Path) -> BookState:
    from tasks.options import book_slug

    book = Path(book).resolve()
    book_dir = Path(out).resolve() / book_slug(book)
    sha = source_sha256(book)
    if render_in_flight(book_dir):
        state = RUNNING
    elif not (book_dir / "manifest").is_dir():
        state = NEW
    elif (recorded := read_source_hash(book_dir)) is not None and recorded != sha:
        state = CHANGED
    elif not render_complete(book_dir):
        state = INCOMPLETE
    elif recorded is None:
        state = CHANGED      # rendered without the service (hash never recorded): a resume run records it
    else:
        state = COMPLETE
    return BookState(str(book), str(book_dir), sha, state)


def catalogue_books(catalogue: str | Path) -> list[Path]:
    """The .epub and .txt files under catalogue (recursively, hidden files skipped), in a stable order."""
    from tasks.errors import BookError

    root = Path(catalogue)
    if not root.is_dir():
        raise BookError(str(root), "catalogue folder does not exist")
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in CATALOGUE_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def scan_catalogue(catalogue: str | Path, out: str | Path) -> list[BookState]:
    """Each book's state.  Two books that would share an output folder (same slug) are a BookError."""
    from tasks.errors import BookError

    states = [book_state(p, out) for p in catalogue_books(catalogue)]
    seen: dict[str, str] = {}
    for s in states:
        if s.book_dir in seen:
            raise BookError(s.book, f"would render into the same folder as {seen[s.book_dir]} ({s.book_dir})")
        seen[s.book_dir] = s.book
    return states


def artifact_key(prefix: str, name: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) unique to name."""
    ascii_part = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{prefix}-{ascii_part}-{digest}" if ascii_part else f"{prefix}-{digest}"


@task(name="scan-catalogue", cache_policy=NO_CACHE)
def scan_task(catalogue: str, out: str) -> list[BookState]:
    return scan_catalogue(catalogue, out)


def _waiting_books(deployment: str) -> set[str]:
    """Books of runs of `deployment` that are scheduled or pending (created, not yet started)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (DeploymentFilter, DeploymentFilterId, FlowRunFilter,
                                                FlowRunFilterState, FlowRunFilterStateType)
    from prefect.client.schemas.objects import StateType

    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name(deployment)
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                type=FlowRunFilterStateType(any_=[StateType(s) for s in WAITING_STATES]))))
    return {str(Path(r.parameters.get("book", "")).resolve()) for r in runs if r.parameters.get("book")}


@flow(name="nightly-catalogue")
def nightly_catalogue_flow(catalogue: str = "catalogue", out: str = "output", model: str | None = None,
                           voice: str | None = None, formats: list[str] | None = None,
                           device: str | None = None, deployment: str = RENDER_DEPLOYMENT,
                           wait: bool = False) -> list[dict]:
    """Start a `deployment` run for every book in `catalogue` that is new, changed or incomplete.
    Relative paths are taken from the working directory (the repo root for the deployments).  With wait,
    block until those runs finish and fail when one did not complete."""
    from prefect.artifacts import create_table_artifact
    from prefect.context import get_run_context
    from prefect.deployments import run_deployment

    log = get_run_logger()
    catalogue_dir, out_dir = Path(catalogue).resolve(), Path(out).resolve()
    states = scan_task(str(catalogue_dir), str(out_dir))
    waiting = _waiting_books(deployment)
    run_id = get_run_context().flow_run.id
    rows, started = [], []
    for s in states:
        row = {"book": Path(s.book).name, "state": s.state, "flow_run": ""}
        if s.needs_render and s.book in waiting:
            row["state"] = "waiting"
            log.info("%s: a run is already waiting for a worker; not starting another", s.book)
        elif s.needs_render:
            params = {"book": s.book, "out": str(out_dir), "model": model, "voice": voice, "formats": formats,
                      "device": device}
            key = hashlib.sha256(f"{run_id}\x1f{s.book}\x1f{s.sha256}".encode()).hexdigest()[:32]
            fr = run_deployment(deployment, parameters={k: v for k, v in params.items() if v is not None},
                                timeout=0, idempotency_key=key, tags=["nightly"])
            row["flow_run"] = fr.name
            started.append(fr)
            log.info("%s (%s): started %s", s.book, s.state, fr.name)
        else:
            log.info("%s: %s, nothing to do", s.book, s.state)
        rows.append(row)
    create_table_artifact(key=artifact_key("nightly", str(catalogue_dir)), table=rows,
                          description=f"nightly catalogue {catalogue_dir}: {len(started)} renders started")
    if wait and started:
        _wait_for(started)
    return [asdict(s) for s in states]


def _wait_for(runs) -> None:
    import time

    from prefect.client.orchestration import get_client

    pending = {r.id for r in runs}
    failed = []
    with get_client(sync_client=True) as client:
        while pending:
            for rid in list(pending):
                fr = client.read_flow_run(rid)
                if fr.state is not None and fr.state.is_final():
                    pending.discard(rid)
                    if not fr.state.is_completed():
                        failed.append(f"{fr.name}: {fr.state.type.value}")
            if pending:
                time.sleep(float(os.environ.get("CHATTTS_NIGHTLY_POLL_S", "5")))
    if failed:
        raise RuntimeError(f"{len(failed)} book renders did not complete: {', '.join(failed)}")
