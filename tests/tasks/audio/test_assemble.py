"""assemble_chapter: exact length formula, cues, trimming, equal-power joins without clicks, determinism."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings, strategies as st

from tasks.audio.assemble import (
    AssembleOptions,
    Piece,
    assemble_arrays,
    assemble_chapter,
    equal_power_fades,
    expected_length,
    trim_bounds,
    trimmed_length,
)
from tasks.errors import RenderFailed

SR = 24_000
NO_TRIM = AssembleOptions(trim=False)


def tone(seconds: float, freq: float = 220.0, amp: float = 0.5, phase: float = 0.0) -> np.ndarray:
    t = np.arange(int(round(seconds * SR))) / SR
    return (amp * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32)


def speechy(seconds: float, seed: int) -> np.ndarray:
    """Random-ish band-limited noise with a syllable-like envelope (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * SR))
    x = rng.standard_normal(n).astype(np.float32)
    x = np.convolve(x, np.ones(8, dtype=np.float32) / 8, mode="same")          # low-pass a bit
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 4.0 * np.arange(n) / SR) ** 2
    return (0.3 * x * env).astype(np.float32)


def chirp(seconds: float, f0: float, f1: float, amp: float) -> np.ndarray:
    """A linear chirp that starts and ends at full amplitude (a hard cut would click)."""
    t = np.arange(int(round(seconds * SR))) / SR
    k = (f1 - f0) / seconds
    return (amp * np.cos(2 * np.pi * (f0 * t + 0.5 * k * t * t))).astype(np.float32)


def write_pieces(tmp_path: Path, arrays, kinds, texts=None) -> list[Piece]:
    out = []
    for i, (a, k) in enumerate(zip(arrays, kinds)):
        p = tmp_path / f"seg{i}.flac"
        sf.write(str(p), a, SR, format="FLAC", subtype="PCM_24")
        out.append(Piece(p, k, texts[i] if texts else f"text {i}"))
    return out


def test_equal_power_fades_sum_to_unity():
    out, inn = equal_power_fades(960)
    assert out.shape == inn.shape == (960,)
    np.testing.assert_allclose(out ** 2 + inn ** 2, 1.0, atol=1e-6)
    assert out[0] > 0.999 and inn[0] < 0.01 and out[-1] < 0.01 and inn[-1] > 0.999


@pytest.mark.parametrize("kinds", [
    ["sentence", "clause", "paragraph", "chapter"],
    ["clause"],
    ["sentence", "sentence", "sentence"],
])
def test_length_formula_exact_without_trim(kinds):
    lengths = [24_000 + 137 * i for i in range(len(kinds))]
    arrays = [tone(L / SR, 200 + 50 * i) for i, L in enumerate(lengths)]
    ch = assemble_arrays(arrays, kinds, [""] * len(kinds), NO_TRIM)
    n, h = NO_TRIM.crossfade_samples(), NO_TRIM.lead_in_samples()
    # the tail after the last piece is always the "chapter" pause
    pauses = [NO_TRIM.pause_samples(k) for k in kinds[:-1]] + [NO_TRIM.pause_samples("chapter")]
    # sum(segments) + lead-in + pauses - one cross-fade per join (every clip joins its neighbour)
    joins = len(lengths) + len(pauses) + 1 - 1
    assert len(ch.audio) == sum(lengths) + h + sum(pauses) - n * joins
    assert len(ch.audio) == expected_length(lengths, kinds, NO_TRIM)
    assert ch.audio.dtype == np.float32 and ch.sample_rate == SR
    tail = len(ch.audio) - ch.cues[-1].end_sample
    assert tail == NO_TRIM.pause_samples("chapter") - NO_TRIM.crossfade_samples()


def test_zero_pause_and_no_lead_in_crossfade_directly():
    opts = AssembleOptions(trim=False, lead_in_s=0.0,
                           pauses_s={"clause": 0.0, "sentence": 0.0, "paragraph": 0.0, "chapter": 0.0})
    arrays = [tone(0.5, 300), tone(0.7, 300), tone(0.3, 300)]
    ch = assemble_arrays(arrays, ["clause", "clause", "chapter"], ["a", "b", "c"], opts)
    n = opts.crossfade_samples()
    assert len(ch.audio) == 12_000 + 16_800 + 7_200 - 2 * n
    assert len(ch.audio) == expected_length([12_000, 16_800, 7_200], ["clause"] * 3, opts)
    # overlapping cues meet in the middle of the cross-fade, and tile the chapter
    c = ch.cues
    assert c[0].start_sample == 0 and c[-1].end_sample == len(ch.audio)
    assert c[0].end_sample == c[1].start_sample == 12_000 - n + n // 2
    assert c[1].end_sample == c[2].start_sample


def test_cues_and_silence_placement_known_result():
    a, b = tone(1.0, 200), tone(0.5, 300)
    ch = assemble_arrays([a, b], ["sentence", "chapter"], ["第一句。", "第二句。"], NO_TRIM)
    n, h = NO_TRIM.crossfade_samples(), NO_TRIM.lead_in_samples()
    p = NO_TRIM.pause_samples("sentence")
    c0, c1 = ch.cues
    assert (c0.start_sample, c0.end_sample) == (h - n, h - n + 24_000)
    assert c1.start_sample == c0.end_sample - n + p - n
    assert c1.end_sample == c1.start_sample + 12_000
    assert (c0.text, c0.segment_index, c1.text, c1.segment_index) == ("第一句。", 0, "第二句。", 1)
    assert c0.start_s == c0.start_sample / SR and c1.end_s == c1.end_sample / SR
    # lead-in, the pure part of the pause, and the tail are exact zeros
    assert not ch.audio[:h - n].any()
    assert not ch.audio[c0.end_sample:c1.start_sample].any()
    assert not ch.audio[c1.end_sample:].any()
    assert len(ch.audio) - c1.end_sample == NO_TRIM.pause_samples("chapter") - n
    # away from the fades, each piece is copied unchanged
    np.testing.assert_array_equal(ch.audio[c0.start_sample + n:c0.end_sample - n], a[n:-n])
    np.testing.assert_array_equal(ch.audio[c1.start_sample + n:c1.end_sample - n], b[n:-n])
    # the fade-out is the equal-power cosine applied to the piece
    fo, fi = equal_power_fades(n)
    np.testing.assert_allclose(ch.audio[c0.end_sample - n:c0.end_sample], a[-n:] * fo, atol=1e-7)
    np.testing.assert_allclose(ch.audio[c1.start_sample:c1.start_sample + n], b[:n] * fi, atol=1e-7)


def test_trim_keeps_preroll_and_postroll():
    opts = AssembleOptions()
    silence = np.zeros(SR // 2, dtype=np.float32)
    x = np.concatenate([silence, tone(1.0), silence])
    s, e = trim_bounds(x, SR, opts)
    frame = int(0.005 * SR)
    assert SR // 2 - int(opts.preroll_s * SR) - frame <= s <= SR // 2 - int(opts.preroll_s * SR)
    assert SR // 2 + SR + int(opts.postroll_s * SR) <= e <= SR // 2 + SR + int(opts.postroll_s * SR) + frame
    # low-level noise below the threshold counts as silence
    noisy = x + np.float32(1e-4) * np.sign(np.sin(np.arange(len(x), dtype=np.float32)))
    assert trim_bounds(noisy, SR, opts) == (s, e)
    assert trim_bounds(np.zeros(1000, dtype=np.float32), SR, opts) == (0, 0)


def test_length_formula_with_trim_uses_trimmed_lengths():
    opts = AssembleOptions()
    pad = np.zeros(SR // 3, dtype=np.float32)
    arrays = [np.concatenate([pad, speechy(1.0 + 0.1 * i, i), pad]) for i in range(4)]
    kinds = ["clause", "sentence", "paragraph", "chapter"]
    ch = assemble_arrays(arrays, kinds, ["x"] * 4, opts)
    trimmed = [e - s for s, e in (trim_bounds(a, SR, opts) for a in arrays)]
    assert trimmed == [trimmed_length(a, opts) for a in arrays]
    assert [trimmed_length(a, NO_TRIM) for a in arrays] == [len(a) for a in arrays]
    assert all(t < len(a) for t, a in zip(trimmed, arrays))
    assert len(ch.audio) == expected_length(trimmed, kinds, opts)
    assert [c.end_sample - c.start_sample for c in ch.cues] == trimmed


def test_silent_or_tiny_piece_is_padded_to_two_crossfades():
    opts = AssembleOptions()
    n = opts.crossfade_samples()
    arrays = [tone(0.5), np.zeros(100, dtype=np.float32), tone(0.01), tone(0.5)]
    kinds = ["sentence"] * 4
    ch = assemble_arrays(arrays, kinds, ["a", "b", "c", "d"], opts)
    assert [c.end_sample - c.start_sample for c in ch.cues][1:3] == [2 * n, 2 * n]
    trimmed = [max(e - s, 0) for s, e in (trim_bounds(a, SR, opts) for a in arrays)]
    assert len(ch.audio) == expected_length(trimmed, kinds, opts)


def max_jump(x: np.ndarray) -> float:
    return float(np.abs(np.diff(x.astype(np.float64))).max())


@pytest.mark.parametrize("zero_pauses", [False, True])
def test_no_click_at_joins(zero_pauses):
    """Largest sample-to-sample step in every join window is no larger than inside the segments."""
    pauses = (dict.fromkeys(("clause", "sentence", "paragraph", "chapter"), 0.0) if zero_pauses
              else dict(AssembleOptions().pauses_s))
    opts = AssembleOptions(trim=False, pauses_s=pauses)
    # segments that start/end at full amplitude (worst case: a hard cut would click)
    arrays = [speechy(0.6, 1), tone(0.6, 440, 0.8, phase=np.pi / 2), speechy(0.5, 2), tone(0.4, 97, 0.9, 1.0),
              chirp(0.5, 100, 3000, 0.7), speechy(0.7, 3)]
    kinds = ["clause", "sentence", "paragraph", "clause", "sentence", "chapter"]
    ch = assemble_arrays(arrays, kinds, ["t"] * 6, opts)
    inside = max(max_jump(a) for a in arrays)
    n = opts.crossfade_samples()
    for c in ch.cues:
        for edge in (c.start_sample, c.end_sample):
            lo, hi = max(0, edge - 2 * n), min(len(ch.audio), edge + 2 * n)
            assert max_jump(ch.audio[lo:hi]) <= inside * 1.01, (edge, max_jump(ch.audio[lo:hi]), inside)
    # a hard cut between the same pieces would click: the test can fail
    hard = np.concatenate(arrays)
    assert max_jump(hard) > inside * 1.2


def test_chirp_fades_into_and_out_of_silence_exactly():
    """Known result: a chirp between silences is the chirp times sin / cos ramps, zeros elsewhere."""
    opts = AssembleOptions(trim=False, lead_in_s=0.2)
    c = chirp(0.4, 200, 4000, 0.9)
    ch = assemble_arrays([c], ["paragraph"], ["c"], opts)
    n, h = opts.crossfade_samples(), opts.lead_in_samples()
    fo, fi = equal_power_fades(n)
    want = c.copy()
    want[:n] *= fi
    want[-n:] *= fo
    start = h - n
    np.testing.assert_array_equal(ch.audio[start:start + len(c)], want)
    assert not ch.audio[:start].any() and not ch.audio[start + len(c):].any()
    # the steepest step at the edges is no larger than inside the chirp
    assert max_jump(ch.audio[:start + 2 * n]) <= max_jump(c)
    assert max_jump(ch.audio[start + len(c) - 2 * n:]) <= max_jump(c)


def test_sine_crossfade_of_identical_phase_tone_keeps_power():
    """Equal power: a tone cross-faded with an in-phase copy of itself peaks at most sqrt(2) x its amplitude."""
    opts = AssembleOptions(trim=False, lead_in_s=0.0,
                           pauses_s=dict.fromkeys(("clause", "sentence", "paragraph", "chapter"), 0.0))
    a = tone(0.5, 250, 0.5)
    ch = assemble_arrays([a, a], ["clause", "chapter"], ["a", "b"], opts)
    assert float(np.abs(ch.audio).max()) <= 0.5 * np.sqrt(2) + 1e-6


def test_assemble_chapter_reads_files_and_is_bit_deterministic(tmp_path):
    arrays = [speechy(0.8, i) for i in range(3)]
    pieces = write_pieces(tmp_path, arrays, ["sentence", "paragraph", "chapter"], ["一。", "二。", "三。"])
    a = assemble_chapter(pieces)
    b = assemble_chapter(pieces)
    assert a.audio.tobytes() == b.audio.tobytes() and a.cues == b.cues
    assert [c.text for c in a.cues] == ["一。", "二。", "三。"]
    stored = [sf.read(str(p.audio_path), dtype="float32")[0] for p in pieces]
    trimmed = [e - s for s, e in (trim_bounds(x, SR, AssembleOptions()) for x in stored)]
    assert len(a.audio) == expected_length(trimmed, [p.pause_after for p in pieces], AssembleOptions())


def test_bad_inputs(tmp_path):
    with pytest.raises(RenderFailed, match=r"missing\.flac"):
        assemble_chapter([Piece(tmp_path / "missing.flac", "sentence", "x")])
    p = tmp_path / "rate.flac"
    sf.write(str(p), tone(0.2), 16_000)
    with pytest.raises(RenderFailed, match="16000 Hz"):
        assemble_chapter([Piece(p, "sentence", "x")])
    with pytest.raises(ValueError, match="clause"):
        AssembleOptions(pauses_s={"clause": 0.05, "sentence": 0.4, "paragraph": 0.8, "chapter": 1.5})
    with pytest.raises(ValueError, match="lacks"):
        AssembleOptions(pauses_s={"clause": 0.3})
    assert len(assemble_chapter([]).audio) == 0


def test_options_replace_roundtrip():
    o = replace(AssembleOptions(), crossfade_s=0.02)
    assert o.crossfade_samples() == 480
    with pytest.raises(ValueError, match="crossfade_s"):
        replace(o, crossfade_s=-1.0)                    # replace() builds a new instance: validated too


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 6_000), min_size=1, max_size=6),
       kinds=st.lists(st.sampled_from(["clause", "sentence", "paragraph", "chapter"]), min_size=6, max_size=6),
       crossfade_ms=st.integers(0, 30), lead_ms=st.sampled_from([0, 60, 500]),
       pause_ms=st.lists(st.sampled_from([0, 60, 250, 900]), min_size=4, max_size=4))
def test_length_formula_property(lengths, kinds, crossfade_ms, lead_ms, pause_ms):
    pauses = dict(zip(["clause", "sentence", "paragraph", "chapter"], [p / 1000 for p in pause_ms]))
    try:
        opts = AssembleOptions(trim=False, crossfade_s=crossfade_ms / 1000, lead_in_s=lead_ms / 1000, pauses_s=pauses)
    except ValueError:
        return                                          # a pause shorter than two cross-fades is refused
    arrays = [tone(L / SR, 300) for L in lengths]
    ks = kinds[:len(lengths)]
    ch = assemble_arrays(arrays, ks, ["t"] * len(lengths), opts)
    assert len(ch.audio) == expected_length(lengths, ks, opts)
    # cues are ordered, inside the chapter, and never overlap
    ends = [0] + [c.end_sample for c in ch.cues]
    assert all(c.start_sample >= e for c, e in zip(ch.cues, ends))
    assert ch.cues[-1].end_sample <= len(ch.audio)


def test_a_change_of_voice_is_a_pause_never_a_cross_fade():
    """A cast: where the next piece is in another voice the pause is at least voice_change_pause_s, also when
    the boundary's own pause is zero (which cross-fades pieces of one voice)."""
    opts = AssembleOptions(trim=False, lead_in_s=0.0,
                           pauses_s={"clause": 0.0, "sentence": 0.0, "paragraph": 0.0, "chapter": 0.0})
    arrays = [tone(0.5, 300), tone(0.7, 300), tone(0.3, 300)]
    kinds, voices = ["clause", "clause", "chapter"], ["narrator", "narrator", "baoyu"]
    ch = assemble_arrays(arrays, kinds, ["a", "b", "c"], opts, voices)
    n, v = opts.crossfade_samples(), int(round(opts.voice_change_pause_s * SR))
    assert len(ch.audio) == expected_length([12_000, 16_800, 7_200], kinds, opts, voices)
    assert len(ch.audio) == 12_000 + 16_800 + v + 7_200 - 3 * n        # a silence clip between b and c
    b, c = ch.cues[1], ch.cues[2]
    assert c.start_sample - b.end_sample == v - 2 * n                 # apart: no sample of both voices
    assert ch.cues[0].end_sample == b.start_sample                    # one voice: cross-faded
    assert not ch.audio[b.end_sample:c.start_sample].any()
    # a default pause longer than the voice change stays as it is; one voice everywhere changes nothing
    d = AssembleOptions(trim=False)
    assert expected_length([100_000] * 3, ["paragraph", "clause", "chapter"], d, voices) == \
        expected_length([100_000] * 3, ["paragraph", "clause", "chapter"], d) + \
        int(round(d.voice_change_pause_s * SR)) - d.pause_samples("clause")
    assert expected_length([100_000] * 3, kinds, d, ["x"] * 3) == expected_length([100_000] * 3, kinds, d)
    with pytest.raises(ValueError, match="never cross-faded"):
        AssembleOptions(voice_change_pause_s=0.0)


def test_assemble_chapter_reads_the_pieces_voices(tmp_path):
    arrays = [tone(0.5, 300), tone(0.7, 300)]
    pieces = [replace(p, voice=v) for p, v in zip(write_pieces(tmp_path, arrays, ["clause", "chapter"]), "ab")]
    opts = AssembleOptions(trim=False, pauses_s={"clause": 0.0, "sentence": 0.0, "paragraph": 0.0, "chapter": 0.0})
    assert len(assemble_chapter(pieces, opts).audio) == expected_length([12_000, 16_800], ["clause", "chapter"],
                                                                         opts, ["a", "b"])
