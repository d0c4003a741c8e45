"""Fixtures shared by the end-to-end tests."""
import time

import pytest

from tests.conftest import ROOT
from tests.flows.forkrun import ForkServer
from tests.flows.helpers import random_engines
from tests.flows.prefect_service import PrefectService, doc

WORKER_READY = "started!"          # what `prefect worker start` prints once it polls its pool


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory):
    """One process with torch and ChatTTS imported that forks a child per render (cheap to SIGKILL)."""
    s = ForkServer(ROOT, tmp_path_factory.mktemp("logs"))
    yield s
    s.close()


@pytest.fixture(scope="session")
def prefect_service(tmp_path_factory):
    """The Prefect service of docs/service.md on SQLite (server, automation, work pool, two workers, `prefect
    deploy --name adhoc --name nightly`), started once for every module that uses `service` (test_server,
    test_shards: ~20 s each time); their runs are told apart by their output folders.  Its workers' flow runs take a
    random engine each (random_engines): a book's runs after its first one must run the book's."""
    svc = PrefectService(tmp_path_factory.mktemp("prefect-home"))
    svc.env.update(random_engines())
    t0 = time.monotonic()
    try:
        svc.start("server", doc("prefect server start"))
        svc.wait_healthy()
        svc.run(doc("config set PREFECT_API_URL"))
        svc.run(doc("PREFECT_FLOWS_HEARTBEAT_FREQUENCY"))
        svc.run(doc("automation create"))
        svc.run(doc("work-pool create"))
        svc.start("worker0", doc("CUDA_VISIBLE_DEVICES=0 prefect worker start"), extra=["--name", "worker-gpu0"])
        svc.start("worker1", doc("CUDA_VISIBLE_DEVICES=1 prefect worker start"), extra=["--name", "worker-gpu1"])
        svc.run(doc("prefect deploy --name adhoc"))
        svc.t0 = t0
        yield svc
    finally:
        svc.stop()
        print(f"\nprefect service: {time.monotonic() - t0:.0f} s from server start to teardown")


@pytest.fixture
def service(prefect_service):
    """The shared Prefect service with both workers polling: a worker an earlier test killed is started again."""
    prefect_service.restart("worker", WORKER_READY)
    return prefect_service
