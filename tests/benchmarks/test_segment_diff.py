"""benchmarks/segment_diff.py: a book's segments and plan keys saved, and any later difference found and counted."""
from __future__ import annotations

import json

from benchmarks.segment_diff import compare, main


def _seg(chapter: int, index: int, text: str) -> dict:
    return {"chapter": chapter, "index": index, "text": text, "source_text": text, "pause_after": "sentence",
            "key": f"k-{text}"}


def test_an_inserted_segment_is_one_added_not_a_shifted_chapter():
    base = {"books": {"b": {"segments": [_seg(0, 0, "甲"), _seg(0, 1, "乙"), _seg(0, 2, "丙"), _seg(1, 0, "丁")]}}}
    new = {"books": {"b": {"segments": [_seg(0, 0, "甲"), _seg(0, 1, "新"), _seg(0, 2, "乙"), _seg(0, 3, "丙"),
                                        _seg(1, 0, "戊")]}}}
    r = compare(base, new)["b"]
    assert (r["changed"], r["added"], r["removed"]) == (1, 1, 0)
    assert [(kind, a and a["text"], b and b["text"]) for kind, a, b in r["diffs"]] == [
        ("added", None, "新"), ("changed", "丁", "戊")]


def test_a_book_missing_on_one_side_counts_as_removed():
    base = {"books": {"b": {"segments": [_seg(0, 0, "甲")]}}}
    r = compare(base, {"books": {}})["b"]
    assert (r["removed"], r["missing"]) == (1, "new")


def test_save_then_against_is_the_same_and_a_changed_key_is_found(tmp_path, capsys):
    saved = tmp_path / "base.json"
    assert main(["--save", str(saved), "--books", "examples/daodejing/0"]) == 0
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert len(data["books"]) == 4 and all(b["segments"] for b in data["books"].values())
    first = next(iter(data["books"].values()))["segments"][0]
    assert len(first["key"]) == 32 and first["text"] and first["source_text"]
    assert main(["--against", str(saved), "--books", "examples/daodejing/0"]) == 0
    first["key"] = "0" * 32                                   # as if a rule had changed what is spoken
    saved.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    capsys.readouterr()
    assert main(["--against", str(saved), "--books", "examples/daodejing/0"]) == 1
    out = capsys.readouterr().out
    assert "changed     1" in out and "DIFFERENT" in out


def test_a_bad_baseline_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert main(["--against", str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
