"""manifests.crashpoints: the n-th hit of a named point kills the process, or stops it behind a marker."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from manifests import crashpoints
from manifests.crashpoints import ENV, HOLD, POINTS, crashpoint
from tests.conftest import ROOT
from tests.flows.helpers import cli_env, pause_at, wait_held, wait_paused

# Hits `commit` three times, with another point between; prints after each hit.
SCRIPT = """
from manifests.crashpoints import crashpoint
for i in (1, 2, 3):
    crashpoint("ingest")
    crashpoint("commit")
    print(i, flush=True)
"""


def _start(env: dict, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=cli_env(**env), stdout=log)


def test_kill_at_the_nth_hit_of_the_named_point(tmp_path):
    with open(tmp_path / "log", "w") as log:
        rc = _start({ENV: "commit:2"}, log).wait()
    assert rc == -signal.SIGKILL
    assert (tmp_path / "log").read_text() == "1\n"


def test_pause_marks_and_stops_until_killed(tmp_path):
    """The process names itself in the marker, is stopped (not exited) there, and dies by the test's SIGKILL."""
    crash = tmp_path / "crash"
    with open(tmp_path / "log", "w") as log:
        proc = _start(pause_at(crash, "commit", 2), log)
    try:
        pid = wait_paused(crash, "commit", exited=lambda: proc.poll() is not None)
        assert pid == proc.pid
        assert [p.name for p in crash.iterdir()] == [f"commit.{pid}"]
        assert proc.poll() is None
    finally:
        proc.kill()
    assert proc.wait() == -signal.SIGKILL
    assert (tmp_path / "log").read_text() == "1\n"


def test_hold_marks_and_waits_until_released(tmp_path):
    """The process names itself in the marker and waits there, alive and not stopped, until the marker is
    deleted; then it goes on to the end."""
    import psutil

    crash = tmp_path / "crash"
    with open(tmp_path / "log", "w") as log:
        proc = _start(pause_at(crash, "commit", 2, mode=HOLD), log)
    try:
        marker = wait_held(crash, "commit", exited=lambda: proc.poll() is not None)
        assert marker.name == f"commit.{proc.pid}"
        assert psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED and proc.poll() is None
        assert (tmp_path / "log").read_text() == "1\n"
        marker.unlink()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert (tmp_path / "log").read_text() == "1\n2\n3\n"


def test_unknown_mode_is_refused(monkeypatch):
    monkeypatch.setenv(ENV, "commit:1:stop")
    with pytest.raises(ValueError, match="pause"):
        crashpoint("commit")


def test_an_undeclared_point_or_spec_is_refused(monkeypatch):
    """A misspelt point fails at once, also outside crash tests; so does a spec naming no declared point."""
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ValueError, match="'comit' is not declared"):
        crashpoint("comit")
    crashpoint("commit")                                      # declared, unset: nothing happens
    monkeypatch.setenv(ENV, "segment-writen:1")
    with pytest.raises(ValueError, match="'segment-writen' is not a crash point"):
        crashpoint("commit")


def _called_points() -> dict[str, list[str]]:
    """Every name passed to crashpoint(...) in the code (not the tests), with where: read from the syntax tree,
    so a call's name is checked whether or not a test ever reaches it."""
    import ast

    found: dict[str, list[str]] = {}
    for package in ("engine", "flows", "manifests", "tasks", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                call = isinstance(node, ast.Call)
                name = getattr(node.func, "id", getattr(node.func, "attr", None)) if call else None
                if name == "crashpoint":
                    arg = node.args[0] if node.args else None
                    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), \
                        f"{path.relative_to(ROOT)}:{node.lineno}: crashpoint() needs a literal name"
                    found.setdefault(arg.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_point_called_is_declared_and_every_declared_point_is_called():
    called = _called_points()
    assert set(called) - POINTS == set(), {p: called[p] for p in set(called) - POINTS}
    assert POINTS - set(called) == set(), "declared but never called"
    assert all(f"`{p}`" in crashpoints.__doc__ for p in POINTS)       # each is described
