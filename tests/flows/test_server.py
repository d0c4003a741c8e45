"""A real Prefect service on loopback: `prefect server start`, a process work pool, two workers, `prefect deploy
--name adhoc --name nightly` from prefect.yaml; an ad-hoc render, the nightly catalogue, the schedule, and a worker
killed mid-book.

Every command is a command of docs/service.md (tests/flows/prefect_service.py runs the doc lines).
Run alone: `python -m pytest -m server tests/flows/test_server.py -q` (about 3-5 min on 2 cores)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tasks.synthesize.render import COMMIT_EVERY_ROWS
from tests.conftest import ROOT
from tests.flows.helpers import SAMPLE, chapter_files, pause_at, wait_paused, write_txt_book
from tests.flows.prefect_service import FLEET_SECTION, POOL, PrefectService, doc, doc_commands

pytestmark = pytest.mark.server

RUN_TIMEOUT_S = 300        # one flow run, start to end, on a loaded 2-core machine
CRASH_MARK_TIMEOUT_S = 240  # s: heartbeat every 30 s, crashed after 90 s without one, plus the trigger's sweep
TINY = ["model=random-tiny"]


def params(*kv: str) -> list[str]:
    return [w for p in kv for w in ("--param", p)]


def flow_runs(svc: PrefectService, deployment: str, **match) -> list:
    """Flow runs of a deployment whose parameters include match."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with svc.client_settings(), get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name(deployment)
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])))
    return [r for r in runs if all(r.parameters.get(k) == v for k, v in match.items())]


def wait_final(svc: PrefectService, deployment: str, n: int, timeout: float = RUN_TIMEOUT_S, **match) -> list:
    """Wait until n runs matching exist and all are final; return them."""
    t0 = time.monotonic()
    while True:
        runs = flow_runs(svc, deployment, **match)
        if len(runs) >= n and all(r.state and r.state.is_final() for r in runs):
            return runs
        if time.monotonic() - t0 > timeout:
            states = [(r.name, r.state and r.state.type.value) for r in runs]
            raise AssertionError(f"{deployment}: {states} after {timeout} s\n"
                                 f"worker0:\n{svc.log('worker0')[-3000:]}\nworker1:\n{svc.log('worker1')[-3000:]}")
        time.sleep(1)


def wait_run(svc: PrefectService, run_id, timeout: float = RUN_TIMEOUT_S):
    """The flow run once it is in a final state."""
    from prefect.client.orchestration import get_client

    t0 = time.monotonic()
    with svc.client_settings(), get_client(sync_client=True) as client:
        while not (run := client.read_flow_run(run_id)).state.is_final():
            assert time.monotonic() - t0 < timeout, f"{run.name}: {run.state.type.value} after {timeout} s"
            time.sleep(1)
    return run


def run_logs(svc: PrefectService, run_id) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with svc.client_settings(), get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
    return "\n".join(entry.message for entry in logs)


def artifacts(svc: PrefectService, run_id) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with svc.client_settings(), get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(
            any_=[run_id])))


def manifest_rows(book_dir: Path) -> list[dict]:
    from manifests import load

    return load(book_dir).to_pylist()


def test_schedule_on_server_is_prefect_yaml(service):
    import yaml

    spec = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}
    want = spec["nightly"]["schedules"][0]
    out = service.run(doc("deployment inspect"), extra=["--output", "json"]).stdout
    shown = json.loads(out)
    assert [(s["schedule"]["cron"], s["schedule"]["timezone"], s["active"]) for s in shown["schedules"]] == \
        [(want["cron"], want["timezone"], True)]
    assert shown["work_pool_name"] == POOL and shown["entrypoint"] == spec["nightly"]["entrypoint"]
    [sched_id] = [s["id"] for s in shown["schedules"]]
    listed = service.run(doc("schedule ls")).stdout
    assert want["cron"] in listed and sched_id in listed

    service.run(doc("schedule pause"), replace={"SCHEDULE_ID": sched_id})
    paused = json.loads(service.run(doc("deployment inspect"), extra=["--output", "json"]).stdout)
    assert [s["active"] for s in paused["schedules"]] == [False]
    service.run(doc("schedule resume"), replace={"SCHEDULE_ID": sched_id})
    resumed = json.loads(service.run(doc("deployment inspect"), extra=["--output", "json"]).stdout)
    assert [s["active"] for s in resumed["schedules"]] == [True]


def test_adhoc_render_via_deployment(service, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = service.run(doc("'render-book/adhoc'"), replace={"examples/daodejing.epub": str(SAMPLE)},
                    extra=params(*TINY, f"out={out}"), timeout=RUN_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    assert "Completed" in p.stdout, p.stdout[-2000:]
    book_dir = out / "daodejing"
    assert len(chapter_files(book_dir)) == 4 and (book_dir / "report.json").is_file()
    rows = manifest_rows(book_dir)
    assert rows and all(r["status"] == "done" and r["attempts"] == 1 for r in rows)
    for r in rows:
        assert (book_dir / r["audio_path"]).is_file()
    from manifests.source import read_source_hash, source_sha256

    assert read_source_hash(book_dir) == source_sha256(SAMPLE)

    [run] = flow_runs(service, "render-book/adhoc", out=str(out))
    assert run.state.is_completed()
    arts = artifacts(service, run.id)
    progress = [a for a in arts if a.type == "progress"]
    assert progress and float(progress[-1].data) == 100.0        # acceptance 4: the progress reaches 100 %
    [table] = [a for a in arts if a.type == "table"]
    table_rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [r["chapter"] for r in table_rows] == [1, 2, 3, 4]
    assert all(r["failed"] == 0 and r["seconds"] > 0 and r["lufs"] is not None for r in table_rows)
    assert "CUDA_VISIBLE_DEVICES=" in run_logs(service, run.id)
    print(f"\nadhoc render via deployment: {elapsed:.1f} s")


def test_locked_book_is_skipped_not_failed(service, tmp_path):
    """A render-book run for a book another process is rendering ends Completed ("skipped, already running")."""
    from manifests.lock import BookLock

    out = tmp_path / "out"
    with BookLock(out / "daodejing"):
        p = service.run(doc("'render-book/adhoc'"), replace={"examples/daodejing.epub": str(SAMPLE)},
                        extra=params(*TINY, f"out={out}"), timeout=RUN_TIMEOUT_S)
    assert "Completed" in p.stdout, p.stdout[-2000:]
    [run] = flow_runs(service, "render-book/adhoc", out=str(out))
    assert run.state.is_completed() and "skipped, already running" in (run.state.message or "")
    assert list((out / "daodejing").iterdir()) == []


def tiny_catalogue(root: Path) -> list[Path]:
    """Three small books: two TXT, one EPUB, 1-2 chapters of a few sentences."""
    from tests.tasks.ingest.epub.helpers import make_epub

    root.mkdir(parents=True)
    a = write_txt_book(root / "甲书.txt", chapters=2, sentences=3)
    b = write_txt_book(root / "b-book.txt", chapters=1, sentences=4)
    c = root / "c.epub"
    c.write_bytes(make_epub([("c1.xhtml", "<h1>第一章</h1><p>天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。</p>"),
                             ("c2.xhtml", "<h1>第二章</h1><p>寒来暑往，秋收冬藏。</p>")]))
    (root / "notes.md").write_text("not a book")
    return [a, b, c]


def worker_of(service: PrefectService, pid: int) -> str:
    """The name of the worker that started process pid (its flow-run process, or one under it)."""
    import psutil

    ancestors = {p.pid for p in psutil.Process(pid).parents()}
    [name] = [n for n, p in service.procs.items() if n.startswith("worker") and p.pid in ancestors]
    return name


@pytest.mark.slow      # the nightly in CI: test_shards' sharded one; a killed book resumed elsewhere: test_fleet
def test_nightly_catalogue_and_a_worker_killed_mid_book(service, tmp_path):
    """Acceptance 1 (nightly part) and 2.  The nightly scan starts one render-book run per book of a catalogue
    of three; each completes on a worker, none twice.  Then a fourth, longer book is started by hand and its
    worker is killed (SIGKILL, with its flow-run process) mid-book; the next nightly starts only that book
    (the three done ones are left alone), the other worker finishes it, and no committed segment is
    rendered again (attempts stay 1, audio bytes unchanged)."""
    from urllib.parse import unquote

    import feedparser
    from prefect.deployments import run_deployment

    cat, out = tmp_path / "catalogue", tmp_path / "out"
    books = tiny_catalogue(cat)
    nightly = doc("run 'nightly-catalogue/nightly'")
    nightly_args = dict(replace={"/srv/books": str(cat)}, extra=params(*TINY, f"out={out}") + ["--watch"],
                        timeout=RUN_TIMEOUT_S)
    t0 = time.monotonic()
    service.run(nightly, **nightly_args)
    runs = wait_final(service, "render-book/adhoc", 3, out=str(out))
    print(f"\nnightly catalogue of 3 books: {time.monotonic() - t0:.1f} s")
    assert sorted(r.parameters["book"] for r in runs) == sorted(str(b.resolve()) for b in books)   # once each
    assert all(r.state.is_completed() for r in runs), [(r.name, r.state.type) for r in runs]
    devices = set()
    for r in runs:
        logs = run_logs(service, r.id)
        assert "skipped" not in logs
        devices |= {d for d in ("0", "1") if f"CUDA_VISIBLE_DEVICES={d}," in logs}
        assert r.work_pool_name == POOL
    assert devices, "no run logged the worker it ran on"
    for b in books:
        rows = manifest_rows(out / b.stem)
        assert rows and all(r["status"] == "done" for r in rows)
    feed = feedparser.parse((out / "feed.xml").read_bytes())       # rewritten by each run after its book
    assert sorted(unquote(e.link) for e in feed.entries) == sorted(f"{b.stem}/index.html" for b in books)
    assert (out / "index.html").read_text(encoding="utf-8").count('data-status="done"') == 3

    long = write_txt_book(cat / "long.txt", chapters=2, sentences=12)       # 13 segments
    book_dir, crash = out / "long", tmp_path / "crash"
    stop = pause_at(crash, "segment-written", COMMIT_EVERY_ROWS + 1)      # a batch committed, more to do
    with service.client_settings():        # the environment of this flow run's process only
        killed = run_deployment("render-book/adhoc", parameters={"book": str(long.resolve()), "out": str(out),
                                                                  "model": "random-tiny"},
                                job_variables={"env": stop}, timeout=0)
    pid = wait_paused(crash, "segment-written")
    rows = manifest_rows(book_dir)
    before = {r["content_key"]: r for r in rows if r["status"] == "done"}
    audio_before = {k: (book_dir / r["audio_path"]).read_bytes() for k, r in before.items()}
    assert 0 < len(before) < len(rows)
    service.kill(worker_of(service, pid))          # the worker and its flow-run process, SIGKILL

    # The book's lock died with its process: the next nightly finds it unfinished.
    service.run(nightly, **nightly_args)
    runs = flow_runs(service, "render-book/adhoc", out=str(out))
    new = [r for r in runs if r.id != killed.id and r.parameters["book"] == str(long.resolve())]
    assert len(runs) == 5 and len(new) == 1, [(r.name, r.parameters["book"]) for r in runs]
    final = wait_run(service, new[0].id)
    assert final.state.is_completed(), final.state
    after = {r["content_key"]: r for r in manifest_rows(book_dir)}
    assert all(r["status"] == "done" for r in after.values())
    from manifests.engine import read_engine

    # the other worker ran the book's engine (each process would choose its own: tests.flows.helpers.random_engines)
    assert {r["engine_version"] for r in after.values()} == {read_engine(book_dir).version}
    for key, r in before.items():
        assert after[key]["attempts"] == 1
        assert (book_dir / r["audio_path"]).read_bytes() == audio_before[key]
    assert len(chapter_files(book_dir)) == 2
    # The killed run sends no more heartbeats: the repository's automation marks it Crashed.
    crashed = wait_run(service, killed.id, timeout=CRASH_MARK_TIMEOUT_S)
    assert crashed.state.is_crashed() and "No heartbeat" in (crashed.state.message or ""), crashed.state


def test_every_doc_command_is_run_here():
    """Each command line of docs/service.md is run by this module or the service fixture (conftest.py) or, in
    the fleet recipe, by test_pgfleet — by a fixture or a test — as their doc("...") calls show (read from the
    files, so the check needs no other test to have run)."""
    import ast

    def fragments(module: Path) -> set[str]:
        calls = [n for n in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "doc"]
        return {c.args[0].value for c in calls if c.args and isinstance(c.args[0], ast.Constant)}

    here = fragments(Path(__file__)) | fragments(Path(__file__).with_name("conftest.py"))
    fleet = fragments(Path(__file__).with_name("test_pgfleet.py"))
    missing = [line for line in doc_commands(other_than=FLEET_SECTION) if not any(f in line for f in here)]
    missing += [line for line in doc_commands(section=FLEET_SECTION) if not any(f in line for f in fleet)]
    assert not missing, missing
