"""Test-only crash hooks: `CHATTTS_RENDER_CRASH_AT=<point>:<n>` SIGKILLs the process at the n-th hit of a
named point, so the crash-and-resume tests reach every dangerous moment deterministically.

Points: `ingest` (book read, nothing written yet), `segment-written` (a segment's audio is on disk, its row
not yet committed), `commit` (a manifest part is written and fsynced but not yet renamed into place),
`assemble` (a chapter was assembled in memory, nothing of it written), `package-file` (an output's temp file is
complete but not yet renamed into place).  Unset (always, outside tests) the check is one dict lookup.
"""
from __future__ import annotations

import os
import signal

ENV = "CHATTTS_RENDER_CRASH_AT"
POINTS = ("ingest", "segment-written", "commit", "assemble", "package-file")

_hits: dict[str, int] = {}


def crashpoint(name: str) -> None:
    """SIGKILL this process if CHATTTS_RENDER_CRASH_AT names this point and this is its n-th hit."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, n = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)
