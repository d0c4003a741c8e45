"""scripts/arch_metrics.py: issue 40's measures, and the bounds the package keeps (the synthesize stage's functions,
package_book, the engine seam, the lazy project imports, the long module docstrings)."""
from __future__ import annotations

import subprocess
import sys

from scripts.arch_metrics import LONG, MCCABE, measure
from tests.conftest import ROOT


def test_the_package_keeps_issue_40s_bounds():
    m = measure()
    s = m["synthesize"]
    assert (s["over_50_lines"], s["over_mccabe_10"], s["untyped_parameters"]) == ([], [], [])
    assert s["longest"] <= LONG and s["max_mccabe"] <= MCCABE
    assert m["package_book"]["lines"] <= 40 and m["package_book"]["mccabe"] <= MCCABE
    assert m["untyped_seam_parameters"] == [] and m["loaded_reaches"] == []
    assert m["lazy_project_imports"]["count"] <= 8
    assert m["long_module_docstrings"]["count"] <= 10


def test_the_script_prints_the_measures():
    out = subprocess.run([sys.executable, "scripts/arch_metrics.py"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "package_book:" in out.stdout and "function-level project imports:" in out.stdout
