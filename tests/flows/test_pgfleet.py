"""docs/service.md "A fleet", command for command: a Prefect server on PostgreSQL (a private cluster on loopback,
tests/pgserver.py), two process workers as two machines (each its own HOME, Prefect profile and scratch
folder), books and audiobooks in an S3-compatible store (moto's server, the real s3fs client).

Acceptance 2 on that setup: two simultaneous runs of one book, one renders and the other ends skipped; with
shards=2 both workers render segments of one book; either way the audiobook in the store equals a local
one-shard render of the book's engine byte for byte.  And the nightly scan against the store.  Every process takes a
random engine of those it could run (tests.flows.helpers.random_engines): the book's first one chooses, and every
worker after it runs the book's engine (issue 39).
Run alone: `python -m pytest -m server tests/flows/test_pgfleet.py -q`."""
from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest

import manifests
from manifests.crashpoints import HOLD
from tests.flows.helpers import (
    ByEngine,
    pages_digest,
    pause_at,
    random_engines,
    stored_engine,
    tree_digest,
    wait_held,
    write_txt_book,
)
from tests.flows.prefect_service import FLEET_SECTION, PrefectService, doc_commands, doc_lines
from tests.flows.test_fleet import render, store_files, store_manifest, without_manifest
from tests.flows.test_server import artifacts, params, run_logs, wait_final, wait_run

pytestmark = pytest.mark.server

RUN_TIMEOUT_S = 300            # one flow run, start to end, on a loaded 2-core machine
BOOK_CHAPTERS, BOOK_SENTENCES = 2, 8
DOC_STORE = {"book": "s3://books/in/novel.epub", "out": "s3://audiobooks/out"}   # the recipe's URLs
WORKERS = ("worker0", "worker1")
SHARD_RE = re.compile(r"shard (\d+) rendered (\d+) segments")     # flows/render_book.py's log line


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
            "PREFECT_PROFILES_PATH": str(home / ".prefect" / "profiles.toml"), **store_env, **random_engines()}


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
        svc.run(doc("prefect deploy --name adhoc"))
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


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    return write_txt_book(tmp_path_factory.mktemp("book") / "novel.txt", BOOK_CHAPTERS, BOOK_SENTENCES)


@pytest.fixture(scope="module")
def local_render(book, tmp_path_factory):
    """A local one-shard render (the CLI) of the book's engine (local_render(record)): its files but the manifest and
    book.json (whose source_path says where the book was read), and its manifest rows but their plan id."""
    def one(out: Path):
        r = render(str(book), "--model", "random-tiny", "--out", str(out), env=random_engines())
        assert r.returncode == 0, r.stderr
        files = without_manifest(tree_digest(out / "novel"))
        source = json.loads(files.pop("book.json") and (out / "novel" / "book.json").read_text())["source_path"]
        files.update(pages_digest(lambda p: (out / "novel" / p).read_text(encoding="utf-8"), source))
        return files, without_plan(manifests.load(out / "novel").to_pylist())
    return ByEngine("novel", lambda: tmp_path_factory.mktemp("local"), one)


def without_plan(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "plan_id"} for r in rows]


def in_store(fs, bucket: str, tmp: Path) -> tuple[dict, list[dict]]:
    """The book as the store holds it, as local_render gives it."""
    files = without_manifest(store_files(fs, f"{bucket}/out/novel"))
    assert files.pop("book.json")
    source = json.loads(fs.cat_file(f"{bucket}/out/novel/book.json"))["source_path"]
    files.update(pages_digest(lambda p: fs.cat_file(f"{bucket}/out/novel/{p}").decode(), source))
    return files, without_plan(store_manifest(fs, f"{bucket}/out/novel", tmp))


def upload(s3_server, book: Path, bucket: str) -> tuple:
    """(the store's filesystem, {book: its URL in a new bucket, out: the bucket's output root})."""
    fs, bucket = s3_server.filesystem(), s3_server.bucket(bucket)
    fs.put_file(str(book), f"{bucket}/books/{book.name}")
    return fs, {"book": f"s3://{bucket}/books/{book.name}", "out": f"s3://{bucket}/out"}


def test_the_server_runs_on_postgresql(fleet, pg_server):
    """The server's tables are in the recipe's PostgreSQL database, owned by its role (not a SQLite file)."""
    tables = pg_server.as_system_user('sudo -u postgres psql -d prefect -At -c "SELECT tableowner FROM pg_tables '
                                      "WHERE tablename = 'flow_run'\"")
    assert tables.split() == ["prefect"]
    assert not list(fleet.home.rglob("*.db")), "a SQLite database was created"


@pytest.mark.slow      # the book lock in CI: test_server's locked book
def test_two_runs_of_one_book_one_renders_one_is_skipped(fleet, s3_server, book, local_render, tmp_path):
    """The first run is held mid-book (alive: its concurrency slot's lease and heartbeats go on); the second,
    started meanwhile on the other worker, ends Completed "skipped, already running" without rendering; the
    first then finishes, and the store holds exactly the files of a local render of the book."""
    from prefect.deployments import run_deployment

    fs, urls = upload(s3_server, book, "fleet-two-runs")
    crash = tmp_path / "crash"
    with fleet.client_settings():
        first = run_deployment("render-book/adhoc", parameters={**urls, "model": "random-tiny"}, timeout=0,
                               job_variables={"env": pause_at(crash, "segment-written", 2, mode=HOLD)})
    marker = wait_held(crash, "segment-written")
    second = fleet.run(doc("out=s3://audiobooks/out --watch"), replace={DOC_STORE[k]: v for k, v in urls.items()},
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

    bucket = urls["out"].split("/")[2]
    files, rows = in_store(fs, bucket, tmp_path / "manifest")
    assert {r["status"] for r in rows} == {"done"} and {r["attempts"] for r in rows} == {1}
    record = stored_engine(fs, f"{bucket}/out/novel")
    assert {r["engine_version"] for r in rows} == {record.version}
    assert (files, rows) == local_render(record)


def test_one_book_over_both_workers_equals_a_one_shard_render(fleet, s3_server, book, local_render, tmp_path):
    """The recipe's shards=2 line: the parent run renders shard 0 on one worker, its shard run shard 1 on the
    other (each logs its CUDA_VISIBLE_DEVICES and how many segments it rendered: both > 0, together the book);
    the store then holds a local one-shard render byte for byte (the manifest's rows too, plan id aside)."""
    fs, urls = upload(s3_server, book, "fleet-shards")
    p = fleet.run(doc("--param shards=2"), replace={DOC_STORE[k]: v for k, v in urls.items()},
                  extra=params("model=random-tiny"), timeout=RUN_TIMEOUT_S)
    assert "Completed" in p.stdout, p.stdout[-2000:]
    [parent] = [r for r in flow_runs_of(fleet, urls["out"]) if r.parameters.get("shard") is None]
    [child] = [r for r in flow_runs_of(fleet, urls["out"]) if r.parameters.get("shard") == 1]
    assert parent.state.is_completed() and child.state.is_completed(), (parent.state, child.state)
    logs = {0: run_logs(fleet, parent.id), 1: run_logs(fleet, child.id)}
    assert {device_of(logs[0]), device_of(logs[1])} == {"0", "1"}, "the shards did not run on the two workers"
    counts = {i: int(dict(SHARD_RE.findall(logs[i]))[str(i)]) for i in (0, 1)}
    assert counts[0] > 0 and counts[1] > 0, counts
    bucket = urls["out"].split("/")[2]
    record = stored_engine(fs, f"{bucket}/out/novel")                  # the parent's, which the shard ran
    reference = local_render(record)
    assert counts[0] + counts[1] == len(reference[1])
    print(f"\nshards=2 on the fleet: shard 0 rendered {counts[0]} segments on CUDA_VISIBLE_DEVICES="
          f"{device_of(logs[0])}, shard 1 rendered {counts[1]} on CUDA_VISIBLE_DEVICES={device_of(logs[1])}")
    assert in_store(fs, bucket, tmp_path / "manifest") == reference
    parts = [k for k in fs.find(f"{bucket}/out/novel/manifest") if k.rsplit("/", 1)[-1].startswith("part-")]
    assert len(parts) == 1, parts                       # compacted by the parent, once
    shards = [p for env in fleet.machines.values() for p in (Path(env["HOME"]) / "scratch").rglob(".shards")]
    assert shards and not [p for d in shards for p in d.iterdir()]   # the shard's own scratch folder is gone


@pytest.mark.slow      # the nightly in CI: test_shards' sharded nightly
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
        record = stored_engine(fs, f"{bucket}/out/{b.stem}")            # the book's engine, published with it
        assert {r["engine_version"] for r in store_manifest(fs, f"{bucket}/out/{b.stem}", tmp_path / b.stem)} == \
            {record.version}

    again = fleet.run(doc("'nightly-catalogue/nightly'"), **nightly)
    assert "Completed" in again.stdout, again.stdout[-2000:]
    assert len(flow_runs_of(fleet, out)) == len(books), "the second scan started renders of complete books"


def flow_runs_of(svc: PrefectService, out: str) -> list:
    """The render-book runs into out."""
    from tests.flows.test_server import flow_runs

    return flow_runs(svc, "render-book/adhoc", out=out)


def device_of(logs: str) -> str:
    """The CUDA_VISIBLE_DEVICES the flow run's worker had (render-book logs it when it starts)."""
    found = set(re.findall(r"CUDA_VISIBLE_DEVICES=(\w+),", logs))
    assert len(found) == 1, f"CUDA_VISIBLE_DEVICES in the run's logs: {found}"
    return found.pop()
