"""Test-only crash hooks: `CHATTTS_RENDER_CRASH_AT=<point>:<n>` SIGKILLs the process at the n-th hit of a
named point, so the crash-and-resume tests reach every dangerous moment deterministically.

`CHATTTS_RENDER_CRASH_AT=<point>:<n>:pause` stops the process there instead: it creates the empty marker
file `$CHATTTS_RENDER_CRASH_DIR/<point>.<pid>`, then SIGSTOPs itself (every thread, holding its locks), so a
test waits for the marker, looks at the frozen state and SIGKILLs the pid — also when the process is a
grandchild, such as a Prefect worker's flow-run process.  `:hold` creates the marker and waits (the calling
thread only) until the test deletes it, then goes on: the process's other threads keep running, so what it
holds on a server (a Prefect concurrency slot's lease, heartbeats) stays alive while a test acts meanwhile.

Points: `ingest` (book read and the book's lock held, nothing written yet), `segment-written` (a segment's
audio is on disk, its row not yet committed; with --qa, a take's), `take-heard` (a take's check record is on
disk, its row not yet decided), `commit` (a manifest part is written and fsynced but not yet
renamed into place), `assemble` (a chapter was assembled in memory, nothing of it written), `package-file`
(an output's temp file is complete but not yet renamed into place).  These are POINTS: crashpoint() refuses any
other name (ValueError), and so does a CHATTTS_RENDER_CRASH_AT that names one, so a misspelt point fails at
once instead of never firing (tests/manifests/test_crashpoints.py checks every call in the code).  Unset
(always, outside tests) the check is a set lookup and one dict lookup.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

ENV = "CHATTTS_RENDER_CRASH_AT"
DIR_ENV = "CHATTTS_RENDER_CRASH_DIR"
POINTS = frozenset({"ingest", "segment-written", "take-heard", "commit", "assemble", "package-file"})
PAUSE = "pause"
HOLD = "hold"
HOLD_POLL_S = 0.05           # s between looks for the removal of a held point's marker

_hits: dict[str, int] = {}
_hits_lock = threading.Lock()  # a point may be hit from two threads (packaging writes chapter files on its own)


def crashpoint(name: str) -> None:
    """SIGKILL (or, with `:pause`, mark and SIGSTOP; with `:hold`, mark and wait) this process if
    CHATTTS_RENDER_CRASH_AT names this point and this is its n-th hit."""
    if name not in POINTS:
        raise ValueError(f"crash point {name!r} is not declared in manifests.crashpoints.POINTS")
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, rest = spec.partition(":")
    if point not in POINTS:
        raise ValueError(f"{ENV}={spec}: {point!r} is not a crash point; the points: {', '.join(sorted(POINTS))}")
    if point != name:
        return
    n, _, mode = rest.partition(":")
    if mode not in ("", PAUSE, HOLD):
        raise ValueError(f"{ENV}={spec}: the mode after <point>:<n> must be '{PAUSE}', '{HOLD}' or nothing")
    with _hits_lock:
        _hits[name] = hit = _hits.get(name, 0) + 1
    if hit != int(n or 1):
        return
    if mode in (PAUSE, HOLD):
        marker = Path(os.environ[DIR_ENV]) / f"{name}.{os.getpid()}"
        marker.touch(exist_ok=False)                 # created whole: its name is all it says
        if mode == PAUSE:
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        while marker.exists():                       # held until the test removes the marker
            time.sleep(HOLD_POLL_S)
    else:
        os.kill(os.getpid(), signal.SIGKILL)
