"""Every distribution pyproject.toml declares is imported by the package, and every third-party module the
package imports (lazy imports too) comes from a declared distribution — read from the source and the installed
distributions' metadata."""
from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import ROOT
from tests.test_layering import PACKAGES, imported_roots

# Extras whose distributions the package imports (lazily, behind QAUnavailable): declared there, not in the core.
IMPORTED_EXTRAS = ("qa", "onnx")
# Declared for a dependency's sake, not imported by us, and why.
NOT_IMPORTED = {"requests": "`import ChatTTS` needs it and chattts 0.2.5 does not declare it"}


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["dependencies"] + [d for e in IMPORTED_EXTRAS for d in project["optional-dependencies"][e]]
    return {_canon(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in deps}


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_distributions() -> dict[str, set[str]]:
    """Distribution -> the package files importing it (third-party imports only)."""
    dists = packages_distributions()
    out: dict[str, set[str]] = {}
    for package in PACKAGES:
        for f in sorted((ROOT / package).rglob("*.py")):
            for root in imported_roots(f) - set(sys.stdlib_module_names) - set(PACKAGES):
                for dist in dists.get(root, [f"<no distribution provides {root}>"]):
                    out.setdefault(_canon(dist), set()).add(f.relative_to(ROOT).as_posix())
    return out


def problems(declared_dists: set[str], used: dict[str, set[str]]) -> dict[str, list[str]]:
    return {"imported, undeclared": sorted(set(used) - declared_dists),
            "declared, unused": sorted(declared_dists - set(used) - set(NOT_IMPORTED)),
            "excused, yet imported": sorted(set(NOT_IMPORTED) & set(used))}


def test_declared_dependencies_are_exactly_the_imported_ones():
    assert problems(declared(), imported_distributions()) == {
        "imported, undeclared": [], "declared, unused": [], "excused, yet imported": []}


def test_the_check_sees_an_undeclared_and_an_unused_dependency():
    found = problems(declared() - {"scipy"} | {"ebooklib"}, imported_distributions())
    assert found["imported, undeclared"] == ["scipy"] and found["declared, unused"] == ["ebooklib"]
