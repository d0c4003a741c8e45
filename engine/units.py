"""Units of ChatTTS audio, and the speaking-rate estimate every stage shares.  Import-light (no torch)."""
from __future__ import annotations

SAMPLE_RATE = 24_000               # Hz, Vocos output
HOP = 256                          # samples per mel frame
SAMPLES_PER_TOKEN = 2 * HOP        # one GPT step = 4 codes = 2 mel frames = 512 samples (21.33 ms)
TOKENS_PER_SECOND = SAMPLE_RATE / SAMPLES_PER_TOKEN   # 46.875 GPT tokens per second of audio
CHARS_PER_SECOND = 4.5             # Mandarin read aloud at ~270 characters per minute
MIN_SECONDS = 0.6                  # the shortest segment we ever expect


def samples_for_tokens(tokens: int) -> int:
    """Exact waveform length for T generated tokens: (2T-1)*256 samples."""
    return max(0, (2 * tokens - 1) * HOP)


def speakable_chars(text: str) -> int:
    """Characters that take time to say: letters and digits (CJK included), not punctuation or spaces."""
    return sum(1 for c in text if c.isalnum())


def estimate_seconds(text: str) -> float:
    """Expected speech duration of normalized text at CHARS_PER_SECOND, punctuation adding short pauses."""
    pauses = sum(1 for c in text if c in "，、；：,;:") * 0.15 + sum(1 for c in text if c in "。！？!?.…") * 0.3
    return max(MIN_SECONDS, speakable_chars(text) / CHARS_PER_SECOND + pauses)


def expected_tokens(text: str) -> int:
    """GPT tokens a real model is expected to emit for `text` (random models are forced to exactly this)."""
    return max(2, round(estimate_seconds(text) * TOKENS_PER_SECOND))


def hms(s: float) -> str:
    """Seconds as m:ss, or h:mm:ss from an hour on."""
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
