"""Every EPUB we write is validated by Debian's epubcheck 4.2.x (`scripts/setup.sh test` installs it), run as
`java -jar /usr/share/java/epubcheck.jar FILE` (Debian's /usr/bin/epubcheck is a link to the jar that is not
executable on every machine).

    result = epubcheck(path)       # skips the test when epubcheck is absent; under CI=true, fails it
    assert (result.errors, result.warnings) == (0, 0), result.output
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

JAR = Path(os.environ.get("EPUBCHECK_JAR", "/usr/share/java/epubcheck.jar"))
TIMEOUT_S = 300               # s: a hang guard for one validation
_COUNTS = re.compile(r"Messages:\s*(\d+) fatals? / (\d+) errors? / (\d+) warnings? / (\d+) infos?")


@dataclass(frozen=True)
class EpubCheck:
    fatals: int
    errors: int
    warnings: int
    output: str                # what epubcheck printed (stdout and stderr)


def epubcheck(path: Path) -> EpubCheck:
    """Validate `path`; the counts from epubcheck's summary line ("No errors or warnings detected": all 0)."""
    java = shutil.which("java")
    if java is None or not JAR.is_file():
        what = "epubcheck (and java) are not installed (scripts/setup.sh test installs them)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(what)
        pytest.skip(what)
    r = subprocess.run([java, "-jar", str(JAR), str(path)], capture_output=True, text=True, timeout=TIMEOUT_S)
    out = r.stdout + r.stderr
    m = _COUNTS.search(out)
    if m:
        fatals, errors, warnings, _ = map(int, m.groups())
    elif "No errors or warnings detected" in out and r.returncode == 0:
        fatals = errors = warnings = 0
    else:
        raise AssertionError(f"epubcheck printed no summary (exit {r.returncode}):\n{out}")
    return EpubCheck(fatals, errors, warnings, out)
