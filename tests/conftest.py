"""Shared test fixtures: the corpus in ../shared (skipped when absent, a failure under CI=true), one torch thread."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def corpus_path(*parts: str) -> Path:
    """A file under ../shared/corpus.  Absent: the test is skipped with the reason, but under CI=true (where the
    corpus must be beside the checkout) it fails."""
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        corpus_missing(p)
    return p


def corpus_missing(what) -> None:
    """Skip the calling test because `what` (a corpus path) is absent; under CI=true, fail it instead."""
    unavailable(f"corpus not present: {what} (put the corpus at {CORPUS} or set CHATTTS_RENDER_CORPUS)")


def unavailable(reason: str) -> None:
    """Skip the calling test because something it needs is absent; under CI=true (where scripts/setup.sh test
    installed everything), fail it instead."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def corpus():
    return corpus_path


def pytest_collection_modifyitems(config, items):
    """`slow` tests run only with RUN_SLOW=1; `gpu` tests only where CUDA is available.  In an xdist worker the
    Prefect modules come first (ModuleScheduling hands the modules out in this order)."""
    run_slow = os.environ.get("RUN_SLOW") == "1"
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: set RUN_SLOW=1"))
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: unit_order(work_unit(item.nodeid)))          # stable: else as collected


# `make test` runs the suite in two processes (pytest-xdist, -n 2 --dist loadfile) with this scheduler: a module
# runs whole on one worker (its module fixtures start once), and the modules that start Prefect servers are one
# unit on one worker, first (the longest unit; one server at a time; tests/flows/conftest.py's service once).
PREFECT_GROUP = "prefect"
PREFECT_MODULES = ("tests/flows/test_server.py", "tests/flows/test_shards.py", "tests/flows/test_pgfleet.py",
                   "tests/flows/test_render_book_flow.py")


# After the Prefect unit, the longest modules (over ~30 s of a 2-core machine each): handed out early, they cannot
# be the one a worker is still running when the other has finished.
LONG_MODULES = ("tests/tasks/qa/test_corpus.py", "tests/flows/test_fleet.py", "tests/tasks/site/studio/test_studio.py",
                "tests/flows/test_reliability_kill.py", "tests/benchmarks/test_book_throughput.py",
                "tests/engine/test_kernels.py", "tests/flows/test_render.py", "tests/tasks/qa/test_asr.py",
                "tests/flows/test_store_commands.py", "tests/flows/test_reliability.py",
                "tests/flows/test_book_engine.py", "tests/flows/test_proof_render.py")


def unit_order(unit: str) -> int:
    """0: the Prefect unit; 1 + its place in LONG_MODULES; then every other module."""
    if unit == PREFECT_GROUP:
        return 0
    return 1 + LONG_MODULES.index(unit) if unit in LONG_MODULES else 1 + len(LONG_MODULES)


def work_unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return PREFECT_GROUP if module in PREFECT_MODULES else module


@pytest.hookimpl(optionalhook=True)           # a pytest-xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with the Prefect modules one unit, the units in the workers' order (the Prefect unit
    first), not by their number of tests; None (xdist's own scheduler) for the other modes."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ModuleScheduling(config, log)


@pytest.fixture
def browser(tmp_path_factory):
    """A headless Debian chromium (Selenium + Debian's chromedriver).  Absent: skipped, a failure under CI=true."""
    from tests.browser import chromium_paths, start_chromium

    if chromium_paths() is None:
        unavailable("chromium and chromedriver are not installed (scripts/setup.sh installs them)")
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's standalone S3 server on loopback (tests/s3server.py); skipped when moto is not installed."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    from tests.s3server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pg_server():
    """A private PostgreSQL cluster on a free loopback port (tests/pgserver.py), removed at the end; skipped
    when PostgreSQL is not installed, a failure under CI=true."""
    from tests.pgserver import PgServer, missing_reason

    if (reason := missing_reason()) is not None:
        unavailable(reason)
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def demo_render(tmp_path_factory):
    """`make demo`'s render of the sample book on this machine (its book folder): what the image tests compare
    the container's renders with."""
    import subprocess
    import sys

    from tests.flows.helpers import SAMPLE, cli_env
    from tests.podman import demo_args

    out = tmp_path_factory.mktemp("demo")
    r = subprocess.run([sys.executable, "-m", "flows.cli", *demo_args(), "--out", str(out)], cwd=ROOT,
                       env=cli_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / SAMPLE.stem
