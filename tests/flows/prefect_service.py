"""A real Prefect service on loopback for tests and benchmarks: `prefect server start` (SQLite in a temp
PREFECT_HOME), a process work pool (or docs/containers.md's Docker work pool), workers, `prefect deploy` from this
checkout.

The commands run are the ones docs/service.md and docs/containers.md show (doc_commands): a doc line is parsed, its
documented values swapped for the test's (port, paths) and test-only arguments appended, so the sections stay
tested.
Everything started runs in its own process group; stop() kills the groups and every descendant (flow-run
processes start their own sessions), also after a failure."""
from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

SERVICE_DOC = ROOT / "docs" / "service.md"
CONTAINERS_DOC = ROOT / "docs" / "containers.md"   # the image and its work pools (tests/flows/test_docker_pool.py)
POOL = "chattts"
DOC_PORT = "4200"
FLEET_SECTION = "A fleet"          # docs/service.md's multi-machine recipe (tests/flows/test_pgfleet.py runs it)
SERVER_START_TIMEOUT_S = 180
POLL_S = 0.5

# The first word of each command line in docs/service.md's shell blocks, after any VAR=value prefixes.
COMMAND_RE = re.compile(r"^(?:[A-Z_]+=\S+\s+)*prefect\s")


def doc_lines(path: Path = SERVICE_DOC) -> list[tuple[str, str]]:
    """(the `##`/`###` heading it is under, the line) for every line of docs/service.md's shell blocks."""
    lines, in_block, heading = [], False, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_block = line.strip() in ("```bash", "```sh", "```console")
            continue
        if not in_block and line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif in_block and line.strip():
            lines.append((heading, line.strip()))
    return lines


def doc_commands(path: Path = SERVICE_DOC, section: str | None = None, other_than: str | None = None) -> list[str]:
    """The `prefect ...` command lines of the shell blocks in docs/service.md, in order; with section, only
    those under a heading starting with it; with other_than, none of those under such a heading."""
    return [line for heading, line in doc_lines(path) if COMMAND_RE.match(line)
            and (section is None or heading.startswith(section))
            and (other_than is None or not heading.startswith(other_than))]


def doc(fragment: str) -> str:
    """The one command line of docs/service.md (outside the fleet recipe) containing fragment."""
    found = [c for c in doc_commands(other_than=FLEET_SECTION) if fragment in c]
    assert len(found) == 1, f"{fragment!r} matches {found}"
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrefectService:
    """One Prefect server + workers in `home` (a temp dir).  `run(doc_line, ...)` runs a documented command."""

    def __init__(self, home: Path, *, log_dir: Path | None = None, sqlite: bool = True):
        """sqlite: the server's database is SQLite in home (else whatever the profile says: the PostgreSQL
        recipe sets it with a documented `prefect config set` line)."""
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir or self.home / "logs")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.procs: dict[str, subprocess.Popen] = {}
        self.started: dict[str, tuple] = {}        # name: start()'s arguments, for restart()
        _stop_on_exit(self)
        bin_dir = str(Path(sys.executable).parent)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        self.env.update(
            PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
            PREFECT_HOME=str(self.home),
            PREFECT_PROFILES_PATH=str(self.home / "profiles.toml"),
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            PREFECT_SERVER_UI_ENABLED="false",
            PREFECT_SERVER_DATABASE_TIMEOUT="60",      # SQLite busy timeout: 2 cores, many writers
            PREFECT_CLI_PROMPT="false",
            PREFECT_WORKER_QUERY_SECONDS="1",
            PREFECT_WORKER_PREFETCH_SECONDS="2",
            PREFECT_RUNNER_POLL_FREQUENCY="1",
            PREFECT_LOGGING_TO_API_BATCH_INTERVAL="0.3",
            PREFECT_CLI_COLORS="false",
            PREFECT_CLI_WRAP_LINES="false",
            COLUMNS="250",
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        if sqlite:
            self.env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{self.home / 'prefect.db'}"

    # -- commands ------------------------------------------------------------------------------------------
    def argv(self, doc_line: str, replace: dict[str, str] | None = None, extra: list[str] = ()) -> tuple[dict, list]:
        """(env additions, argv) for a documented command line, with documented values replaced."""
        assert any(doc_line in doc_commands(doc) for doc in (SERVICE_DOC, CONTAINERS_DOC)), \
            f"not a command of docs/service.md or docs/containers.md: {doc_line}"
        words = shlex.split(doc_line)
        env = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            k, v = words.pop(0).split("=", 1)
            env[k] = v
        replace = {DOC_PORT: str(self.port), **(replace or {})}
        words = [_replace_all(w, replace) for w in words] + list(extra)
        env = {k: _replace_all(v, replace) for k, v in env.items()}
        return env, words

    def run(self, doc_line: str, replace: dict[str, str] | None = None, extra: list[str] = (),
            timeout: float = 300, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """A documented command, to its end; env: more variables (another machine's HOME, PREFECT_HOME …)."""
        doc_env, argv = self.argv(doc_line, replace, extra)
        p = subprocess.run(argv, cwd=ROOT, env={**self.env, **(env or {}), **doc_env}, capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{shlex.join(argv)} exited {p.returncode}\nstdout:\n{p.stdout[-4000:]}\n"
                                 f"stderr:\n{p.stderr[-4000:]}")
        return p

    def start(self, name: str, doc_line: str, replace: dict[str, str] | None = None,
              extra: list[str] = (), env: dict[str, str] | None = None) -> subprocess.Popen:
        """A long-running documented command (server, worker) in its own process group."""
        doc_env, argv = self.argv(doc_line, replace, extra)
        with open(self.log_dir / f"{name}.log", "ab") as log:       # the child keeps its own descriptor
            p = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **(env or {}), **doc_env}, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = p
        self.started[name] = (doc_line, replace, extra, env)
        return p

    def restart(self, prefix: str, ready: str, timeout: float = SERVER_START_TIMEOUT_S) -> list[str]:
        """Start again, with the same command, each process named prefix* that was killed or has ended, and wait
        until each has logged `ready` once more; the names started."""
        names = [n for n in self.started if n.startswith(prefix) and (n not in self.procs or
                                                                       self.procs[n].poll() is not None)]
        seen = {n: self.log(n).count(ready) for n in names}
        for n in names:
            self.start(n, *self.started[n])
        t0 = time.monotonic()
        while any(self.log(n).count(ready) <= seen[n] for n in names):
            for n in names:
                if self.procs[n].poll() is not None:
                    raise AssertionError(f"{n} exited {self.procs[n].returncode}:\n{self.log(n)[-3000:]}")
            assert time.monotonic() - t0 < timeout, f"{names}: not {ready!r} after {timeout} s"
            time.sleep(POLL_S)
        return names

    def log(self, name: str) -> str:
        try:
            return (self.log_dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    # -- server --------------------------------------------------------------------------------------------
    def wait_healthy(self, timeout: float = SERVER_START_TIMEOUT_S) -> float:
        import httpx

        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            server = self.procs.get("server")
            if server is not None and server.poll() is not None:
                raise AssertionError(f"prefect server exited {server.returncode}:\n{self.log('server')[-3000:]}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(POLL_S)
        raise AssertionError(f"prefect server not healthy after {timeout} s:\n{self.log('server')[-3000:]}")

    def start_server(self) -> None:
        """docs/service.md step 1 as written: `prefect server start` on this service's loopback port, healthy, and
        the client pointed at it (`prefect config set PREFECT_API_URL=…`)."""
        lines = doc_commands(other_than=FLEET_SECTION)
        [start] = [c for c in lines if "prefect server start" in c]
        [config] = [c for c in lines if "config set PREFECT_API_URL" in c]
        self.start("server", start)
        self.wait_healthy()
        self.run(config)

    def client_settings(self):
        """A context manager pointing this process's Prefect client at the service."""
        from prefect.settings import PREFECT_API_URL, temporary_settings

        return temporary_settings(updates={PREFECT_API_URL: self.api_url})

    # -- teardown ------------------------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL a started process, its group and all its descendants (flow runs included)."""
        p = self.procs.pop(name, None)
        if p is not None:
            _kill_tree(p)

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "server"] + ["server"]:
            p = self.procs.pop(name, None)
            if p is None:
                continue
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            _kill_tree(p)


def _stop_on_exit(svc: PrefectService) -> None:
    """Stop the service also when this process ends without unwinding: at exit, and on SIGTERM (e.g. from
    `timeout`), which is turned into KeyboardInterrupt so fixtures' teardown runs."""
    import atexit
    import threading

    atexit.register(svc.stop)
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        def on_term(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        signal.signal(signal.SIGTERM, on_term)


def _replace_all(word: str, replace: dict[str, str]) -> str:
    for old, new in replace.items():
        word = word.replace(old, new)
    return word


def _kill_tree(p: subprocess.Popen) -> None:
    import psutil

    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    groups = {p.pid}
    for k in kids:
        try:
            groups.add(os.getpgid(k.pid))
        except ProcessLookupError:
            pass
    groups.discard(os.getpgrp())                 # never our own group
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for k in kids:
        try:
            k.kill()
        except psutil.Error:
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
