"""Recordings for the clip-voice tests: deterministic voiced-ish signals written as real audio files."""
from __future__ import annotations

import numpy as np
import soundfile as sf

TRANSCRIPT = "春眠不觉晓，处处闻啼鸟。"


def tone(seconds: float, rate: int = 24_000, amp: float = 0.3, channels: int = 1):
    """A deterministic voiced-ish signal: a 150 Hz sawtooth with a slow vibrato and a little noise."""
    t = np.arange(int(seconds * rate)) / rate
    f = 150 + 20 * np.sin(2 * np.pi * 3 * t)
    x = 2 * ((np.cumsum(f) / rate) % 1.0) - 1
    x = amp * (0.8 * x + 0.2 * np.random.default_rng(1).standard_normal(t.size))
    return np.stack([x] * channels, 1).astype(np.float32) if channels > 1 else x.astype(np.float32)


def write_clip(path, seconds: float = 5.0, rate: int = 24_000, amp: float = 0.3, text: str | None = TRANSCRIPT,
               channels: int = 1):
    sf.write(str(path), tone(seconds, rate, amp, channels), rate, subtype="PCM_16")
    if text is not None:
        path.with_name(path.name + ".txt").write_text(text + "\n", encoding="utf-8")
    return path
