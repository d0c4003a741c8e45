"""TN exact-match rates on the public golden sets (benchmarks/tn_score.py prints them with the misses).

Thresholds: NeMo and PaddleSpeech >= 92 % (issue 3); WeTextProcessing's own cases >= wetext alone (measured in
this run).  The sets disagree on a few conventions (PaddleSpeech reads 10076 and 985 digit by digit and mobile
numbers with 一; NeMo reads bare integers as cardinals; WeTextProcessing reads mobile numbers with 幺): see
docs/text-frontend.md."""
from __future__ import annotations

import pytest

from benchmarks.tn_score import TN_DIR, load_cases, ours, score, wetext_alone

THRESHOLDS = {"nemo": 0.92, "paddlespeech": 0.92}


@pytest.fixture(scope="module")
def cases():
    if not TN_DIR.exists():
        pytest.skip(f"TN corpus not present: {TN_DIR}")
    return {name: load_cases(name) for name in ("nemo", "paddlespeech", "wetext")}


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_rate_at_least_threshold(cases, name):
    assert len(cases[name]) > 100
    rate, misses = score(ours, cases[name])
    assert rate >= THRESHOLDS[name], "\n".join(map(str, misses))


def test_no_regression_against_wetext_alone(cases):
    ours_rate, ours_misses = score(ours, cases["wetext"])
    base_rate, base_misses = score(wetext_alone, cases["wetext"])
    assert len(cases["wetext"]) > 100
    assert ours_rate >= base_rate, "\n".join(map(str, ours_misses))


def test_scoring_is_not_trivially_true():
    fake = [("1", "一", "x:1"), ("2", "三", "x:2")]
    rate, misses = score(ours, fake)
    assert rate == 0.5 and misses[0][1] == "2"
