"""What packaging's writers share: PackageOptions (its defaults and the one validator) and a chapter prepared
for encoding (tasks/audio/package.py prepares it; verify.py, epub3.py and package.py write it).  Light to import
(no numpy): the render schema (flows/params.py) reads its defaults."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.units import SAMPLE_RATE
from tasks.audio.names import BOOK_FORMATS, FORMATS

if TYPE_CHECKING:
    import numpy as np

TARGET_LUFS = -18.0            # LUFS, integrated loudness of every final file
TRUE_PEAK_DBTP = -1.5          # dBTP, ceiling for every final file
BITRATES_KBPS = {"mp3": 64, "opus": 48, "m4a": 64, "m4b": 64}   # kbit/s, mono speech
MP3_RATES = frozenset([16_000, 22_050, 24_000, 32_000, 44_100, 48_000])   # Hz that MPEG audio stores
SUBTITLE_FORMATS = ("srt", "vtt", "lrc")
TEMPO_MIN = 0.8               # slowest --tempo (x): below it speech drags and the stretch smears
TEMPO_MAX = 1.5               # fastest --tempo (x): above it syllables blur (and [speed_9] is the model's own)


@dataclass(frozen=True)
class LoudnessPreset:
    target_lufs: float         # LUFS, integrated loudness
    true_peak_dbtp: float      # dBTP, ceiling
    what: str                  # where it comes from (the help and docs/loudness.md)


# `--loudness NAME`: the targets of where people publish (docs/loudness.md cites each).
LOUDNESS_PRESETS: dict[str, LoudnessPreset] = {
    "acx": LoudnessPreset(-18.0, -3.5, "an ACX/Audible-style audiobook: RMS -23..-18 dBFS, peaks <= -3 dBFS"),
    "podcast": LoudnessPreset(-16.0, -1.0, "a podcast: -16 LUFS, true peak -1 dBTP (Apple Podcasts, AES TD1004)"),
    "ebu-r128": LoudnessPreset(-23.0, -1.0, "broadcast, EBU R 128: -23 LUFS, true peak -1 dBTP"),
}


def loudness_preset(value: float | str) -> tuple[float, float | None]:
    """(target LUFS, true-peak ceiling dBTP or None for the default) of `--loudness`: a preset's name or a number of
    LUFS.  ValueError naming the choices for anything else."""
    if isinstance(value, str):
        name = value.strip().lower()
        if name in LOUDNESS_PRESETS:
            return LOUDNESS_PRESETS[name].target_lufs, LOUDNESS_PRESETS[name].true_peak_dbtp
        try:
            value = float(name)
        except ValueError:
            raise ValueError(f"--loudness {value!r}: a number of LUFS or one of {', '.join(LOUDNESS_PRESETS)}") \
                from None
    if not math.isfinite(value):
        raise ValueError(f"--loudness {value!r}: a number of LUFS or one of {', '.join(LOUDNESS_PRESETS)}")
    return float(value), None


@dataclass(frozen=True)
class PackageOptions:
    formats: tuple[str, ...] = ("flac",)   # chapter formats and/or book formats ("m4b", "epub")
    sample_rate: int = SAMPLE_RATE         # output rate; resampled with torchaudio when not 24 kHz
    normalize: bool = True                 # loudness-normalize each chapter and limit its true peak
    target_lufs: float = TARGET_LUFS       # LUFS, integrated loudness of every final file
    true_peak_dbtp: float = TRUE_PEAK_DBTP  # dBTP, ceiling of every final file
    subtitles: tuple[str, ...] = SUBTITLE_FORMATS   # per chapter, and book-wide with the M4B
    subtitle_sentences: bool = False       # split each segment's cue into sentences (times estimated inside)
    bitrates_kbps: Mapping[str, int] = field(default_factory=lambda: dict(BITRATES_KBPS))
    tempo: float = 1.0                     # x, the finished chapters time-stretched, pitch kept (tasks.audio.tempo)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if not self.formats:
            raise ValueError("at least one output format is needed")
        bad = [f for f in self.formats if f not in FORMATS + BOOK_FORMATS]
        if bad:
            raise ValueError(f"unknown format(s) {bad}; choose from {', '.join(FORMATS + BOOK_FORMATS)}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"format listed twice in {list(self.formats)}")
        bad = [f for f in self.subtitles if f not in SUBTITLE_FORMATS]
        if bad:
            raise ValueError(f"unknown subtitle format(s) {bad}; choose from {', '.join(SUBTITLE_FORMATS)}")
        if not 8_000 <= self.sample_rate <= 192_000:
            raise ValueError(f"sample_rate {self.sample_rate} Hz is outside 8000..192000")
        if "mp3" in self.formats and self.sample_rate not in MP3_RATES:
            raise ValueError(f"mp3 cannot store {self.sample_rate} Hz; use one of {sorted(MP3_RATES)}")
        if not -70.0 < self.target_lufs < 0.0:
            raise ValueError(f"target_lufs {self.target_lufs} is outside (-70, 0)")
        if self.true_peak_dbtp > 0.0:
            raise ValueError(f"true_peak_dbtp {self.true_peak_dbtp} is above 0 dBTP")
        if not TEMPO_MIN <= self.tempo <= TEMPO_MAX:
            raise ValueError(f"--tempo {self.tempo:g} is outside {TEMPO_MIN:g}..{TEMPO_MAX:g}")
        if self.normalize and self.target_lufs > self.true_peak_dbtp:
            raise ValueError(f"target_lufs {self.target_lufs} is above the true-peak ceiling {self.true_peak_dbtp}")


@dataclass(frozen=True)
class PreparedChapter:
    audio: np.ndarray              # (samples,) float32 at opts.sample_rate, normalized and limited
    sample_rate: int
    gain_db: float                 # loudness gain applied (0 when not normalizing or silent)
    cues: list                     # the assembly's cues (times at the assembly's rate)
    source_rate: int               # the assembly's sample rate
