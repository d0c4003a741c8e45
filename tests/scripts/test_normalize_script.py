"""scripts/normalize.py: a sentence as the text stage reads it (stdout) and what it removed (stderr)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tasks.text.normalize import NormalizeOptions, normalize

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "normalize.py"


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          check=True, timeout=120)


def test_prints_the_normalized_text_and_the_removals():
    r = _run("他說：「1998年」😀")
    assert r.stdout == normalize("他說：「1998年」😀") + "\n"
    assert r.stderr == "  removed '😀' at 10: emoji\n"


def test_english_and_stdin():
    r = _run("--en", "-", stdin="In 1719, 40 horses.")
    assert r.stdout.strip() == normalize("In 1719, 40 horses.", NormalizeOptions(lang="en")) != "In 1719, 40 horses."
