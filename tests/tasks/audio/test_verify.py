"""The encode -> decode -> measure -> correct loop: what each round changes for a lossy codec that overshoots,
at most VERIFY_ROUNDS encodes into one temp, one rename; the limiter that shapes the chunks."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tasks.audio.verify as V
from tasks.audio.loudness import true_peak
from tasks.audio.options import PackageOptions
from tasks.book import BookMeta

SR = 24_000


def run_loop(tmp_path, monkeypatch, measurements, fmt="mp3", opts=PackageOptions()):
    """encode_verified with the encoder and the meter replaced: each round's (lufs, tp) comes from the list."""
    encodes = []

    def encode_lossy(path, fmt, pcm, sr, tags, meta, kbps, chapters):
        encodes.append((path.name, kbps))
        path.write_bytes(f"round {len(encodes)}".encode())

    def measure_file(path, sr):
        lufs, tp = measurements[len(encodes) - 1]
        return V.Measured(lufs, tp, 1.0)

    monkeypatch.setattr(V, "encode_lossy", encode_lossy)
    monkeypatch.setattr(V, "measure_file", measure_file)
    monkeypatch.setattr(V, "shaped_chunks", lambda audio, sr, gain_db, ceiling: (gain_db, ceiling))
    final = tmp_path / f"x.{fmt}"
    rep = V.encode_verified(final, fmt, np.zeros(SR, np.float32), SR, {}, BookMeta("t"), opts, 0)
    return rep, encodes, final


def test_a_file_on_target_is_encoded_once(tmp_path, monkeypatch):
    rep, encodes, final = run_loop(tmp_path, monkeypatch, [(-18.1, -2.0)])
    assert len(encodes) == 1 and encodes[0][1] == 64 and final.read_bytes() == b"round 1"
    assert (rep.integrated_lufs, rep.true_peak_dbtp, rep.correction_db, rep.limiter_dbtp) == (-18.1, -2.0, 0.0, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.mp3"]


def test_overshoot_tightens_the_limiter_then_lowers_the_level(tmp_path, monkeypatch):
    rep, encodes, final = run_loop(tmp_path, monkeypatch, [(-18.0, -1.0), (-18.0, -1.2), (-18.2, -1.8)])
    assert len(encodes) == 3 and len({name for name, _ in encodes}) == 1      # one temp, overwritten
    assert final.read_bytes() == b"round 3" and sorted(p.name for p in tmp_path.iterdir()) == ["x.mp3"]
    excess1 = -1.0 - (-1.5 - V.LOSSY_SAFETY_DB)
    assert rep.limiter_dbtp == pytest.approx(-1.5 - V.PRE_LIMIT_MARGIN_DB - 1.5 * excess1)
    assert rep.correction_db == pytest.approx(-(-1.2 - (-1.5 - V.LOSSY_SAFETY_DB)))
    assert (rep.integrated_lufs, rep.true_peak_dbtp) == (-18.2, -1.8)


def test_loudness_drift_is_followed_and_rounds_are_bounded(tmp_path, monkeypatch):
    rep, encodes, _ = run_loop(tmp_path, monkeypatch, [(-19.0, -3.0)] * 10)
    assert len(encodes) == V.VERIFY_ROUNDS
    assert rep.correction_db == pytest.approx((V.VERIFY_ROUNDS - 1) * 1.0)
    assert rep.limiter_dbtp == pytest.approx(-1.5 - V.PRE_LIMIT_MARGIN_DB)


def test_lossless_and_unnormalized_files_are_not_corrected(tmp_path, monkeypatch):
    _, encodes, _ = run_loop(tmp_path, monkeypatch, [(-10.0, 0.0)] * 4, opts=PackageOptions(normalize=False))
    assert len(encodes) == 1


def test_shaped_chunks_apply_gain_and_keep_the_ceiling():
    rng = np.random.default_rng(1)
    x = (0.3 * rng.standard_normal(3 * SR)).astype(np.float32)
    plain = np.concatenate(list(V.shaped_chunks(x, SR, gain_db=-6.0)))
    np.testing.assert_allclose(plain, x * np.float32(10 ** (-6 / 20)), rtol=1e-6)
    shaped = np.concatenate(list(V.shaped_chunks(x, SR, ceiling_dbtp=-3.0)))
    assert len(shaped) == len(x) and true_peak(shaped, SR) <= -3.0 + 0.05
    assert math.isfinite(true_peak(x, SR)) and true_peak(x, SR) > -3.0
