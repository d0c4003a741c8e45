"""The package's layering, read from the source (lazy imports inside functions count too):

    flows/      composition: the CLI and the Prefect flows (no module over FLOWS_MAX_LINES lines)
      ↓
    tasks/      the pipeline's stages as plain functions (never flows/, never Prefect)
      ↓
    manifests/  the Parquet manifest, the book lock (never tasks/, flows/ or Prefect)
      ↓
    engine/     ChatTTS loading and generation, and the one atomic writer (imports only engine/)

and one way to rename a file into place: os.replace (or Path.replace/rename) in exactly one module."""
from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

PACKAGES = ("flows", "tasks", "manifests", "engine")
FORBIDDEN = {
    "engine": {"prefect", "tasks", "flows", "manifests"},
    "manifests": {"prefect", "tasks", "flows"},
    "tasks": {"prefect", "flows"},
}
FLOWS_MAX_LINES = 200        # a flows/ module longer than this holds more than composition
RENAMES = {"replace", "rename", "renames"}


def package_files(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def imported_roots(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def renames_in(path) -> list[int]:
    """Lines that rename a file: os.replace/rename/renames, and Path.replace/rename (one argument; str.replace
    takes two)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RENAMES:
            on_os = isinstance(node.func.value, ast.Name) and node.func.value.id == "os"
            if on_os or node.func.attr != "replace" or (len(node.args) == 1 and not node.keywords):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_in_their_layer(package):
    files = package_files(package)
    assert files
    bad = {f.relative_to(ROOT).as_posix(): sorted(imported_roots(f) & FORBIDDEN[package]) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_flows_modules_are_composition_sized():
    long = {f.name: n for f in package_files("flows") if (n := len(f.read_text(encoding="utf-8").splitlines()))
            > FLOWS_MAX_LINES}
    assert long == {}


def test_one_module_renames_files_into_place():
    found = {f.relative_to(ROOT).as_posix(): renames_in(f)
             for p in (*PACKAGES, "benchmarks") for f in package_files(p)}
    assert [name for name, lines in found.items() if lines] == ["engine/atomic.py"], found


def test_the_scans_see_lazy_imports_and_renames(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g(p, q):\n    from prefect import flow\n    import tasks.plan\n    os.replace(p, q)\n"
                 "    p.rename(q)\n    q.replace(p)\n    'ab'.replace('a', 'b')\n", encoding="utf-8")
    assert imported_roots(f) == {"prefect", "tasks"}
    assert renames_in(f) == [4, 5, 6]
