"""The README section's tables are the module constants."""
from __future__ import annotations

from pathlib import Path

from tasks.text.normalize import REMOVAL_REASONS, punctuation_table_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "text-frontend.md"


def test_punctuation_table_in_docs():
    assert punctuation_table_markdown() in DOC.read_text(encoding="utf-8")


def test_removal_reasons_in_docs():
    text = DOC.read_text(encoding="utf-8")
    for reason, what in REMOVAL_REASONS.items():
        assert f"| `{reason}` | {what} |" in text


def test_lexicon_example_in_docs_loads(tmp_path):
    from tasks.text.normalize import Lexicon, normalize
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1].split("```")[0]
    f = tmp_path / "lex.tsv"
    f.write_text(block, encoding="utf-8")
    lex = Lexicon.load(f)
    assert normalize("他長大了，去銀行", lexicon=lex) == "他涨大了，去银杭"
