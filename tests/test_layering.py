"""The package's layering, read from the source (lazy imports inside functions count too):

    flows/        composition: the CLI and the Prefect flows (no module over FLOWS_MAX_LINES lines)
      ↓
    tasks/        the pipeline's stages as plain functions (never flows/, never Prefect), in LAYERS order:
      ↓           stages, options → catalogue → site → fleet → audio → synthesize → plan → voice → text →
      ↓           ingest → book, errors, bookdir
    manifests/    the Parquet manifest, the book lock (never tasks/, flows/ or Prefect)
      ↓
    engine/       ChatTTS loading and generation, and the one atomic writer (imports only engine/)

A module imports only modules of its own layer or below; no two modules import each other, however indirectly;
a function-level (lazy) import of the project's own modules is only for one that loads a heavy library when
imported (HEAVY: each of these takes 0.25-4 s to import here, against 0.05 s for Python itself) and for the
engine itself (MODEL: `package`, `status`, `inspect` never import it, tested in tests/flows); an import under
`if TYPE_CHECKING:` is for annotations only and never runs.  And one way to rename a file into place: os.replace
(or Path.replace/rename) in exactly one module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("flows", "tasks", "manifests", "engine")
FORBIDDEN = {
    "engine": {"prefect", "tasks", "flows", "manifests"},
    "manifests": {"prefect", "tasks", "flows"},
    "tasks": {"prefect", "flows"},
}
LAYERS = (                   # lowest first; a module may import its own layer and the ones before it
    ("engine",),
    ("manifests",),
    ("tasks.book", "tasks.errors", "tasks.bookdir"),
    ("tasks.ingest",),
    ("tasks.text",),
    ("tasks.voice",),
    ("tasks.plan",),
    ("tasks.qa",),
    ("tasks.synthesize",),
    ("tasks.audio",),
    ("tasks.fleet",),
    ("tasks.site",),
    ("tasks.catalogue",),
    ("tasks.options",),
    ("tasks.stages",),
    ("flows",),
)
HEAVY = {"torch", "torchaudio", "transformers", "ChatTTS", "vocos", "huggingface_hub", "safetensors", "prefect",
         "pyarrow", "s3fs", "scipy", "wetext", "jieba", "numpy", "soundfile"}
MODEL = {"engine.engine"}    # the engine: loading it is torch and ChatTTS; what needs no model never imports it
FLOWS_MAX_LINES = 200        # a flows/ module longer than this holds more than composition
RENAMES = {"replace", "rename", "renames"}


def package_files(package: str, root: Path = ROOT):
    return sorted((root / package).rglob("*.py"))


def imported_roots(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


# ------------------------------------------------------------------------------------- the module graph

def modules(root: Path = ROOT, packages=PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for p in package_files(pkg, root):
            parts = list(p.relative_to(root).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _resolve(name: str, mods) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(mod: str, path: Path, mods) -> list[tuple[str, int, bool]]:
    """(imported project module, line, lazy) for every import in the file that runs: module level (inside
    top-level if/try too) or inside a function (lazy); imports under `if TYPE_CHECKING:` never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int, bool]] = []

    def names(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            return [f"{node.module}.{a.name}" for a in node.names]
        return []

    def visit(node, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                for c in child.orelse:
                    visit(c, lazy)
                continue
            for n in names(child):
                t = _resolve(n, mods)
                if t and t != mod:
                    out.append((t, child.lineno, lazy))
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return out


def graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports (a package's __init__ importing its own submodules aside)."""
    mods = modules(root, packages)
    return {m: {t for t, _, _ in imports_of(m, p, mods) if not t.startswith(m + ".")} for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def layer(mod: str, layers=LAYERS) -> int | None:
    for i, prefixes in enumerate(layers):
        if any(mod == p or mod.startswith(p + ".") for p in prefixes):
            return i
    return None


def upward_imports(root: Path = ROOT, packages=PACKAGES, layers=LAYERS) -> list[str]:
    """'a -> b (line)' for every import from a lower layer into a higher one."""
    mods = modules(root, packages)
    bad = []
    for m, p in mods.items():
        for t, line, _ in imports_of(m, p, mods):
            if (lm := layer(m, layers)) is not None and (lt := layer(t, layers)) is not None and lt > lm:
                bad.append(f"{m} -> {t} (line {line})")
    return bad


def heavy_modules(root: Path = ROOT, packages=PACKAGES) -> set[str]:
    """The project modules whose import loads a HEAVY library (their own module-level imports, their parent
    packages' and those of every project module they import at module level)."""
    mods = modules(root, packages)
    direct: dict[str, tuple[bool, set[str]]] = {}
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        ext, proj = set(), set()
        for t, _, lazy in imports_of(m, p, mods):
            if not lazy:
                proj.add(t)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node in _module_level(tree):
                ext |= imported_roots_of(node)
        parents = {".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)} & set(mods)
        direct[m] = (bool(ext & HEAVY), proj | parents)
    heavy: set[str] = set()
    changed = True
    while changed:                                   # a fixed point over the module-level import graph
        changed = False
        for m, (own, deps) in direct.items():
            if m not in heavy and (own or deps & heavy):
                heavy.add(m)
                changed = True
    return heavy


def _module_level(tree) -> list:
    """The import nodes that run when the module is imported (top level, inside top-level if/try)."""
    out = []

    def visit(body):
        for n in body:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out.append(n)
            elif isinstance(n, ast.If) and "TYPE_CHECKING" not in ast.dump(n.test):
                visit(n.body)
                visit(n.orelse)
            elif isinstance(n, ast.Try):
                visit(n.body)
                visit(n.orelse)
                visit(n.finalbody)
                for h in n.handlers:
                    visit(h.body)

    visit(tree.body)
    return out


def imported_roots_of(node) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    return {node.module.split(".")[0]} if node.level == 0 and node.module else set()


def needless_lazy_imports(root: Path = ROOT, packages=PACKAGES) -> list[str]:
    """'a -> b (line)' for every function-level import of a project module that loads no heavy library."""
    mods, heavy = modules(root, packages), heavy_modules(root, packages)
    return [f"{m} -> {t} (line {line})" for m, p in mods.items() for t, line, lazy in imports_of(m, p, mods)
            if lazy and t not in heavy | MODEL]


# ------------------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_in_their_layer(package):
    files = package_files(package)
    assert files
    bad = {f.relative_to(ROOT).as_posix(): sorted(imported_roots(f) & FORBIDDEN[package]) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_imports_follow_the_layer_order():
    unplaced = sorted(m for m in modules() if layer(m) is None and m not in ("tasks",))
    assert unplaced == []                            # every module belongs to a layer
    assert upward_imports() == []


def test_lazy_imports_are_only_for_heavy_libraries():
    assert needless_lazy_imports() == []


def test_the_stage_that_renders_audio_is_the_only_one_that_calls_the_engine():
    """Engine.synthesize / anchor_voice (rendering) are called from tasks/synthesize/ alone."""
    callers = set()
    for f in package_files("tasks"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("synthesize", "anchor_voice") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "engine":
                callers.add(f.relative_to(ROOT).parent.as_posix())
    assert callers == {"tasks/synthesize"}


def test_the_checks_fail_on_a_cycle_an_upward_import_and_a_needless_lazy_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    for f in ("__init__.py", "low/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "low" / "a.py").write_text("from pkg.low.b import x\n")
    (pkg / "low" / "b.py").write_text("x = 1\n\ndef f():\n    from pkg.low.a import y\n")   # a lazy cycle
    (pkg / "high.py").write_text("import numpy\n")
    (pkg / "low" / "c.py").write_text("from pkg.high import z\n\ndef g():\n    from pkg.low import b\n"
                                      "    from pkg.high import z\n")
    (pkg / "types.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import z\n")
    layers = (("pkg.low", "pkg.types"), ("pkg.high",))
    assert cycles(graph(tmp_path, ("pkg",))) == [["pkg.low.a", "pkg.low.b"]]
    assert upward_imports(tmp_path, ("pkg",), layers) == ["pkg.low.c -> pkg.high (line 1)",
                                                          "pkg.low.c -> pkg.high (line 5)"]
    assert heavy_modules(tmp_path, ("pkg",)) >= {"pkg.high", "pkg.low.c"}
    assert "pkg.low.b -> pkg.low.a (line 4)" in needless_lazy_imports(tmp_path, ("pkg",))
    assert "pkg.low.c -> pkg.low.b (line 4)" in needless_lazy_imports(tmp_path, ("pkg",))
    assert not any("pkg.high" in x for x in needless_lazy_imports(tmp_path, ("pkg",)))   # numpy: heavy


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
    f.write_text("def g(p, q):\n    from prefect import flow\n    import tasks.plan.rows\n    os.replace(p, q)\n"
                 "    p.rename(q)\n    q.replace(p)\n    'ab'.replace('a', 'b')\n", encoding="utf-8")
    assert imported_roots(f) == {"prefect", "tasks"}
    assert renames_in(f) == [4, 5, 6]


def test_the_import_paths_users_script_keep_working():
    """The documented entry points (README, docs/text-frontend.md) stay where users' scripts import them."""
    import manifests
    from tasks.text.normalize import normalize

    assert callable(manifests.load) and callable(manifests.summary) and callable(manifests.commit)
    assert normalize("第3章") == "第三章"
