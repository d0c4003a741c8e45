"""The architecture's measures (issue 40), read from the source: `.venv/bin/python scripts/arch_metrics.py`.

Prints, for the package (flows tasks engine manifests): the longest functions, the functions of tasks/synthesize/
over 50 lines or McCabe 10 and their unannotated parameters, package_book's length and McCabe, the untyped
`engine`/`guard`/`qa`/`checker` parameters of tasks/, what of the engine's loader tasks/ and flows/ reach
(`.loaded`), the function-level (lazy) project imports, and the module docstrings of 20 lines or more.  McCabe is
ruff's (C901).  `--json` prints the same as one JSON object."""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_layering import PACKAGES, _resolve as resolve, imports_in, modules  # noqa: E402

LONG = 50                  # lines: a function longer than this in tasks/synthesize/ is a finding
MCCABE = 10                # ruff's C901: above this in tasks/synthesize/ or package_book is a finding
DOCSTRING_LINES = 20       # a module docstring this long or longer is counted
SEAM_PARAMS = {"engine", "guard", "qa", "checker"}


def functions(path: Path):
    """(qualified name, node) for every function and method in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def length(node) -> int:
    return node.end_lineno - node.lineno + 1


def untyped(node) -> list[str]:
    a = node.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
    return [p.arg for p in params if p.annotation is None and p.arg not in ("self", "cls")]


def mccabe(paths: list[Path]) -> dict[tuple[str, str], int]:
    """(file, function name) -> ruff's McCabe complexity (C901 with the threshold at 0 reports every function)."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "C901",
                          "--config", "lint.mccabe.max-complexity = 0", "--output-format", "json",
                          *map(str, paths)], capture_output=True, text=True, cwd=ROOT).stdout
    got = {}
    for d in json.loads(out or "[]"):
        m = re.match(r"`(.+)` is too complex \((\d+) > 0\)", d["message"])
        if m:
            rel = Path(d["filename"]).resolve().relative_to(ROOT).as_posix()
            got[(rel, m.group(1))] = max(got.get((rel, m.group(1)), 0), int(m.group(2)))
    return got


def module_docstring_lines(path: Path) -> int:
    """The lines the module docstring spans in the file, its quotes' lines included."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    doc = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else None
    return 0 if doc is None else length(doc)


def measure() -> dict:
    files = [f for p in PACKAGES for f in sorted((ROOT / p).rglob("*.py"))]
    rel = {f: f.relative_to(ROOT).as_posix() for f in files}
    cc = mccabe(files)
    funcs = [(rel[f], q, n) for f in files for q, n in functions(f)]

    def cc_of(r, q):
        return cc.get((r, q.rpartition(".")[2]), 1)

    synth = [(r, q, n) for r, q, n in funcs if r.startswith("tasks/synthesize/")]
    pkg = [(r, q, n) for r, q, n in funcs if r == "tasks/audio/package.py" and q == "package_book"]
    mods = modules()
    lazy = sorted({f"{rel[p]}:{line} {t}" for m, p in mods.items() for name, line, where in imports_in(p)
                   if where == "function" and (t := resolve(name, mods)) and t != m})   # one an import statement
    loaded = []
    for f in files:
        if rel[f].split("/")[0] in ("tasks", "flows"):
            loaded += [f"{rel[f]}:{i}" for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
                       if re.search(r"\.loaded\b", line)]
    return {
        "longest_functions": [f"{r}:{q} {length(n)}" for r, q, n in
                              sorted(funcs, key=lambda x: -length(x[2]))[:10]],
        "synthesize": {
            "functions": len(synth),
            "longest": max((length(n) for _, _, n in synth), default=0),
            "over_50_lines": [f"{r}:{q} {length(n)}" for r, q, n in synth if length(n) > LONG],
            "max_mccabe": max((cc_of(r, q) for r, q, _ in synth), default=0),
            "over_mccabe_10": [f"{r}:{q} {cc_of(r, q)}" for r, q, _ in synth if cc_of(r, q) > MCCABE],
            "untyped_parameters": [f"{r}:{q}({', '.join(u)})" for r, q, n in synth if (u := untyped(n))],
        },
        "package_book": {"lines": length(pkg[0][2]), "mccabe": cc_of(*pkg[0][:2])} if pkg else None,
        "untyped_seam_parameters": [f"{r}:{q}({', '.join(u)})" for r, q, n in funcs if r.startswith("tasks/")
                                    and (u := sorted(set(untyped(n)) & SEAM_PARAMS))],
        "loaded_reaches": loaded,
        "lazy_project_imports": {"count": len(lazy), "where": lazy},
        "long_module_docstrings": {"count": len(long := [f"{rel[f]} {n}" for f in files
                                                          if (n := module_docstring_lines(f)) >= DOCSTRING_LINES]),
                                   "where": long},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object")
    args = ap.parse_args(argv)
    m = measure()
    if args.json:
        print(json.dumps(m, indent=1, ensure_ascii=False))
        return 0
    s, p = m["synthesize"], m["package_book"]
    print("longest functions:", *m["longest_functions"], sep="\n  ")
    print(f"tasks/synthesize: {s['functions']} functions, longest {s['longest']} lines, "
          f"{len(s['over_50_lines'])} over {LONG}, max McCabe {s['max_mccabe']}, "
          f"{len(s['over_mccabe_10'])} over {MCCABE}, {len(s['untyped_parameters'])} with untyped parameters")
    for k in ("over_50_lines", "over_mccabe_10", "untyped_parameters"):
        for x in s[k]:
            print(f"  {k}: {x}")
    if p:
        print(f"package_book: {p['lines']} lines, McCabe {p['mccabe']}")
    print(f"untyped engine/guard/qa/checker parameters in tasks/: {len(m['untyped_seam_parameters'])}",
          *m["untyped_seam_parameters"], sep="\n  ")
    print(f"`.loaded` in tasks/ and flows/: {len(m['loaded_reaches'])}", *m["loaded_reaches"], sep="\n  ")
    lz = m["lazy_project_imports"]
    print(f"function-level project imports: {lz['count']}", *lz["where"], sep="\n  ")
    d = m["long_module_docstrings"]
    print(f"module docstrings of {DOCSTRING_LINES}+ lines: {d['count']}", *d["where"], sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
