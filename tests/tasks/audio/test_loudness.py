"""Loudness: K-weighting is the standard's, the streaming meter equals pyloudnorm, true peak equals a 4x
oversampling, normalize + limit hit the target and stay under the ceiling."""
from __future__ import annotations

import math

import numpy as np
import pyloudnorm
import pytest
from scipy.signal import resample_poly

from tasks.audio.loudness import Meter, limit, measure, normalize, true_peak

SR = 24_000


def speechy(seconds: float, seed: int, amp: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    x = np.convolve(rng.standard_normal(n), np.ones(6) / 6, mode="same")
    env = np.sin(2 * np.pi * 3.0 * np.arange(n) / SR) ** 2
    env[n // 3: n // 3 + SR // 2] = 0.0                       # a pause the gate must ignore
    return (amp * x * env).astype(np.float32)


@pytest.mark.parametrize("chunk", [SR * 100, 12_345, 1_000])
def test_streaming_meter_equals_pyloudnorm(chunk):
    x = speechy(6.3, 1)
    ref = pyloudnorm.Meter(SR).integrated_loudness(x.astype(np.float64))
    m = Meter(SR)
    for i in range(0, len(x), chunk):
        m.feed(x[i:i + chunk])
    assert m.integrated_lufs() == pytest.approx(ref, abs=1e-6)
    ref_tp = 20 * math.log10(np.abs(resample_poly(x.astype(np.float64), 4, 1)).max())
    assert m.true_peak_dbtp() == pytest.approx(ref_tp, abs=1e-6)


def test_k_weighting_at_48k_is_the_standards_table():
    from tasks.audio.loudness import k_weighting

    (b1, a1), (b2, a2) = k_weighting(48_000)                   # ITU-R BS.1770-4, tables 1 and 2
    np.testing.assert_allclose(b1, [1.53512485958697, -2.69169618940638, 1.19839281085285], atol=2e-4)
    np.testing.assert_allclose(a1, [1.0, -1.69065929318241, 0.73248077421585], atol=2e-4)
    np.testing.assert_allclose(b2 / b2[0], [1.0, -2.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(a2, [1.0, -1.99004745483398, 0.99007225036621], atol=2e-4)


def test_meter_at_44k_and_silence():
    x = resample_poly(speechy(3.0, 2), 147, 80).astype(np.float32)        # 24 k -> 44.1 k
    ref = pyloudnorm.Meter(44_100).integrated_loudness(x.astype(np.float64))
    assert measure(x, 44_100)[0] == pytest.approx(ref, abs=1e-3)
    assert measure(np.zeros(SR * 2, dtype=np.float32), SR)[0] == -math.inf
    assert measure(np.ones(100, dtype=np.float32) * 0.1, SR)[0] == -math.inf   # shorter than one block


def test_true_peak_sees_intersample_peaks():
    # a sine at fs/4 sampled at 45 degrees: every sample is 0.707 of the real peak
    n = np.arange(SR)
    x = np.sin(2 * np.pi * (SR / 4) * n / SR + np.pi / 4).astype(np.float32)
    assert 20 * math.log10(np.abs(x).max()) == pytest.approx(-3.01, abs=0.01)
    assert true_peak(x, SR) == pytest.approx(0.0, abs=0.25)     # +3 dB over the sample peak


def test_limiter_keeps_ceiling_and_leaves_quiet_audio_alone():
    x = speechy(3.0, 3, amp=0.05)
    x[::4000] = 0.98                                            # clicks far over the ceiling
    y = limit(x, SR, -1.5)
    assert true_peak(y, SR) <= -1.5 + 1e-6
    assert true_peak(x, SR) > -0.5
    # far from the clicks the signal is untouched
    quiet = speechy(3.0, 3, amp=0.05)
    np.testing.assert_array_equal(limit(quiet, SR, -1.5), quiet)
    assert len(y) == len(x) and y.dtype == np.float32


@pytest.mark.parametrize("amp,target", [(0.01, -18.0), (0.3, -18.0), (0.1, -23.0), (0.1, -16.0)])
def test_normalize_hits_target_under_ceiling(amp, target):
    x = speechy(5.0, 4, amp)
    x[SR: SR + 10] = amp * 9                                    # one loud transient
    n = normalize(x, SR, target, -1.5)
    ref = pyloudnorm.Meter(SR).integrated_loudness(n.audio.astype(np.float64))
    assert ref == pytest.approx(target, abs=0.1)
    assert n.lufs == pytest.approx(ref, abs=1e-6)
    assert true_peak(n.audio, SR) <= -1.5 + 1e-6
    assert n.true_peak_dbtp <= -1.5 + 1e-6


def test_normalize_silent_audio_is_left_silent():
    n = normalize(np.zeros(SR, dtype=np.float32), SR)
    assert not n.audio.any() and n.gain_db == 0.0 and n.lufs == -math.inf


@pytest.mark.parametrize("threshold", [0.0, 0.25, 0.4])
def test_peak_envelope_is_exact_where_it_matters(threshold):
    from tasks.audio.loudness import peak_envelope

    x = np.random.default_rng(7).standard_normal(50_000) * 0.1
    ref = np.maximum(np.abs(resample_poly(x, 4, 1)).reshape(-1, 4).max(axis=1), np.abs(x))
    env = peak_envelope(x, threshold)
    loud = ref > threshold
    assert loud.any()
    np.testing.assert_allclose(env[loud], ref[loud], rtol=0, atol=1e-12)
    assert (env[~loud] <= threshold).all()
