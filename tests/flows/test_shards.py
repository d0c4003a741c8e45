"""One book over several workers (issue 15): `render-book` runs with shards=2 on a real Prefect server with two
process workers (the service of tests/flows/conftest.py that tests/flows/test_server.py runs too: the commands
of docs/service.md).

The parent run renders shard 0 on its worker and starts shard 1 as a run of the same deployment, which the
other worker takes; the book is packaged once, byte-identical to a one-shard render.  A shard killed mid-book
(SIGKILL at a crash point, after a committed batch) fails the parent after its own shard ended, with nothing
packaged; rerunning the parent renders only the rest (attempts stay 1, committed audio untouched).  Every process
takes a random engine of those it could run (the service's workers and the references: random_engines), so the
shards equal a one-shard render only by running the book's engine, which its parent recorded."""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from manifests.engine import read_engine
from tasks.bookdir import SHARD_FILE
from tasks.synthesize.render import COMMIT_EVERY_ROWS
from tests.flows.helpers import (
    PAUSE_TIMEOUT_S,
    ByEngine,
    chapter_files,
    cli,
    pause_at,
    random_engines,
    stored_engine,
    tree_digest,
    write_txt_book,
)
from tests.flows.test_server import flow_runs, manifest_rows, run_logs, wait_run

pytestmark = pytest.mark.server

BOOK_CHAPTERS, BOOK_SENTENCES = 3, 20        # 27 segments: each shard commits a batch and has more to do
DEVICE_RE = re.compile(r"CUDA_VISIBLE_DEVICES=(\d),")
RENDERED_RE = re.compile(r"(\d+) segments rendered, (\d+) reused")
SHARD_RE = re.compile(r"shard (\d) rendered (\d+) segments")


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    return write_txt_book(tmp_path_factory.mktemp("book") / "sharded.txt", BOOK_CHAPTERS, BOOK_SENTENCES)


@pytest.fixture(scope="module")
def reference(book, tmp_path_factory):
    """A one-shard render of the book (the CLI) of a given engine (reference(record)): its files but the manifest,
    and its rows but their plan id."""
    def one(out: Path):
        r = cli(str(book), "--model", "random-tiny", "--out", str(out), env=random_engines())
        assert r.returncode == 0, r.stderr
        return outputs(out / book.stem), rows_without_plan(out / book.stem)
    return ByEngine(book.stem, lambda: tmp_path_factory.mktemp("one-shard"), one)


def outputs(book_dir: Path) -> dict[str, str]:
    return {k: v for k, v in tree_digest(book_dir).items() if not k.startswith("manifest/")}


def rows_without_plan(book_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "plan_id"} for r in manifest_rows(book_dir)]


def start(svc, book: Path, out: Path, env: dict | None = None):
    from prefect.deployments import run_deployment

    with svc.client_settings():
        return run_deployment("render-book/adhoc", parameters={"book": str(book), "out": str(out),
                                                                "model": "random-tiny", "shards": 2},
                              job_variables={"env": env} if env else None, timeout=0)


def shard_runs(svc, out: Path) -> list:
    return flow_runs(svc, "render-book/adhoc", out=str(out), shard=1)


def test_the_nightly_shards_a_big_book_over_two_workers_equal_to_one_shard(service, book, reference,
                                                                          tmp_path):
    """The nightly scan picks shards=2 for the book (27 segments, segments_per_shard=14); the parent and its
    shard run on the two workers, each renders segments, and the book equals a one-shard render."""
    from prefect.deployments import run_deployment

    out = tmp_path / "out"
    t0 = time.monotonic()
    with service.client_settings():
        nightly = run_deployment("nightly-catalogue/nightly", timeout=0, parameters={
            "catalogue": str(book.parent), "out": str(out), "model": "random-tiny", "segments_per_shard": 14})
    assert wait_run(service, nightly.id).state.is_completed()
    [parent] = flow_runs(service, "render-book/adhoc", out=str(out), shard=None)
    assert parent.parameters["shards"] == 2, parent.parameters
    parent = wait_run(service, parent.id)
    print(f"\nshards=2 render of {BOOK_CHAPTERS}x{BOOK_SENTENCES} sentences: {time.monotonic() - t0:.1f} s")
    assert parent.state.is_completed(), parent.state
    [child] = shard_runs(service, out)
    assert child.state.is_completed() and child.parameters["shard_token"], child.state
    parent_logs, child_logs = run_logs(service, parent.id), run_logs(service, child.id)
    devices = {DEVICE_RE.search(parent_logs).group(1), DEVICE_RE.search(child_logs).group(1)}
    assert devices == {"0", "1"}, "the two shards did not run on the two workers"
    own, theirs = dict(SHARD_RE.findall(parent_logs)), dict(SHARD_RE.findall(child_logs))
    assert int(own["0"]) > 0 and int(theirs["1"]) > 0, (parent_logs, child_logs)
    rendered, reused = map(int, RENDERED_RE.search(parent_logs).groups())
    assert (rendered, reused) == (int(own["0"]) + int(theirs["1"]), 0)
    book_dir = out / book.stem
    ref = reference(read_engine(book_dir))                                 # the parent's engine, the shard's too
    assert outputs(book_dir) == ref[0] and rows_without_plan(book_dir) == ref[1]
    assert not (book_dir / SHARD_FILE).exists()
    assert len(list((book_dir / "manifest").glob("part-*"))) == 1        # compacted, by the parent, once


def wait_paused_all(crash_dir: Path, point: str, n: int) -> list[int]:
    """The pids of the n processes stopped at `point` (tests.flows.helpers.wait_paused, for several)."""
    t0 = time.monotonic()
    while True:
        pids = [int(m.suffix[1:]) for m in crash_dir.glob(f"{point}.*")]
        stopped = [p for p in pids if psutil.Process(p).status() == psutil.STATUS_STOPPED]
        if len(stopped) == n:
            return stopped
        assert time.monotonic() - t0 < PAUSE_TIMEOUT_S, f"{len(stopped)} of {n} renders reached {point}"
        time.sleep(0.05)


@pytest.mark.slow      # shards in CI: the sharded nightly above and tests/tasks/fleet/test_shards.py
def test_a_killed_shard_fails_the_parent_and_a_rerun_renders_only_the_rest(service, book, reference,
                                                                           tmp_path):
    out, crash = tmp_path / "out", tmp_path / "crash"
    book_dir = out / book.stem
    # The parent's job variables go to its shards: both stop after a committed batch, with more to render.
    first = start(service, book, out, env=pause_at(crash, "segment-written", COMMIT_EVERY_ROWS + 1))
    pids = wait_paused_all(crash, "segment-written", 2)
    run_of = {pid: psutil.Process(pid).environ().get("PREFECT__FLOW_RUN_ID") for pid in pids}
    [shard_pid] = [pid for pid, run_id in run_of.items() if run_id != str(first.id)]
    [parent_pid] = [pid for pid, run_id in run_of.items() if run_id == str(first.id)]
    os.kill(shard_pid, signal.SIGKILL)
    os.kill(parent_pid, signal.SIGCONT)
    failed = wait_run(service, first.id)
    assert failed.state.is_failed() and "did not complete" in (failed.state.message or ""), failed.state
    [killed] = shard_runs(service, out)
    assert killed.state.is_crashed(), killed.state
    assert not chapter_files(book_dir) and not (book_dir / "report.json").exists()   # nothing packaged
    rows = manifest_rows(book_dir)
    before = {r["content_key"]: r for r in rows if r["status"] == "done"}
    audio_before = {k: (book_dir / r["audio_path"]).read_bytes() for k, r in before.items()}
    pending = len(rows) - len(before)
    assert pending and len(before) > COMMIT_EVERY_ROWS, "the killed shard should have committed a batch"

    second = wait_run(service, start(service, book, out).id)
    assert second.state.is_completed(), second.state
    rendered, reused = map(int, RENDERED_RE.search(run_logs(service, second.id)).groups())
    assert (rendered, reused) == (pending, len(before))
    after = {r["content_key"]: r for r in manifest_rows(book_dir)}
    assert {r["attempts"] for r in after.values()} == {1}
    assert all((book_dir / after[k]["audio_path"]).read_bytes() == audio_before[k] for k in before)
    ref = reference(read_engine(book_dir))
    assert outputs(book_dir) == ref[0] and rows_without_plan(book_dir) == ref[1]


@pytest.mark.slow
def test_two_shards_into_a_store(service, s3_server, book, reference, tmp_path):
    """shards=2 with out=s3://… (moto, the real s3fs): the store ends up holding a one-shard render's files;
    the shard worked in a scratch folder of its own, gone at its end.  Slow (~30 s): the default suite has the
    same in test_pgfleet's shards=2 run into a store (one-shard files and rows, one manifest part, no shard
    scratch left), on two workers with their own scratch folders."""
    from prefect.deployments import run_deployment

    from tests.flows.test_fleet import store_files, store_manifest, without_manifest

    url = f"s3://{s3_server.bucket('shards')}/out"
    prefix, scratch = f"shards/out/{book.stem}", tmp_path / "scratch"
    with service.client_settings():                 # the store's endpoint and keys: forwarded to the shard
        run = run_deployment("render-book/adhoc", job_variables={"env": s3_server.env()}, timeout=0, parameters={
            "book": str(book), "out": url, "model": "random-tiny", "shards": 2, "scratch": str(scratch)})
    parent = wait_run(service, run.id)
    assert parent.state.is_completed(), parent.state
    [child] = flow_runs(service, "render-book/adhoc", out=url, shard=1)
    assert child.state.is_completed(), child.state
    assert int(SHARD_RE.search(run_logs(service, child.id)).group(2)) > 0
    fs = s3_server.filesystem()
    stored = store_files(fs, prefix)
    ref = reference(stored_engine(fs, prefix))
    assert without_manifest(stored) == ref[0]                        # no .shards.json, no .lease.json left
    assert len([k for k in stored if k.startswith("manifest/part-")]) == 1
    assert [{k: v for k, v in r.items() if k != "plan_id"} for r in
            store_manifest(fs, prefix, tmp_path / "manifest")] == ref[1]
    assert not [p for p in scratch.rglob("*") if ".shards" in p.parts and p.name != ".shards"]
