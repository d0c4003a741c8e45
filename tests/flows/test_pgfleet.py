"""docs/service.md "A fleet", command for command: a Prefect server on PostgreSQL (a private cluster on loopback,
tests/pgserver.py), two process workers as two machines (each its own HOME, Prefect profile and scratch
folder), books and audiobooks in an S3-compatible store (moto's server, the real s3fs client).

Acceptance 2 on that setup: two simultaneous runs of one book, one renders and the other ends skipped; the
audiobook in the store equals a local render byte for byte.
Run alone: `python -m pytest -m server tests/flows/test_pgfleet.py -q`."""
from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from manifests.crashpoints import HOLD
from tests.flows.helpers import pause_at, tree_digest, wait_held, write_txt_book
from tests.flows.prefect_service import FLEET_SECTION, PrefectService, doc_commands, doc_lines
from tests.flows.test_fleet import render, store_files, store_manifest, without_manifest
from tests.flows.test_server import artifacts, params, run_logs, wait_final, wait_run

pytestmark = pytest.mark.server

RUN_TIMEOUT_S = 300            # one flow run, start to end, on a loaded 2-core machine
BOOK_CHAPTERS, BOOK_SENTENCES = 2, 8
DOC_STORE = {"book": "s3://books/in/novel.epub", "out": "s3://audiobooks/out"}   # the recipe's URLs
WORKERS = ("worker0", "worker1")


def doc(fragment: str) -> str:
    """The one command line of the fleet recipe containing fragment."""
    found = [c for c in doc_commands(section=FLEET_SECTION) if fragment in c]
    assert len(found) == 1, f"{fragment!r} matches {found}"
    return found[0]


def doc_shell(prefix: str) -> list[str]:
    """The fleet recipe's shell lines starting with prefix (the `sudo -u postgres …` and `export …` lines)."""
    return [line for heading, line in doc_lines() if heading.startswith(FLEET_SECTION) and line.startswith(prefix)]


def machine(root: Path, name: str, store_env: dict[str, str]) -> dict[str, str]:
    """The environment of one worker machine: its own HOME and Prefect profile, the store's credentials and
    endpoint (the variables the recipe's `export` line names)."""
    home = root / name
    (home / ".prefect").mkdir(parents=True)
    [export] = doc_shell("export ")
    names = {w.split("=", 1)[0] for w in shlex.split(export)[1:]}
    assert names <= set(store_env), f"the recipe exports {names}, the test's store gives {set(store_env)}"
    return {"HOME": str(home), "PREFECT_HOME": str(home / ".prefect"),
            "PREFECT_PROFILES_PATH": str(home / ".prefect" / "profiles.toml"), **store_env}


@pytest.fixture(scope="module")
def fleet(pg_server, s3_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    svc = PrefectService(root / "server", sqlite=False)
    t0 = time.monotonic()
    try:
        for line in doc_shell("sudo -u postgres "):
            pg_server.as_system_user(line)
        svc.run(doc("DATABASE_CONNECTION_URL"), replace={"localhost:5432": f"{pg_server.host}:{pg_server.port}"})
        svc.start("server", doc("server start"), replace={"0.0.0.0": "127.0.0.1"})
        svc.wait_healthy()
        here = {"server-host": "127.0.0.1"}
        svc.run(doc("set PREFECT_API_URL"), replace=here)
        svc.run(doc("automation create"))
        svc.run(doc("work-pool create"))
        svc.run(doc("prefect deploy --all"))
        svc.machines = {}
        worker_lines = [doc("CUDA_VISIBLE_DEVICES=0 "), doc("CUDA_VISIBLE_DEVICES=1 ")]
        for name, line in zip(WORKERS, worker_lines):
            env = svc.machines[name] = machine(root, name, s3_server.env())
            svc.run(doc("HEARTBEAT_FREQUENCY=30 PREFECT_API_URL"), replace=here, env=env)
            svc.start(name, line, replace={"/mnt/fast/scratch": f"{env['HOME']}/scratch"}, extra=["--name", name],
                      env=env)
        svc.t0 = t0
        yield svc
    finally:
        svc.stop()
        print(f"\nfleet (PostgreSQL, S3, two workers): {time.monotonic() - t0:.0f} s from server start to teardown")


def test_the_server_runs_on_postgresql(fleet, pg_server):
    """The server's tables are in the recipe's PostgreSQL database, owned by its role (not a SQLite file)."""
    tables = pg_server.as_system_user('sudo -u postgres psql -d prefect -At -c "SELECT tableowner FROM pg_tables '
                                      "WHERE tablename = 'flow_run'\"")
    assert tables.split() == ["prefect"]
    assert not list(fleet.home.rglob("*.db")), "a SQLite database was created"


def test_two_runs_of_one_book_one_renders_one_is_skipped(fleet, s3_server, tmp_path):
    """The first run is held mid-book (alive: its concurrency slot's lease and heartbeats go on); the second,
    started meanwhile on the other worker, ends Completed "skipped, already running" without rendering; the
    first then finishes, and the store holds exactly the files of a local render of the book."""
    from prefect.deployments import run_deployment

    book = write_txt_book(tmp_path / "novel.txt", BOOK_CHAPTERS, BOOK_SENTENCES)
    fs, bucket = s3_server.filesystem(), s3_server.bucket("fleet-two-runs")
    fs.put_file(str(book), f"{bucket}/books/novel.txt")
    urls = {"book": f"s3://{bucket}/books/novel.txt", "out": f"s3://{bucket}/out"}
    crash = tmp_path / "crash"
    with fleet.client_settings():
        first = run_deployment("render-book/adhoc", parameters={**urls, "model": "random-tiny"}, timeout=0,
                               job_variables={"env": pause_at(crash, "segment-written", 2, mode=HOLD)})
    marker = wait_held(crash, "segment-written")
    second = fleet.run(doc("'render-book/adhoc'"), replace={DOC_STORE[k]: v for k, v in urls.items()},
                       extra=params("model=random-tiny"), timeout=RUN_TIMEOUT_S)
    assert "Completed" in second.stdout, second.stdout[-2000:]
    marker.unlink()                                     # the first run goes on
    done = wait_run(fleet, first.id, timeout=RUN_TIMEOUT_S)
    assert done.state.is_completed() and "skipped" not in (done.state.message or ""), done.state

    runs = {r.id: r for r in (done, *flow_runs_of(fleet, urls["out"]))}
    [skipped] = [r for r in runs.values() if r.id != first.id]
    assert skipped.state.is_completed(), skipped.state
    assert "skipped, already running" in skipped.state.message and "concurrency limit" in skipped.state.message
    devices = {run_id: device_of(run_logs(fleet, run_id)) for run_id in runs}
    assert sorted(devices.values()) == ["0", "1"], "the two runs should have run on the two workers"
    assert not [a for a in artifacts(fleet, skipped.id) if a.type == "table"], "the skipped run rendered"

    prefix = f"{bucket}/out/novel"
    rows = store_manifest(fs, prefix, tmp_path / "manifest")
    assert rows and {r["status"] for r in rows} == {"done"} and {r["attempts"] for r in rows} == {1}
    local = tmp_path / "local"
    r = render(str(book), "--model", "random-tiny", "--out", str(local), env={})
    assert r.returncode == 0, r.stderr
    stored = without_manifest(store_files(fs, prefix))
    want = without_manifest(tree_digest(local / "novel"))
    assert stored.pop("book.json") and want.pop("book.json")           # its source_path: where the book was read
    assert stored == want


def test_nightly_scan_against_the_store(fleet, s3_server, tmp_path):
    """The recipe's nightly scan with out=s3://…: the first starts one render per book, each completes into the
    store and publishes its source record; the second finds every book complete there and starts none."""
    cat = tmp_path / "catalogue"
    cat.mkdir()
    books = [write_txt_book(cat / "甲书.txt", 1, 3), write_txt_book(cat / "b-book.txt", 1, 4)]
    fs, bucket = s3_server.filesystem(), s3_server.bucket("fleet-nightly")
    out = f"s3://{bucket}/out"
    nightly = dict(replace={"/srv/books": str(cat), DOC_STORE["out"]: out},
                   extra=params("model=random-tiny") + ["--watch"], timeout=RUN_TIMEOUT_S)
    first = fleet.run(doc("'nightly-catalogue/nightly'"), **nightly)
    assert "Completed" in first.stdout, first.stdout[-2000:]
    runs = wait_final(fleet, "render-book/adhoc", len(books), out=out)
    assert sorted(r.parameters["book"] for r in runs) == sorted(str(b.resolve()) for b in books)
    assert all(r.state.is_completed() and "skipped" not in (r.state.message or "") for r in runs), runs
    fs.invalidate_cache()
    for b in books:
        assert fs.isfile(f"{bucket}/out/{b.stem}/report.json"), b
        assert fs.isfile(f"{bucket}/out/{b.stem}/manifest/source.json"), b

    again = fleet.run(doc("'nightly-catalogue/nightly'"), **nightly)
    assert "Completed" in again.stdout, again.stdout[-2000:]
    assert len(flow_runs_of(fleet, out)) == len(books), "the second scan started renders of complete books"


def flow_runs_of(svc: PrefectService, out: str) -> list:
    """The render-book runs into out."""
    from tests.flows.test_server import flow_runs

    return flow_runs(svc, "render-book/adhoc", out=out)


def device_of(logs: str) -> str:
    """The CUDA_VISIBLE_DEVICES the flow run's worker had (render-book logs it when it starts)."""
    import re

    found = set(re.findall(r"CUDA_VISIBLE_DEVICES=(\w+),", logs))
    assert len(found) == 1, f"CUDA_VISIBLE_DEVICES in the run's logs: {found}"
    return found.pop()
