"""Acceptance 1 of issue 24 on the real speech corpus (../shared/corpus/speech): every right (clip, transcript)
pair passes; at least 95 % of wrong pairs (a clip with another clip's transcript, same language), of truncations
(the first 45 % of a clip with its full transcript) and of noise clips are flagged; the drift gate flags at
least 90 % of other-speaker pairs and at most 5 % of same-speaker pairs.  The verdicts are
benchmarks/qa_precision.py's `measure` (where docs/qa.md's precision/recall numbers come from), run once per
module: each audio heard and embedded once."""
from __future__ import annotations

import pytest

from benchmarks.qa_precision import asr_pairs, corpus_clips, drift_pairs, measure, rates
from tasks.qa.options import QAOptions
from tasks.qa.verdict import FLAG, PASS
from tests.conftest import corpus_path

pytest.importorskip("pypinyin")
OPTS = QAOptions()


@pytest.fixture(scope="module")
def clips():
    return corpus_clips(corpus_path("speech"))


@pytest.fixture(scope="module")
def measured(clips, transcriber, speaker_encoder):
    return measure(clips, transcriber, speaker_encoder)


def _rows(measured, kind):
    return [r for r in measured["asr_rows"] if r["kind"] == kind]


def test_the_pairs_cover_the_corpus(clips):
    a, d = asr_pairs(clips), drift_pairs(clips)
    count = lambda pairs, kind: sum(p.kind == kind for p in pairs)           # noqa: E731
    assert len(clips) == 12 and count(a, "right") == count(a, "truncated") == 12
    assert count(a, "wrong") == 10 * 9 - 2 + 2 * 1          # D4_751 and its noise copy share their sentence
    assert {(p.audio, p.other) for p in d if p.kind == "same"} == {
        ("zh_aishell1_S0764_W0121.wav", "zh_aishell1_S0764_W0122.wav"),
        ("zh_thchs30_D4_751.wav", "zh_thchs30_D4_751_noise0dB.wav")}
    unknown = lambda n: "thchs30_test_" in n                                 # noqa: E731
    thchs = lambda n: "thchs30" in n                                         # noqa: E731
    for p in d:                                               # unknown THCHS-30 speakers: only against others
        if unknown(p.audio) or unknown(p.other):
            assert p.kind == "other" and not (thchs(p.audio) and thchs(p.other))
    assert count(d, "other") == 55


def test_every_right_pair_passes(measured):
    rows = _rows(measured, "right")
    assert len(rows) == 12
    assert [r for r in rows if r["verdict"] != PASS] == []
    assert measured["asr"]["right"]["false_flags"] == 0


@pytest.mark.parametrize("kind", ["wrong", "truncated", "noise"])
def test_wrong_pairs_truncations_and_noise_are_flagged(measured, kind):
    rows = _rows(measured, kind)
    missed = [x for x in rows if x["verdict"] != FLAG]
    assert rows and rates(rows)["recall"] >= 0.95, missed
    assert measured["asr"][kind] == rates(rows)


def test_the_drift_gate_separates_speakers(measured):
    rows = measured["drift_rows"]
    assert all(r["similarity"] is not None for r in rows)        # every clip has 3 s of speech or more
    pair = lambda r: (r["a"], r["b"], r["similarity"])            # noqa: E731
    other = [r for r in rows if r["kind"] == "other"]
    same = [r for r in rows if r["kind"] == "same"]
    assert len(other) == 55 and len(same) == 2
    assert rates(other)["recall"] >= 0.90, [pair(r) for r in other if r["verdict"] != FLAG]
    assert sum(r["verdict"] == FLAG for r in same) <= 0.05 * len(same), [pair(r) for r in same]
    assert measured["asr_s_per_audio_s"] > 0 and measured["embed_s_per_audio_s"] > 0
