"""A real Prefect service on loopback: `prefect server start`, a process work pool, two workers, `prefect deploy
--all` from prefect.yaml; an ad-hoc render, the nightly catalogue, the schedule, and a worker killed mid-book.

Every command is a command of docs/service.md (tests/flows/prefect_service.py runs the doc lines).
Run alone: `python -m pytest -m server tests/flows/test_server.py -q` (about 3-5 min on 2 cores)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.flows.helpers import SAMPLE, chapter_files, write_txt_book
from tests.flows.prefect_service import POOL, PrefectService, doc_commands

pytestmark = pytest.mark.server

RUN_TIMEOUT_S = 300        # one flow run, start to end, on a loaded 2-core machine
TINY = ["model=random-tiny"]


def doc(fragment: str) -> str:
    """The one command line of docs/service.md containing fragment."""
    found = [c for c in doc_commands() if fragment in c]
    assert len(found) == 1, f"{fragment!r} matches {found}"
    return found[0]


def params(*kv: str) -> list[str]:
    return [w for p in kv for w in ("--param", p)]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = PrefectService(tmp_path_factory.mktemp("prefect-home"))
    t0 = time.monotonic()
    try:
        svc.start("server", doc("prefect server start"))
        svc.wait_healthy()
        svc.run(doc("config set PREFECT_API_URL"))
        svc.run(doc("work-pool create"))
        for gpu in ("0", "1"):
            svc.start(f"worker{gpu}", doc(f"CUDA_VISIBLE_DEVICES={gpu} prefect worker start"),
                      extra=["--name", f"worker-gpu{gpu}"])
        svc.run(doc("prefect deploy --all"))
        svc.t0 = t0
        yield svc
    finally:
        svc.stop()
        print(f"\nprefect service: {time.monotonic() - t0:.0f} s from server start to teardown")


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
    from flows.nightly import read_source_hash, source_sha256

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
    from tests.tasks.test_ingest_epub import make_epub

    root.mkdir(parents=True)
    a = write_txt_book(root / "甲书.txt", chapters=2, sentences=3)
    b = write_txt_book(root / "b-book.txt", chapters=1, sentences=4)
    c = root / "c.epub"
    c.write_bytes(make_epub([("c1.xhtml", "<h1>第一章</h1><p>天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。</p>"),
                             ("c2.xhtml", "<h1>第二章</h1><p>寒来暑往，秋收冬藏。</p>")]))
    (root / "notes.md").write_text("not a book")
    return [a, b, c]


def test_nightly_catalogue_renders_each_book_once(service, tmp_path):
    books = tiny_catalogue(tmp_path / "catalogue")
    out = tmp_path / "out"
    nightly = doc("run 'nightly-catalogue/nightly'")
    t0 = time.monotonic()
    service.run(nightly, replace={"/srv/books": str(tmp_path / "catalogue")},
                extra=params(*TINY, f"out={out}") + ["--watch"], timeout=RUN_TIMEOUT_S)
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

    # Nothing changed: a second scan starts nothing.  Then one book changes: only it is rendered again.
    service.run(nightly, replace={"/srv/books": str(tmp_path / "catalogue")},
                extra=params(*TINY, f"out={out}") + ["--watch"], timeout=RUN_TIMEOUT_S)
    time.sleep(2)
    assert len(flow_runs(service, "render-book/adhoc", out=str(out))) == 3
    with open(books[1], "a", encoding="utf-8") as f:
        f.write("第二章　新章\n　　山高月小，水落石出。\n")
    service.run(nightly, replace={"/srv/books": str(tmp_path / "catalogue")},
                extra=params(*TINY, f"out={out}") + ["--watch"], timeout=RUN_TIMEOUT_S)
    runs = wait_final(service, "render-book/adhoc", 4, out=str(out))
    again = [r for r in runs if r.parameters["book"] == str(books[1].resolve())]
    assert len(runs) == 4 and len(again) == 2 and all(r.state.is_completed() for r in again)
    rows = manifest_rows(out / books[1].stem)
    assert len({r["chapter"] for r in rows}) == 2 and all(r["status"] == "done" for r in rows)


def _engine_worker(service: PrefectService) -> str | None:
    """The worker whose descendants include a running flow-run process (prefect.engine)."""
    import psutil

    for name, p in service.procs.items():
        if not name.startswith("worker"):
            continue
        try:
            kids = psutil.Process(p.pid).children(recursive=True)
        except psutil.Error:
            continue
        for k in kids:
            try:
                if "prefect.engine" in " ".join(k.cmdline()):
                    return name
            except psutil.Error:
                pass
    return None


def test_worker_killed_mid_book_resumes_without_rerendering(service, tmp_path):
    from prefect.deployments import run_deployment

    catalogue = tmp_path / "catalogue"
    catalogue.mkdir()
    book = write_txt_book(catalogue / "long.txt", chapters=2, sentences=12)
    out = tmp_path / "out"
    book_dir = out / "long"
    with service.client_settings():
        run_deployment("render-book/adhoc", parameters={"book": str(book), "out": str(out),
                                                         "model": "random-tiny"}, timeout=0)
    t0 = time.monotonic()
    while True:                                   # some segments committed, some not yet
        rows = manifest_rows(book_dir) if (book_dir / "manifest").is_dir() else []
        done = [r for r in rows if r["status"] == "done"]
        if done and len(done) < len(rows):
            break
        assert not rows or len(done) < len(rows), "the render finished before it could be killed"
        assert time.monotonic() - t0 < RUN_TIMEOUT_S, "the render never committed a segment"
        time.sleep(0.2)
    victim = _engine_worker(service)
    assert victim is not None
    service.kill(victim)                           # the worker and its flow-run process, SIGKILL
    before = {r["content_key"]: r for r in manifest_rows(book_dir) if r["status"] == "done"}
    audio_before = {k: (book_dir / r["audio_path"]).read_bytes() for k, r in before.items()}
    assert before and len(before) < len(manifest_rows(book_dir))

    # The next nightly finds the book incomplete (its lock died with the process) and the other worker
    # finishes it.
    service.run(doc("run 'nightly-catalogue/nightly'"), replace={"/srv/books": str(catalogue)},
                extra=params(*TINY, f"out={out}") + ["--watch"], timeout=RUN_TIMEOUT_S)
    runs = flow_runs(service, "render-book/adhoc", out=str(out))
    assert len(runs) == 2
    t0 = time.monotonic()
    while not (book_dir / "report.json").is_file() or any(r["status"] != "done" for r in manifest_rows(book_dir)):
        assert time.monotonic() - t0 < RUN_TIMEOUT_S, "the book was not finished after the kill"
        time.sleep(1)
    new_run = [r for r in runs if r.tags and "nightly" in r.tags]
    assert len(new_run) == 1
    [final] = [r for r in wait_final(service, "render-book/adhoc", 2, out=str(out), book=str(book))
               if r.id == new_run[0].id]
    assert final.state.is_completed()
    after = {r["content_key"]: r for r in manifest_rows(book_dir)}
    for key, r in before.items():
        assert after[key]["attempts"] == 1 and after[key]["status"] == "done"
        assert (book_dir / r["audio_path"]).read_bytes() == audio_before[key]
    assert len(chapter_files(book_dir)) == 2


def test_every_doc_command_was_run(service):
    """Runs last in this module: each command line of docs/service.md was exercised (PostgreSQL aside)."""
    ran = set(service.ran)
    missing = [c for c in doc_commands() if c not in ran and "DATABASE_CONNECTION_URL" not in c]
    assert not missing, missing


def test_postgres_connection_setting_is_accepted(tmp_path):
    import subprocess
    import sys

    line = doc("DATABASE_CONNECTION_URL")
    svc = PrefectService(tmp_path / "home")
    env, argv = svc.argv(line)
    base = {k: v for k, v in svc.env.items() if k != "PREFECT_API_DATABASE_CONNECTION_URL"}
    subprocess.run(argv, env={**base, **env}, check=True, capture_output=True, timeout=120)
    shown = subprocess.run([str(Path(sys.executable).parent / "prefect"), "config", "view", "--show-secrets"],
                           env=base, capture_output=True, text=True, timeout=120).stdout
    assert "postgresql+asyncpg://" in shown
