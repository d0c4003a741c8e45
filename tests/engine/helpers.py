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


def bad_clips(folder, garbage_suffix: str = ".wav", short_s: float = 2.5, long_s: float = 31.0) -> dict:
    """The five kinds of bad clip the issue names, written into `folder`: {recording: what the one-line error
    says}: unreadable (bytes no decoder takes, with the `garbage_suffix` that picks pydub's WAV reader or
    ffmpeg), silent, shorter than 3 s, longer than 30 s, no transcript."""
    garbage = folder / f"garbage{garbage_suffix}"
    garbage.write_bytes(b"RIFF\x00\x00\x00\x00WAVE" + b"no audio frames in here" * 20)
    garbage.with_name(garbage.name + ".txt").write_text(TRANSCRIPT, encoding="utf-8")
    return {
        garbage: "cannot decode the recording",
        write_clip(folder / "silent.wav", amp=0.0): "silent",
        write_clip(folder / "short.wav", seconds=short_s): f"lasts {short_s:.1f} s",
        write_clip(folder / "long.wav", seconds=long_s): "lasts over 30 s",
        write_clip(folder / "untold.wav", text=None): "no transcript",
    }
