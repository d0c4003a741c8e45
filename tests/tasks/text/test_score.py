"""TN exact-match rates on the sets in tests/data/tn (benchmarks/tn_score.py prints them with the misses).

The three public sets are regression sets: they were used while the rules were written, so they are held at the
rates reached (NeMo 94.3 %, 94.6 % since the ordinal rule; PaddleSpeech 95.3 %), and WeTextProcessing's own cases
at least at wetext alone.  The held-out sets (real sentences whose readings were written before any rule was
changed for them) are held at the rates reached, rounded down: the first batch, `heldout` (97.0 %; its misses then
guided rules), and the second, `heldout-2` (96.2 %), which the benchmark scores on its own line, and the third,
`heldout-3` (ordinals, clock hours, durations: 76.5 % on its first run, 100 % after the 两/二 and duration rules;
held at 94 %, one miss of its 17).  The sets disagree on a few conventions (docs/text-frontend.md)."""
from __future__ import annotations

import pytest

from benchmarks.tn_score import HELD_OUT, SETS, load_cases, main, ours, score, wetext_alone

THRESHOLDS = {"nemo": 0.94, "paddlespeech": 0.95, "heldout": 0.96, "heldout-2": 0.96, "heldout-3": 0.94}
MIN_CASES = {"nemo": 300, "paddlespeech": 100, "wetext": 100, "heldout": 160, "heldout-2": 50,
             "heldout-3": 15}


@pytest.fixture(scope="module")
def cases():
    return {name: load_cases(name) for name in SETS}


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_rate_at_least_threshold(cases, name):
    assert len(cases[name]) >= MIN_CASES[name]
    rate, misses = score(ours, cases[name])
    assert rate >= THRESHOLDS[name], "\n".join(map(str, misses))


def test_no_regression_against_wetext_alone(cases):
    ours_rate, ours_misses = score(ours, cases["wetext"])
    base_rate, base_misses = score(wetext_alone, cases["wetext"])
    assert len(cases["wetext"]) >= MIN_CASES["wetext"]
    assert ours_rate >= base_rate, "\n".join(map(str, ours_misses))


@pytest.mark.parametrize("name, file", [("heldout", "cases.tsv"), ("heldout-2", "cases-2.tsv"),
                                        ("heldout-3", "cases-3.tsv")])
def test_heldout_cases_name_their_source(cases, name, file):
    assert len(cases[name]) >= MIN_CASES[name]
    for inp, exp, origin in cases[name]:
        assert origin.startswith(f"{file}:"), origin                 # each batch is its own file's, only
        assert inp and exp and not any(c.isdigit() for c in exp), origin
        assert origin.split()[1].split(":")[0] in ("cmrc2018", "drcd", "news"), origin


def test_the_held_out_batch_is_scored_on_its_own_line(cases, capsys):
    """`python -m benchmarks.tn_score` prints cases-2.tsv's rate alone, marked held out, with its own counts."""
    assert HELD_OUT == ("heldout-2", "heldout-3")
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    rate, misses = score(ours, cases["heldout-2"])
    n = len(cases["heldout-2"])
    assert [line for line in lines if line.startswith("heldout-2 ")] == [
        f"{'heldout-2':13s} ours {rate:6.1%} ({n - len(misses)}/{n})   held out"]
    assert [line for line in lines if line.startswith("heldout ")][0].endswith(f"/{len(cases['heldout'])})")


def test_scoring_is_not_trivially_true():
    fake = [("1", "一", "x:1"), ("2", "三", "x:2")]
    rate, misses = score(ours, fake)
    assert rate == 0.5 and misses[0][1] == "2"
