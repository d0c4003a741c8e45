"""The package's layering, read from the source (lazy imports inside functions count too):

    flows/        composition: the CLI and the Prefect flows (no module over FLOWS_MAX_LINES lines)
      ↓
    tasks/        the pipeline's stages as plain functions (never flows/, never Prefect), in LAYERS order:
      ↓           stages, options → catalogue → site → fleet → audio → synthesize → plan → voice → text →
      ↓           ingest → book, errors, bookdir
    manifests/    the Parquet manifest, the book lock (never tasks/, flows/ or Prefect)
      ↓
    engine/       ChatTTS loading and generation, and the one atomic writer (imports only engine/)

A module imports only modules of its own layer or below, under `if TYPE_CHECKING:` too (an annotation naming a
higher layer's type is a stage reading more than its layer gives it); no two modules import each other, however
indirectly.  A function-level (lazy) import is only for what defers a cost: a project module whose import loads a
heavy library (HEAVY: each of these takes 0.25-4 s to import here, against 0.05 s for Python itself) or the
engine itself (MODEL: `package`, `status`, `inspect` never import it, tested in tests/flows) that the importing
module does not load already, or a HEAVY library it does not import already; never the standard library (its
place is the top); and a lazy project import only where a program starts light for it: ENTRY_POINTS says what
each entry point may not load, LAZY which one each function-level project import keeps light.  And one way to
rename a file into place: os.replace (or Path.replace/rename) in exactly one module."""
from __future__ import annotations

import ast
import subprocess
import sys
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
    ("tasks.book", "tasks.errors", "tasks.bookdir", "tasks.bookengine"),
    ("tasks.ingest",),
    ("tasks.text",),
    ("tasks.voice",),
    ("tasks.plan",),
    ("tasks.qa",),
    ("tasks.synthesize",),
    ("tasks.audio",),
    ("tasks.fleet",),
    ("tasks.site",),
    ("tasks.intake",),
    ("tasks.options",),
    ("tasks.stages",),
    ("flows",),
)
HEAVY = {"torch", "torchaudio", "transformers", "ChatTTS", "vocos", "huggingface_hub", "safetensors", "prefect",
         "pyarrow", "s3fs", "scipy", "wetext", "jieba", "numpy", "soundfile",
         "starlette", "jinja2"}      # the studio's web stack (0.1-0.25 s): no other command pays for it
MODEL = {"engine.engine"}    # the engine: loading it is torch and ChatTTS; what needs no model never imports it
STDLIB = set(sys.stdlib_module_names)
# Where programs start, and what each may not load at import (the loader below: HEAVY and MODEL).  A function-level
# project import is kept only where hoisting it would break one of these (LAZY names which).
ENTRY_POINTS = {
    "flows.params": HEAVY | MODEL,       # the render schema: `--help`, prefect.yaml's parameters, the flows' signatures
    "flows.cli": HEAVY | MODEL,          # chattts-render: --help, --version and a usage error answer at once
    "manifests": HEAVY | MODEL,          # users' scripts: `import manifests` (the store loads on first use)
    "flows.commands": {"prefect", "torch", "starlette", "jinja2"} | MODEL,   # the commands: Prefect only with a
    "flows.render_book": {"torch"} | MODEL,            # server, the studio's web stack only for it, the model only
                                                       # to render (package, status, inspect never load it)
    "flows.nightly": {"torch"} | MODEL,
}
LAZY = {                     # every function-level project import: the entry point that hoisting it would break
    ("flows.cli", "flows.commands"): "flows.cli",
    ("flows.commands", "flows.render_book"): "flows.commands",
    ("manifests", "manifests.store"): "manifests",
    ("tasks.stages", "engine.engine"): "flows.commands",
    ("flows.studio", "tasks.site.studio.app"): "flows.commands",
}
TOOLS = {"benchmarks", "scripts", "tests"}   # developers' code (benchmarks/trtcheck.py, …): the package never imports
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


def imports_in(path: Path) -> list[tuple[str, int, str]]:
    """(dotted name, line, where) for every absolute import in the file — `import a.b`: a.b, `from a.b import c`:
    a.b.c — where is "module" (runs on import: top level, inside top-level if/try too), "function" (a lazy import,
    inside a function) or "typing" (under `if TYPE_CHECKING:`: never runs, annotations only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int, str]] = []

    def visit(nodes, where: str) -> None:
        for n in nodes:
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test):
                visit(n.body, "typing")
                visit(n.orelse, where)
                continue
            if isinstance(n, ast.Import):
                out.extend((a.name, n.lineno, where) for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                out.extend((f"{n.module}.{a.name}", n.lineno, where) for a in n.names)
            lazy = isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and where == "module"
            visit(ast.iter_child_nodes(n), "function" if lazy else where)

    visit(tree.body, "module")
    return out


def imports_of(mod: str, path: Path, mods) -> list[tuple[str, int, str]]:
    """(imported project module, line, where) for every import of a project module in the file (imports_in)."""
    return [(t, line, where) for name, line, where in imports_in(path) if (t := _resolve(name, mods)) and t != mod]


def graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports, lazily and for annotations too (a package's __init__ importing its own
    submodules aside)."""
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
    """'a -> b (line)' for every import from a lower layer into a higher one (under TYPE_CHECKING too: an annotation
    that names a higher layer's type is a stage reading more than its own layer gives it)."""
    mods = modules(root, packages)
    bad = []
    for m, p in mods.items():
        for t, line, _ in imports_of(m, p, mods):
            if (lm := layer(m, layers)) is not None and (lt := layer(t, layers)) is not None and lt > lm:
                bad.append(f"{m} -> {t} (line {line})")
    return bad


def loads(root: Path = ROOT, packages=PACKAGES, hoisted: frozenset[tuple[str, str]] = frozenset()
          ) -> dict[str, set[str]]:
    """module -> what importing it loads of HEAVY and MODEL: the heavy libraries of its own module-level imports, of
    its parent packages' and of every project module it imports at module level (a fixed point), and the engine
    when it is or imports it.  `hoisted`: (module, project module) lazy imports counted as if at the top."""
    mods = modules(root, packages)
    got, deps = {}, {}
    for m, p in mods.items():
        found = [(name, where) for name, _, where in imports_in(p) if where == "module"]
        got[m] = {name.split(".")[0] for name, _ in found} & HEAVY | ({m} & MODEL)
        deps[m] = {t for t, _, where in imports_of(m, p, mods) if where == "module" or (m, t) in hoisted} | \
            ({".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)} & set(mods))
    changed = True
    while changed:
        changed = False
        for m in mods:
            more = set().union(*(got[d] for d in deps[m])) - got[m]
            if more:
                got[m] |= more
                changed = True
    return got


def lazy_project_imports(root: Path = ROOT, packages=PACKAGES) -> set[tuple[str, str]]:
    """(module, project module) for every function-level import of a project module."""
    mods = modules(root, packages)
    return {(m, t) for m, p in mods.items() for t, _, where in imports_of(m, p, mods) if where == "function"}


def entry_point_breaches(root: Path = ROOT, packages=PACKAGES, hoisted: frozenset = frozenset(),
                         entry_points=None) -> dict[str, list[str]]:
    """entry point -> what it loads at import that ENTRY_POINTS says it must not (empty: none)."""
    got = loads(root, packages, hoisted)
    return {e: sorted(got[e] & banned) for e, banned in (entry_points or ENTRY_POINTS).items() if got[e] & banned}


def heavy_modules(root: Path = ROOT, packages=PACKAGES) -> set[str]:
    """The project modules whose import loads a HEAVY library."""
    return {m for m, found in loads(root, packages).items() if found & HEAVY}


def needless_lazy_imports(root: Path = ROOT, packages=PACKAGES) -> list[str]:
    """'a -> b (line)' for every function-level import that defers nothing: of a project module that loads nothing
    of HEAVY or MODEL that `a` does not load already, of a HEAVY library `a` loads already, or of the standard
    library (cheap: its place is the top of the module)."""
    mods, loaded = modules(root, packages), loads(root, packages)
    bad = []
    for m, p in mods.items():
        for name, line, where in imports_in(p):
            t, lib = _resolve(name, mods), name.split(".")[0]
            if where == "function" and t != m and (
                    not loaded[t] - loaded[m] if t is not None
                    else lib in STDLIB or lib in loaded[m] & HEAVY):
                bad.append(f"{m} -> {t or lib} (line {line})")
    return bad


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


def test_no_package_module_imports_a_developer_tool():
    """benchmarks/trtcheck.py (the static TensorRT check, `python -m benchmarks.trtcheck`) is run by hand, by the tests
    and by benchmarks/onnx_gpu_check.py; the runtime takes the TensorRT profiles from engine/trtprofile.py."""
    bad = {f.relative_to(ROOT).as_posix(): sorted(imported_roots(f) & TOOLS)
           for p in PACKAGES for f in package_files(p)}
    assert {k: v for k, v in bad.items() if v} == {}


def test_lazy_imports_are_only_for_heavy_libraries():
    assert needless_lazy_imports() == []


def test_where_programs_start_they_load_only_what_they_need():
    """ENTRY_POINTS: the render schema, the CLI and `import manifests` load nothing heavy; the commands and the flows
    never the engine; the commands never Prefect."""
    assert entry_point_breaches() == {}


def test_every_lazy_project_import_keeps_an_entry_point_light():
    """The function-level project imports are LAZY's, and each is needed: hoisted to the top of its module, the
    entry point LAZY names would load what it must not."""
    assert lazy_project_imports() == set(LAZY)
    for lazy, entry in LAZY.items():
        assert entry in entry_point_breaches(hoisted=frozenset({lazy})), lazy


def test_the_cli_and_the_schema_load_no_heavy_library_when_run():
    """What the loader above reads from the source holds in a fresh interpreter: importing the CLI (and with it the
    schema) loads no pyarrow, numpy, torch or Prefect."""
    code = ("import sys, flows.cli, flows.params; "
            "print(sorted(m for m in ('pyarrow', 'numpy', 'torch', 'prefect', 'engine.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


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
    (pkg / "low" / "d.py").write_text("import numpy\n\ndef h():\n    import numpy\n    from pkg.high import z\n"
                                      "    import json\n    import torch\n    import pydub\n")
    (pkg / "low" / "e.py").write_text("def k():\n    from pkg.high import z\n")
    layers = (("pkg.low", "pkg.types"), ("pkg.high",))
    assert cycles(graph(tmp_path, ("pkg",))) == [["pkg.low.a", "pkg.low.b"]]
    assert sorted(upward_imports(tmp_path, ("pkg",), layers)) == [
        "pkg.low.c -> pkg.high (line 1)", "pkg.low.c -> pkg.high (line 5)", "pkg.low.d -> pkg.high (line 5)",
        "pkg.low.e -> pkg.high (line 2)", "pkg.types -> pkg.high (line 3)"]          # under TYPE_CHECKING too
    assert heavy_modules(tmp_path, ("pkg",)) == {"pkg.high", "pkg.low.c", "pkg.low.d"}
    assert sorted(needless_lazy_imports(tmp_path, ("pkg",))) == [
        "pkg.low.b -> pkg.low.a (line 4)",           # pkg.low.a loads nothing heavy: it defers nothing
        "pkg.low.c -> pkg.high (line 5)",            # numpy: pkg.low.c imports pkg.high at the top already
        "pkg.low.c -> pkg.low.b (line 4)",
        "pkg.low.d -> json (line 6)",                # the standard library: its place is the top
        "pkg.low.d -> numpy (line 4)",               # numpy: already imported at the top
        "pkg.low.d -> pkg.high (line 5)"]            # its numpy: already loaded by pkg.low.d
    # pkg.low.d's torch (heavy, not loaded yet) and pydub (not heavy: an optional library) and pkg.low.e's pkg.high
    # (numpy, not loaded by pkg.low.e) defer a library: they are what a lazy import is for
    assert lazy_project_imports(tmp_path, ("pkg",)) >= {("pkg.low.e", "pkg.high"), ("pkg.low.d", "pkg.high")}
    light = {"pkg.low.e": {"numpy"}}                  # an entry point that must not load numpy
    assert entry_point_breaches(tmp_path, ("pkg",), entry_points=light) == {}
    assert entry_point_breaches(tmp_path, ("pkg",), frozenset({("pkg.low.e", "pkg.high")}), light) == \
        {"pkg.low.e": ["numpy"]}                     # its lazy import hoisted: it would load numpy


def test_package_code_takes_the_manifest_from_manifests_store():
    """`manifests` hands its store's names to users' scripts on first use (a module __getattr__: importing it loads
    no pyarrow), which the scans above cannot see: the package's own code imports them from manifests.store."""
    from manifests import STORE_NAMES

    bad = []
    for f in (f for p in PACKAGES for f in package_files(p) if f != ROOT / "manifests" / "__init__.py"):
        bad += [f"{f.name}:{line} {name}" for name, line, _ in imports_in(f)
                if name.startswith("manifests.") and name.split(".")[1] in STORE_NAMES]
        bad += [f"{f.name}:{n.lineno} manifests.{n.attr}" for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "manifests"
                and n.attr in STORE_NAMES]
    assert bad == []


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
