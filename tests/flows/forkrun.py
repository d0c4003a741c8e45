"""A fork server for the crash tests: one process pays for `import torch, ChatTTS` once, then forks a fresh
child per render.  Each child is a real, separate process running `chattts-render` (flows.cli.main) with
its own environment and log file; the server SIGKILLs it after `kill_after` seconds if asked.  A render
started with `detach` answers its pid at once (for a test that stops it at a crash point and kills it).

Protocol (JSON lines): the server prints {"ready": true}, then for each request
{"args": [...], "env": {...}, "log": path, "kill_after": seconds | null, "detach": bool} answers
{"rc": exit code (-9: killed by SIGKILL), "killed": bool (the server sent the signal), "elapsed": s}
when the child has ended; a detached request is first answered {"pid": pid}, and the server waits for one
more line before it waits for the child.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from manifests.crashpoints import ENV


def _wait_or_kill(pid: int, kill_after: float | None) -> bool:
    """SIGKILL the child if it is still running kill_after seconds from now; True if it was killed.  A pidfd
    turns readable when the child exits, so the wait ends at that event or at the kill time."""
    if kill_after is None:
        return False
    fd = os.pidfd_open(pid)
    try:
        ended, _, _ = select.select([fd], [], [], max(kill_after, 0.0))
    finally:
        os.close(fd)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    return not ended


# What the server imports before it forks: the expensive part (torch, ChatTTS), paid once for every child.
PRELOAD = ("ChatTTS", "pyarrow.parquet", "soundfile", "engine.engine", "engine.generate", "engine.loader",
           "flows.pipeline", "tasks.audio.package", "tasks.plan.rows", "tasks.synthesize.render")


def serve() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    for name in PRELOAD:
        importlib.import_module(name)
    from flows.cli import main

    out = sys.stdout
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:                                         # the child: one CLI run
            rc = 98
            try:
                os.environ.update(req.get("env") or {})
                fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                rc = main(list(req["args"]))
            except BaseException:  # noqa: BLE001 — the child prints any failure and exits 99
                import traceback

                traceback.print_exc()
                rc = 99
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        t0 = time.monotonic()
        if req.get("detach"):                                # answer now; the next line asks to wait
            print(json.dumps({"pid": pid}), file=out, flush=True)
            json.loads(sys.stdin.readline())
        killed = _wait_or_kill(pid, req.get("kill_after"))
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "killed": killed,
                          "elapsed": time.monotonic() - t0}), file=out, flush=True)


class ForkServer:
    """Client side (in the test process)."""

    def __init__(self, root: Path, logdir: Path):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(root))
        env.pop(ENV, None)
        self.logdir = Path(logdir)
        self.n = 0
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.flows.forkrun"], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.proc.stdout.readline())["ready"]

    def run(self, *args: str, env: dict | None = None, kill_after: float | None = None) -> dict:
        self.n += 1
        log = self.logdir / f"run-{self.n:03d}.log"
        self.proc.stdin.write(json.dumps({"args": list(args), "env": env or {}, "log": str(log),
                                          "kill_after": kill_after}) + "\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        res["output"] = log.read_text(errors="replace") if log.exists() else ""
        return res

    def start(self, *args: str, env: dict | None = None) -> int:
        """Start a render and return its pid at once; call wait() next (nothing else in between)."""
        self.n += 1
        self._log = self.logdir / f"run-{self.n:03d}.log"
        self.proc.stdin.write(json.dumps({"args": list(args), "env": env or {}, "log": str(self._log),
                                          "detach": True}) + "\n")
        self.proc.stdin.flush()
        self._pid = json.loads(self.proc.stdout.readline())["pid"]
        return self._pid

    def ended(self) -> bool:
        """Whether the started render has exited (it stays a zombie until wait())."""
        import psutil

        return psutil.Process(self._pid).status() == psutil.STATUS_ZOMBIE

    def wait(self) -> dict:
        self.proc.stdin.write("{}\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        res["output"] = self._log.read_text(errors="replace") if self._log.exists() else ""
        return res

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


if __name__ == "__main__":
    serve()
