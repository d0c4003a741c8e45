"""Acceptance 1 of issue 24 on the real speech corpus (../shared/corpus/speech): every right (clip, transcript)
pair passes; at least 95 % of wrong pairs (a clip with another clip's transcript, same language), of truncations
(the first 45 % of a clip with its full transcript) and of noise clips are flagged; the drift gate flags at
least 90 % of other-speaker pairs and at most 5 % of same-speaker pairs.  The pairs are built by
benchmarks/qa_precision.py (the same function its precision/recall numbers come from); each audio is heard once
per module."""
from __future__ import annotations

import pytest

from benchmarks.qa_precision import asr_pairs, audio_of, corpus_clips, drift_pairs, rates
from tasks.qa.options import QAOptions
from tasks.qa.verdict import FLAG, PASS, asr_verdict, drift_verdict
from tests.conftest import corpus_path

pytest.importorskip("pypinyin")
OPTS = QAOptions()


@pytest.fixture(scope="module")
def clips():
    return corpus_clips(corpus_path("speech"))


@pytest.fixture(scope="module")
def heard(clips, transcriber):
    """(pair, transcript) for every ASR pair; each audio transcribed once."""
    by_name, cache, transcripts = {c.name: c for c in clips}, {}, {}
    out = []
    for p in asr_pairs(clips):
        if (p.audio, p.language) not in transcripts:
            transcripts[p.audio, p.language] = transcriber.transcribe(*audio_of(p.audio, by_name, cache),
                                                                      p.language)
        out.append((p, transcripts[p.audio, p.language]))
    return out


def _rows(heard, kind):
    return [{"should_flag": p.should_flag, "verdict": asr_verdict(p.text, t, p.language, OPTS).verdict,
             "audio": p.audio, "text": p.text, "heard": t.text} for p, t in heard if p.kind == kind]


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


def test_every_right_pair_passes(heard):
    rows = _rows(heard, "right")
    assert len(rows) == 12
    assert [r for r in rows if r["verdict"] != PASS] == []


@pytest.mark.parametrize("kind", ["wrong", "truncated", "noise"])
def test_wrong_pairs_truncations_and_noise_are_flagged(heard, kind):
    rows = _rows(heard, kind)
    r = rates(rows)
    missed = [x for x in rows if x["verdict"] != FLAG]
    assert r["recall"] >= 0.95, missed


def test_the_drift_gate_separates_speakers(clips, speaker_encoder):
    by_name, cache = {c.name: c for c in clips}, {}
    emb = {c.name: speaker_encoder.embed(*audio_of(c.name, by_name, cache)) for c in clips}
    assert all(e.vector is not None and e.speech_s >= OPTS.min_speech_s for e in emb.values())
    rows = []
    for p in drift_pairs(clips):
        from tasks.qa.speaker import similarity

        sim = similarity(emb[p.audio].vector, emb[p.other].vector)
        rows.append({"kind": p.kind, "should_flag": p.should_flag, "verdict": drift_verdict(sim, OPTS.drift_floor),
                     "pair": (p.audio, p.other, round(sim, 3))})
    other = rates([r for r in rows if r["kind"] == "other"])
    same = [r for r in rows if r["kind"] == "same"]
    assert other["recall"] >= 0.90, [r["pair"] for r in rows if r["kind"] == "other" and r["verdict"] != FLAG]
    assert sum(r["verdict"] == FLAG for r in same) <= 0.05 * len(same), [r["pair"] for r in same]
