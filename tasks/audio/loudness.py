"""Loudness: ITU-R BS.1770-4 / EBU R128 integrated loudness and true peak, normalization and a peak limiter.

Integrated loudness uses BS.1770's K-weighting (two biquads, designed here for any sample rate exactly as
pyloudnorm designs them) and gating, computed in a streaming way (chunk by chunk, filter state carried over)
so that a 20-hour M4B is measured without holding it in memory; on a whole array it equals
`pyloudnorm.Meter(sr).integrated_loudness(x)` (tested: pyloudnorm is the tests' reference, not imported here).
True peak is the maximum of a 4x polyphase oversampling (scipy.signal.resample_poly), as BS.1770-4 Annex 2
suggests.  The same pass measures what ACX's limits are written in (tasks.audio.acx): the unweighted RMS of the whole
signal, its sample peak, and its noise floor (the RMS of its quietest 0.4 s window, windows every 0.1 s).

The loudness presets (`--loudness NAME`) are packaging's options: tasks/audio/options.py.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

from tasks.audio.options import TARGET_LUFS, TRUE_PEAK_DBTP

OVERSAMPLE = 4                 # true-peak oversampling factor
BLOCK_S = 0.400                # s, BS.1770 gating block
STEP_S = 0.100                 # s, block hop (75 % overlap)
SHELF_GAIN_DB = 4.0            # dB, K-weighting stage 1: high shelf (the head's acoustic effect)
SHELF_HZ = 1500.0              # Hz, its centre frequency
SHELF_Q = 1 / math.sqrt(2)     # its Q
HIGH_PASS_HZ = 38.0            # Hz, K-weighting stage 2: high pass (RLB weighting)
HIGH_PASS_Q = 0.5              # its Q
ABS_GATE_LUFS = -70.0          # LUFS, absolute gate
REL_GATE_LU = -10.0            # LU, relative gate
LIMITER_RADIUS_S = 0.010       # s, the limiter's gain reaches its floor this long before a peak and recovers
LIMITER_ITERATIONS = 6         # limiter passes at most (each re-measures the true peak)
NORMALIZE_ITERATIONS = 3       # gain -> limit -> measure rounds at most
NORMALIZE_TOLERANCE_LU = 0.05  # LU, stop when this close to the target
_TP_CONTEXT = 64               # samples of neighbour context for chunked oversampling
_HALF_SUPPORT = 11             # input samples on each side that one oversampled value depends on
DENORMAL_GUARD = 1e-15         # +-1e-15 at the Nyquist frequency keeps the K-filters out of subnormal floats
                               # in digital silence (20x faster there); its energy is 270 dB under the gate
FLOOR_WINDOW_STEPS = 4         # steps of STEP_S in a noise-floor window: 0.4 s every 0.1 s (Audacity's ACX Check)


def db_to_gain(db: float) -> float:
    return 10.0 ** (db / 20.0)


def gain_to_db(g: float) -> float:
    return 20.0 * math.log10(g) if g > 0 else -math.inf


@cache
def k_weighting(sample_rate: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """BS.1770 K-weighting at `sample_rate` as ((b, a) high shelf, (b, a) high pass), each normalized to a0 = 1.

    RBJ audio-EQ-cookbook biquads from the analogue parameters above: the design pyloudnorm uses, so results
    equal its meter; at 48 kHz the coefficients match the standard's table to 1e-4."""
    def shelf(w0: float, alpha: float) -> tuple[list[float], list[float]]:
        amp = 10.0 ** (SHELF_GAIN_DB / 40.0)                 # the cookbook's A
        c, r = math.cos(w0), 2.0 * math.sqrt(amp) * alpha
        b = [amp * ((amp + 1) + (amp - 1) * c + r), -2.0 * amp * ((amp - 1) + (amp + 1) * c),
             amp * ((amp + 1) + (amp - 1) * c - r)]
        a = [(amp + 1) - (amp - 1) * c + r, 2.0 * ((amp - 1) - (amp + 1) * c), (amp + 1) - (amp - 1) * c - r]
        return b, a

    def high_pass(w0: float, alpha: float) -> tuple[list[float], list[float]]:
        c = math.cos(w0)
        return [(1 + c) / 2, -(1 + c), (1 + c) / 2], [1 + alpha, -2.0 * c, 1 - alpha]

    out = []
    for design, fc, q in ((shelf, SHELF_HZ, SHELF_Q), (high_pass, HIGH_PASS_HZ, HIGH_PASS_Q)):
        w0 = 2.0 * math.pi * (fc / sample_rate)
        b, a = design(w0, math.sin(w0) / (2.0 * q))
        out.append((np.array(b) / a[0], np.array(a) / a[0]))
    return tuple(out)


class Meter:
    """Streaming BS.1770 integrated loudness and true peak of a mono signal: feed() chunks, then read."""

    def __init__(self, sample_rate: int, true_peak: bool = True):
        self.sr = sample_rate
        # K-weighting, high shelf then high pass: (b, a, filter state), the state carried across chunks
        self._filters = [(b, a, np.zeros(2)) for b, a in k_weighting(sample_rate)]
        self._step = STEP_S * sample_rate             # samples per 100 ms step
        self._energy: list[float] = []                 # per complete step: sum of squares, K-weighted
        self._acc = 0.0                                # the current, incomplete step
        self._raw: list[float] = []                    # per complete step: sum of squares, unweighted (ACX)
        self._raw_acc = 0.0
        self._sample_peak = 0.0
        self.samples = 0
        # true peak: peaks are final up to absolute sample `_done`; `_ctx` is the last samples seen
        self._peak = 0.0
        self._pending = 0.0                            # peak of the not-yet-final tail
        self._done = 0
        self._ctx = np.zeros(0, dtype=np.float64)
        self._want_tp = true_peak

    def feed(self, chunk: np.ndarray) -> None:
        from scipy.signal import lfilter

        x = np.asarray(chunk, dtype=np.float64).reshape(-1)
        if len(x) == 0:
            return
        if self._want_tp:
            self._true_peak_feed(x)
        sign = 1.0 - 2.0 * ((np.arange(len(x)) + self.samples) & 1)   # +1 -1 ... on absolute positions
        y = x + DENORMAL_GUARD * sign
        new = []
        for b, a, zi in self._filters:
            y, zf = lfilter(b, a, y, zi=zi)
            new.append((b, a, zf))
        self._filters = new
        sq, raw = y * y, x * x
        self._sample_peak = max(self._sample_peak, float(np.abs(x).max()))
        start, end = self.samples, self.samples + len(sq)
        pos = start
        while pos < end:                               # step k covers [round(k*step), round((k+1)*step))
            step_end = int(round((len(self._energy) + 1) * self._step))
            take = min(end, step_end) - pos
            self._acc += float(sq[pos - start:pos - start + take].sum())
            self._raw_acc += float(raw[pos - start:pos - start + take].sum())
            pos += take
            if pos == step_end:
                self._energy.append(self._acc)
                self._raw.append(self._raw_acc)
                self._acc = self._raw_acc = 0.0
        self.samples = end

    def _true_peak_feed(self, x: np.ndarray) -> None:
        buf = np.concatenate([self._ctx, x])
        buf_start = self.samples - len(self._ctx)
        buf_end = self.samples + len(x)
        self._peak = max(self._peak, float(np.abs(x).max()))  # true peak >= sample peak
        env = peak_envelope(buf, self._peak)                   # (len(buf),) exact where it could be the max
        final_to = max(self._done, buf_end - _TP_CONTEXT)     # later samples still lack right context
        a, b = self._done - buf_start, final_to - buf_start
        if b > a:
            self._peak = max(self._peak, float(env[a:b].max()))
        self._pending = float(env[b:].max()) if len(env) > b else 0.0
        self._done = final_to
        self._ctx = buf[-2 * _TP_CONTEXT:]

    def true_peak_dbtp(self) -> float:
        return gain_to_db(max(self._peak, self._pending))

    def rms_dbfs(self) -> float:
        """The unweighted RMS of everything fed, in dBFS (20 log10; -inf for silence)."""
        total = sum(self._raw) + self._raw_acc
        return gain_to_db(math.sqrt(total / self.samples)) if self.samples else -math.inf

    def sample_peak_dbfs(self) -> float:
        """The largest |sample| fed, in dBFS."""
        return gain_to_db(self._sample_peak)

    def noise_floor_dbfs(self) -> float:
        """The RMS of the quietest full window of FLOOR_WINDOW_STEPS steps (0.4 s, one every 0.1 s), in dBFS: as
        Audacity's ACX Check measures a noise floor; -inf for digital silence; nan when shorter than one window."""
        e = np.asarray(self._raw, dtype=np.float64)                          # (complete steps,)
        if len(e) < FLOOR_WINDOW_STEPS:
            return math.nan
        windows = np.convolve(e, np.ones(FLOOR_WINDOW_STEPS), mode="valid")  # (steps - 3,) sum of squares
        width = int(round(FLOOR_WINDOW_STEPS * self._step))
        return gain_to_db(math.sqrt(float(windows.min()) / width))

    def integrated_lufs(self) -> float:
        """Gated integrated loudness; -inf for silence or audio shorter than one block."""
        t = self.samples / self.sr
        n_blocks = int(np.round((t - BLOCK_S) / STEP_S)) + 1 if t >= BLOCK_S else 0
        if n_blocks <= 0:
            return -math.inf
        steps = [*self._energy, self._acc]
        e = np.zeros(n_blocks + 3)
        k = min(len(steps), len(e))
        e[:k] = steps[:k]
        z = (e[0:n_blocks] + e[1:n_blocks + 1] + e[2:n_blocks + 2] + e[3:n_blocks + 3]) / (BLOCK_S * self.sr)
        with np.errstate(divide="ignore"):
            lj = -0.691 + 10.0 * np.log10(z)
        above = z[lj >= ABS_GATE_LUFS]
        if len(above) == 0:
            return -math.inf
        gamma_r = -0.691 + 10.0 * math.log10(above.mean()) + REL_GATE_LU
        gated = z[(lj > gamma_r) & (lj > ABS_GATE_LUFS)]
        if len(gated) == 0:
            return -math.inf
        return -0.691 + 10.0 * math.log10(gated.mean())


def measure(audio: np.ndarray | Iterable[np.ndarray], sample_rate: int,
            true_peak: bool = True) -> tuple[float, float]:
    """(integrated LUFS, true peak dBTP) of an array or an iterable of chunks (peak nan when not asked)."""
    m = Meter(sample_rate, true_peak)
    if isinstance(audio, np.ndarray):
        for i in range(0, len(audio), 1 << 20):
            m.feed(audio[i:i + (1 << 20)])
    else:
        for c in audio:
            m.feed(c)
    return m.integrated_lufs(), (m.true_peak_dbtp() if true_peak else math.nan)


def loudness(audio: np.ndarray, sample_rate: int) -> float:
    """Integrated loudness in LUFS (-inf for silence or under 400 ms)."""
    return measure(audio, sample_rate, true_peak=False)[0]


def true_peak(audio: np.ndarray, sample_rate: int = 24_000) -> float:
    """True peak of `audio` in dBTP (4x oversampled)."""
    return measure(audio, sample_rate)[1]


@cache
def _oversampling_filter() -> np.ndarray:
    """resample_poly's own low-pass for up=OVERSAMPLE (designed once, not on every call)."""
    from scipy.signal import firwin

    return firwin(2 * 10 * OVERSAMPLE + 1, 1.0 / OVERSAMPLE, window=("kaiser", 5.0))


def oversample(x: np.ndarray) -> np.ndarray:
    """(OVERSAMPLE * n,) float64: exactly scipy.signal.resample_poly(x, OVERSAMPLE, 1)."""
    from scipy.signal import resample_poly

    return resample_poly(np.asarray(x, dtype=np.float64), OVERSAMPLE, 1, window=_oversampling_filter())


@cache
def interpolation_bound() -> float:
    """The most any 4x-oversampled value can exceed the largest |sample| within _HALF_SUPPORT of it:
    max over the polyphase branches of resample_poly's filter of sum |taps|."""
    h = _oversampling_filter() * OVERSAMPLE
    return float(max(np.abs(h[p::OVERSAMPLE]).sum() for p in range(OVERSAMPLE)))


def peak_envelope(y: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """(n,) float64: per sample, the largest |4x-oversampled| value from it to the next sample (and |y|).

    Exact wherever that could exceed `threshold`; elsewhere |y| (which is then <= threshold too).  Only the
    neighbourhoods of loud samples are oversampled (with _TP_CONTEXT samples of context), so speech at
    -18 LUFS costs a small fraction of a full oversampling.
    """
    from scipy.ndimage import maximum_filter1d

    y = np.asarray(y, dtype=np.float64)
    a = np.abs(y)
    n = len(y)
    if n == 0:
        return a
    near = maximum_filter1d(a, size=2 * _HALF_SUPPORT + 1, mode="constant")   # (n,) max |y| nearby
    cand = near * interpolation_bound() > threshold
    if not cand.any():
        return a
    edges = np.flatnonzero(np.diff(np.concatenate([[0], cand.astype(np.int8), [0]])))
    starts, ends = edges[0::2], edges[1::2]
    keep = starts[1:] - ends[:-1] > 2 * _TP_CONTEXT                         # merge runs that nearly touch
    starts = starts[np.concatenate([[True], keep])]
    ends = ends[np.concatenate([keep, [True]])]
    out = a.copy()
    for s, e in zip(starts.tolist(), ends.tolist()):
        lo, hi = max(0, s - _TP_CONTEXT), min(n, e + _TP_CONTEXT)
        up = np.abs(oversample(y[lo:hi])).reshape(-1, OVERSAMPLE).max(axis=1)   # (hi-lo,)
        out[s:e] = np.maximum(up[s - lo:e - lo], a[s:e])
    return out


def limit(audio: np.ndarray, sample_rate: int, ceiling_dbtp: float) -> np.ndarray:
    """A look-ahead true-peak limiter: a smooth gain that keeps every 4x-oversampled peak under the ceiling.

    Required gain per sample g = min(1, ceiling / oversampled peak); a min-filter of radius R then a centred
    moving average of width 2R+1 gives a smooth gain that is <= g everywhere (R = LIMITER_RADIUS_S).  The
    gain is applied, the true peak re-measured, and the ceiling tightened by any residue; a last uniform
    scale guarantees the ceiling.  Audio already under the ceiling is returned unchanged.
    """
    return limit_peak(audio, sample_rate, ceiling_dbtp)[0]


def limit_peak(audio: np.ndarray, sample_rate: int, ceiling_dbtp: float) -> tuple[np.ndarray, float]:
    """limit(), and the true peak (dBTP) of its result."""
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    x = np.asarray(audio, dtype=np.float32)
    if len(x) == 0:
        return x.copy(), -math.inf
    ceiling = db_to_gain(ceiling_dbtp)
    radius = max(1, int(round(LIMITER_RADIUS_S * sample_rate)))
    y = x.astype(np.float64)
    target = ceiling
    for i in range(LIMITER_ITERATIONS):
        # exact where it could pass the ceiling, and at the true maximum (which is >= the sample maximum)
        peak = peak_envelope(y, min(ceiling, float(np.abs(y).max())))     # (n,) peak around each sample
        top = float(peak.max())
        if top <= ceiling:
            return (x.copy() if i == 0 else y.astype(np.float32)), gain_to_db(top)
        g = np.minimum(1.0, target / np.maximum(peak, 1e-12))
        g = minimum_filter1d(g, size=2 * radius + 1, mode="nearest")
        g = uniform_filter1d(g, size=2 * radius + 1, mode="nearest")
        y = y * g
        target *= 0.995                                                    # tighten a little each pass
    y32 = y.astype(np.float32)
    tp = db_to_gain(true_peak(y32, sample_rate))
    if tp > ceiling:                                                       # guarantee, uniformly
        y32 = (y32 * np.float32(ceiling / tp * 0.999)).astype(np.float32)
        tp = db_to_gain(true_peak(y32, sample_rate))
    return y32, gain_to_db(tp)


@dataclass(frozen=True)
class Normalized:
    audio: np.ndarray             # (samples,) float32
    gain_db: float                # gain applied before limiting
    lufs: float                   # integrated loudness of `audio`
    true_peak_dbtp: float         # true peak of `audio`


def normalize(audio: np.ndarray, sample_rate: int, target_lufs: float = TARGET_LUFS,
              ceiling_dbtp: float = TRUE_PEAK_DBTP) -> Normalized:
    """Gain to the target integrated loudness, then true-peak limit; re-measured and refined (a few rounds).

    Silent audio or audio shorter than one 400 ms block has no integrated loudness: it is only limited.
    """
    x = np.asarray(audio, dtype=np.float32)
    lufs = loudness(x, sample_rate)
    if not math.isfinite(lufs):
        y, tp = limit_peak(x, sample_rate, ceiling_dbtp)
        return Normalized(y, 0.0, lufs, tp)
    gain = target_lufs - lufs
    for i in range(NORMALIZE_ITERATIONS):
        y, tp = limit_peak((x * np.float32(db_to_gain(gain))).astype(np.float32), sample_rate, ceiling_dbtp)
        got = loudness(y, sample_rate)
        if not math.isfinite(got) or abs(got - target_lufs) <= NORMALIZE_TOLERANCE_LU \
                or i == NORMALIZE_ITERATIONS - 1:
            break
        gain += target_lufs - got
    return Normalized(y, gain, got, tp)
