"""The studio's jobs: renders, voice auditions and fixes, each a `chattts-render` child process (the CLI's own path,
so a crash cannot take the server down, a pause or a cancel is a signal, and a render started here resumes from the
command line and back).

One job at a time per lane — the engine's device: one render (audition, fix) at a time per engine — and per book
(its lock); queued jobs start in the order they were asked for, across books.  Children are started by one
supervisor thread and die with the studio (Linux: PR_SET_PDEATHSIG), killed or not: a render killed mid-way has its
manifest intact and resumes (the studio shows the book as resumable).  Pause and cancel interrupt the child
(SIGINT: it commits what finished, then exits; SIGKILL if it has not after STOP_GRACE_S); a paused job is queued
again by resume, a cancelled one is over (the book stays resumable either way)."""
from __future__ import annotations

import ctypes
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

QUEUED, RUNNING, PAUSED, DONE, FAILED, CANCELLED = "queued", "running", "paused", "done", "failed", "cancelled"
OPEN = (QUEUED, RUNNING, PAUSED)          # states a job can still leave
POLL_S = 0.2                              # s between the supervisor's looks at its children
STOP_GRACE_S = 20.0                       # s a paused or cancelled child has to exit before it is SIGKILLed
PR_SET_PDEATHSIG = 1                      # prctl(2)
LOG_TAIL_BYTES = 16 * 1024                # bytes of a child's output read for its last line


@dataclass
class Job:
    id: str
    kind: str                             # render | voices | fix
    book: str                             # the book's id (its folder's name)
    argv: list[str]
    lane: str                             # the engine's device
    title: str                            # what the pages show
    log: Path
    state: str = QUEUED
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    returncode: int | None = None
    message: str = ""                     # the child's last line (its error, or its summary)
    proc: subprocess.Popen | None = field(default=None, repr=False)
    stopping: str | None = None           # PAUSED | CANCELLED asked while it runs
    stop_at: float = 0.0

    def public(self) -> dict:
        return {"id": self.id, "kind": self.kind, "book": self.book, "title": self.title, "state": self.state,
                "lane": self.lane, "created": self.created, "started": self.started, "ended": self.ended,
                "returncode": self.returncode, "message": self.message}


class Jobs:
    """The queue and its supervisor thread (module docstring).  `logs`: a folder for the children's output."""

    def __init__(self, logs: Path, env: dict[str, str] | None = None):
        self.logs = Path(logs)
        self.env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        self.jobs: dict[str, Job] = {}
        self.version = 0                  # changes whenever a job does (the pages' event stream watches it)
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="studio-jobs", daemon=True)

    def start(self) -> Jobs:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def submit(self, kind: str, book: str, argv: list[str], lane: str, title: str) -> Job:
        with self._cond:
            n = next(self._ids)
            job = Job(f"{n}", kind, book, list(argv), lane, title, self.logs / f"{int(time.time())}-{n}-{kind}.log")
            self.jobs[job.id] = job
            self._changed()
        return job

    def open_job(self, book: str, kind: str | None = None) -> Job | None:
        """The book's queued, running or paused job (of that kind), if any."""
        with self._cond:
            return next((j for j in self.jobs.values() if j.book == book and j.state in OPEN
                         and (kind is None or j.kind == kind)), None)

    def pause(self, job_id: str) -> Job:
        return self._stop(job_id, PAUSED)

    def cancel(self, job_id: str) -> Job:
        return self._stop(job_id, CANCELLED)

    def resume(self, job_id: str) -> Job:
        with self._cond:
            job = self._get(job_id)
            if job.state == PAUSED:
                job.state, job.message, job.returncode = QUEUED, "", None
                self._changed()
            return job

    def snapshot(self) -> list[dict]:
        with self._cond:
            return [j.public() for j in self.jobs.values()]

    def wait(self, job_id: str, timeout: float) -> Job:
        """Block until the job is over (or `timeout` s passed); the job."""
        end = time.monotonic() + timeout
        with self._cond:
            job = self._get(job_id)
            while job.state in OPEN and (left := end - time.monotonic()) > 0:
                self._cond.wait(left)
            return job

    def close(self) -> None:
        """Interrupt every running child, wait for them (SIGKILL after STOP_GRACE_S), end the supervisor."""
        with self._cond:
            self._closing = True
            running = [j for j in self.jobs.values() if j.proc is not None and j.proc.poll() is None]
            for j in running:
                _signal(j.proc, signal.SIGINT)
            self._cond.notify_all()
        for j in running:
            assert j.proc is not None
            try:
                j.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal(j.proc, signal.SIGKILL)
                j.proc.wait()
        if self._thread.is_alive():
            self._thread.join(5)

    # ------------------------------------------------------------------------------------------ internals
    def _get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise KeyError(job_id)
        return job

    def _changed(self) -> None:
        self.version += 1
        self._cond.notify_all()

    def _stop(self, job_id: str, state: str) -> Job:
        with self._cond:
            job = self._get(job_id)
            if job.state == QUEUED or (job.state == PAUSED and state == CANCELLED):
                job.state, job.ended = state, time.time()
            elif job.state == RUNNING and job.proc is not None and job.stopping is None:
                job.stopping, job.stop_at = state, time.monotonic()
                _signal(job.proc, signal.SIGINT)
            self._changed()
            return job

    def _run(self) -> None:
        with self._cond:
            while not self._closing:
                self._reap()
                self._launch()
                self._cond.wait(POLL_S)

    def _reap(self) -> None:
        for job in self.jobs.values():
            if job.state != RUNNING or job.proc is None:
                continue
            rc = job.proc.poll()
            if rc is None:
                if job.stopping and time.monotonic() - job.stop_at > STOP_GRACE_S:
                    _signal(job.proc, signal.SIGKILL)
                continue
            job.returncode, job.ended, job.proc = rc, time.time(), None
            job.message = last_line(job.log)
            job.state = job.stopping or (DONE if rc == 0 else FAILED)
            job.stopping = None
            self._changed()

    def _launch(self) -> None:
        busy = {(j.lane, j.book) for j in self.jobs.values() if j.state == RUNNING}
        lanes, books = {lane for lane, _ in busy}, {book for _, book in busy}
        for job in self.jobs.values():
            if job.state != QUEUED or job.lane in lanes or job.book in books:
                continue
            try:
                with open(job.log, "ab") as log:
                    job.proc = subprocess.Popen(job.argv, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
                                                preexec_fn=_die_with_parent)
            except OSError as e:
                job.state, job.ended, job.message = FAILED, time.time(), f"could not start: {e}"
                self._changed()
                continue
            job.state, job.started = RUNNING, time.time()
            lanes.add(job.lane)
            books.add(job.book)
            self._changed()


def _signal(proc: subprocess.Popen | None, sig: int) -> None:
    if proc is not None and proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the studio (the supervisor thread) goes, however it goes."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def last_line(log: Path) -> str:
    """The last non-empty line a child wrote (progress bars' carriage returns are line ends too)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.replace("\r", "\n").split("\n") if line.strip()]
    return lines[-1] if lines else ""
