"""Package layering, read from the source: engine/ never imports Prefect (or the pipeline); manifests/ sits under
tasks/ (it used to import tasks.crashpoints); tasks/ holds plain functions (no Prefect, no flows)."""
from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

FORBIDDEN = {
    "engine": {"prefect", "tasks", "flows", "manifests"},
    "manifests": {"prefect", "tasks", "flows"},         # (engine.units, the speech-rate constants, is fine)
    "tasks": {"prefect", "flows"},
}


def imported_roots(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):                    # lazy imports inside functions count too
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_in_their_layer(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    bad = {f.relative_to(ROOT).as_posix(): sorted(imported_roots(f) & FORBIDDEN[package]) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_scan_sees_lazy_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from prefect import flow\n    import tasks.plan\n", encoding="utf-8")
    assert imported_roots(f) == {"prefect", "tasks"}
