"""Segment quality guard: a rendered segment's duration must fit its text.

ChatTTS with real weights sometimes babbles (runs on long past the text) or truncates (stops early).  After
synthesis each segment's duration is checked against a band around engine.units.estimate_seconds(text):

    lo = max(0, min_ratio * expected - slack_s)      hi = max_ratio * expected + slack_s

An outlier is re-rolled with a derived seed, `reroll_seed(seed, attempt)`, which depends only on the
segment's own seed and the attempt number (so the accepted audio is still a pure function of text, voice, seed
and engine settings).  After max_attempts the segment is marked failed with the reason.  Random-* models force
the token count from the text, so they always pass; real weights may not.
"""
from __future__ import annotations

import hashlib

import numpy as np

from engine.units import estimate_seconds
from tasks.plan.rows import GUARD_REASON_PREFIX as REASON_PREFIX  # manifest `error` of a segment the guard failed
from tasks.synthesize.options import GuardOptions


def expected_band(text: str, opts: GuardOptions = GuardOptions()) -> tuple[float, float]:
    """(lo, hi) seconds a rendering of `text` may last."""
    e = estimate_seconds(text)
    return max(0.0, opts.min_ratio * e - opts.slack_s), opts.max_ratio * e + opts.slack_s


def check(text: str, audio: np.ndarray, sample_rate: int, opts: GuardOptions = GuardOptions()) -> str | None:
    """None when the audio is plausible for the text, else the reason (one line)."""
    if not opts.enabled:
        return None
    a = np.asarray(audio)
    if a.size and not np.isfinite(a).all():
        return f"{REASON_PREFIX} audio holds NaN/inf samples"
    secs = a.size / sample_rate
    lo, hi = expected_band(text, opts)
    if secs < lo:
        return f"{REASON_PREFIX} truncated: {secs:.2f} s, expected {lo:.2f}-{hi:.2f} s for this text"
    if secs > hi:
        return f"{REASON_PREFIX} babbling: {secs:.2f} s, expected {lo:.2f}-{hi:.2f} s for this text"
    return None


def reroll_seed(seed: int, attempt: int) -> int:
    """The seed of the attempt-th render (1-based): the segment's own seed first, then derived 63-bit seeds."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    if attempt == 1:
        return int(seed)
    h = hashlib.sha256(f"reroll\x1f{int(seed)}\x1f{attempt}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def gap_seconds(text: str) -> float:
    """Silence put in place of a failed segment under --allow-gaps: its expected duration."""
    return float(estimate_seconds(text))




