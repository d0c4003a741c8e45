"""The studio's job queue (tasks/site/studio/jobs.py) with stand-in children (python -c …): one job at a time per
lane and per book, the rest in the order asked, pause / resume / cancel as signals, the last line a child wrote,
and children that die with the studio however it dies."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tasks.site.studio.jobs import CANCELLED, DONE, FAILED, PAUSED, QUEUED, RUNNING, Jobs, last_line

WAIT_S = 60.0


def child(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


SLEEPER = child("""
    import signal, sys, time
    print("started", flush=True)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", flush=True)
        sys.exit(130)
""")


def until(predicate, timeout: float = WAIT_S) -> None:
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "hang guard"
        time.sleep(0.05)


@pytest.fixture
def jobs(tmp_path):
    q = Jobs(tmp_path / "logs").start()
    try:
        yield q
    finally:
        q.close()


def test_one_job_at_a_time_per_lane_and_book_in_the_order_asked(jobs):
    a = jobs.submit("render", "a", SLEEPER, "cpu", "a")
    b = jobs.submit("render", "b", child("print('b done')"), "cpu", "b")
    c = jobs.submit("render", "c", child("print('c done')"), "cuda", "c")      # another engine: at once
    d = jobs.submit("fix", "a", child("print('d done')"), "cuda", "d")         # the same book as a: after it
    until(lambda: jobs.wait(c.id, 0).state == DONE)
    assert (a.state, b.state, d.state) == (RUNNING, QUEUED, QUEUED)
    assert c.message == "c done"
    jobs.cancel(a.id)
    until(lambda: jobs.wait(b.id, 0).state == DONE and jobs.wait(d.id, 0).state == DONE)
    assert a.state == CANCELLED and a.returncode == 130
    assert a.message == "interrupted; run the same command again to resume"
    assert b.started >= a.ended and d.started >= a.ended


def test_pause_then_resume_runs_the_job_again_and_a_failure_keeps_its_last_line(jobs):
    a = jobs.submit("render", "a", SLEEPER, "cpu", "a")
    until(lambda: "started" in last_line(a.log))
    jobs.pause(a.id)
    until(lambda: a.state == PAUSED)
    first = a.started
    jobs.resume(a.id)
    until(lambda: a.state == RUNNING and a.started != first)
    jobs.cancel(a.id)
    until(lambda: a.state == CANCELLED)
    f = jobs.submit("voices", "b", child("import sys; print('x'); sys.exit('chattts-render: b.epub: not an EPUB')"),
                    "cpu", "b")
    until(lambda: jobs.wait(f.id, 0).state == FAILED)
    assert f.message == "chattts-render: b.epub: not an EPUB" and f.returncode == 1
    queued = jobs.submit("render", "q", SLEEPER, "cpu", "q")
    blocker = jobs.submit("render", "r", SLEEPER, "cpu", "r")
    jobs.cancel(blocker.id)                          # queued (q runs first): cancelled before it starts
    assert blocker.state == CANCELLED and blocker.started is None
    jobs.cancel(queued.id)


def test_a_child_that_ignores_the_interrupt_is_killed(jobs, monkeypatch):
    import tasks.site.studio.jobs as J

    monkeypatch.setattr(J, "STOP_GRACE_S", 0.5)
    stubborn = jobs.submit("render", "a", child("""
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("started", flush=True)
        time.sleep(60)
    """), "cpu", "a")
    until(lambda: "started" in last_line(stubborn.log))
    jobs.cancel(stubborn.id)
    until(lambda: stubborn.state == CANCELLED)
    assert stubborn.returncode == -signal.SIGKILL


def test_children_die_with_the_studio_even_when_it_is_killed(tmp_path):
    """A studio process killed with SIGKILL: the render it started goes too (PR_SET_PDEATHSIG), so nothing
    renders on without it and its book's lock is free for the next studio."""
    pidfile = tmp_path / "child.pid"
    studio = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from tasks.site.studio.jobs import Jobs
        q = Jobs(Path({str(tmp_path / 'logs')!r})).start()
        q.submit("render", "a", [sys.executable, "-c",
                 "import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"], "cpu", "a")
        time.sleep(120)
    """)], env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        until(lambda: pidfile.is_file() and pidfile.read_text().strip() != "")
        pid = int(pidfile.read_text())
        assert psutil.pid_exists(pid)
        studio.kill()
        studio.wait(30)
        until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 30)
    finally:
        if studio.poll() is None:
            studio.kill()
