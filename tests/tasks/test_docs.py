"""docs/text-frontend.md's tables are the module constants."""
from __future__ import annotations

from pathlib import Path

from tasks.text.normalize import _STRENGTH, PUNCT_TABLE, REMOVAL_REASONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "text-frontend.md"
BOUNDARY_NAMES = {0: "none", 1: "clause", 2: "sentence"}


def punctuation_table_markdown() -> str:
    """PUNCT_TABLE as the Markdown table of the docs: one row per (spoken mark, boundary), strongest first."""
    groups: dict[tuple[str, int], list[str]] = {}
    for mark, key in PUNCT_TABLE.items():
        groups.setdefault(key, []).append(mark)
    rows = ["| source marks | spoken as | segment boundary |", "|---|---|---|"]
    for (out, boundary), marks in sorted(groups.items(), key=lambda kv: (-_STRENGTH[kv[0][0]], -kv[0][1])):
        shown = " ".join(f"`{m}`" if m not in "`|" else {"`": "`` ` ``", "|": "`\\|`"}[m] for m in marks)
        rows.append(f"| {shown} | {out or '(silent)'} | {BOUNDARY_NAMES[boundary]} |")
    return "\n".join(rows)


def test_punctuation_table_in_docs():
    assert punctuation_table_markdown() in DOC.read_text(encoding="utf-8")


def test_removal_reasons_in_docs():
    text = DOC.read_text(encoding="utf-8")
    for reason, what in REMOVAL_REASONS.items():
        assert f"| `{reason}` | {what} |" in text


def test_lexicon_example_in_docs_loads(tmp_path):
    from tasks.text.lexicon import Lexicon
    from tasks.text.normalize import NormalizeOptions, normalize
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1].split("```")[0]
    f = tmp_path / "lex.tsv"
    f.write_text(block, encoding="utf-8")
    lex = Lexicon.load(f)
    assert normalize("他長大了，去銀行", NormalizeOptions(lexicon=lex)) == "他涨大了，去银杭"


def test_readme_names_every_command_and_option_of_the_cli():
    """README.md's Usage is the parser: every command in the usage block, every option somewhere in the README."""
    import argparse
    import re

    from flows.cli import build_parser

    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    usage = readme.split("## Usage", 1)[1].split("```", 2)[1]

    def parsers(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
        yield path, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from parsers(sub, (*path, name))

    missing = []
    for path, p in parsers(build_parser()):
        if path and path != ("voices", "audition") and " ".join(path) not in usage:   # `voices BOOK` auditions
            missing.append(" ".join(path))
        for action in p._actions:
            missing += [f"{' '.join(path)} {o}" for o in action.option_strings if o.startswith("--")
                        and o != "--help" and not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", readme)]
    assert missing == [], missing
