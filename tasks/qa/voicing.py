"""Where a recording holds voiced speech, by its own signal: each FRAME_S frame (every HOP_S) is voiced when it is
loud (VOICED_DB re the recording's loudest frame at least) and periodic at a voice's pitch (its normalized
autocorrelation reaches VOICED_R at a lag of PITCH_HZ).  A vowel or a voiced consonant is voiced; silence, room
noise and hiss, and the frication or aspiration of a consonant (s, sh, ch, the puff after p / t / k) are not.

Plain float64 numpy: no model, the same frames on every machine but for the last bits of an FFT.  Used where the
ASR check needs a second signal that does not come from Whisper (tasks/qa/verdict.py, docs/qa.md: the tail of a
short text) and by benchmarks/qa_precision.py to keep a cut between two syllables out of a syllable."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

FRAME_S = 0.025               # s: one analysis frame (a few pitch periods of a low voice)
HOP_S = 0.01                  # s between frame starts
PITCH_HZ = (70.0, 400.0)      # Hz: the lags where a voice's period is looked for (ChatTTS's voices and the corpus)
VOICED_R = 0.5                # normalized autocorrelation at the pitch lag from which a frame is periodic
VOICED_DB = -25.0             # dB re the recording's loudest frame: quieter frames are not voiced (room hum)


@dataclass(frozen=True)
class Frames:
    """Per frame: its centre (s), its level (dB re the loudest frame) and its periodicity (0-1)."""
    centre_s: np.ndarray      # [frames]
    level_db: np.ndarray      # [frames]
    periodicity: np.ndarray   # [frames]

    @property
    def voiced(self) -> np.ndarray:
        """[frames] bool: loud and periodic."""
        return (self.level_db >= VOICED_DB) & (self.periodicity >= VOICED_R)

    def voiced_s(self, start_s: float = 0.0, end_s: float = float("inf")) -> float:
        """Seconds of voiced frames whose centre lies in [start_s, end_s)."""
        inside = (self.centre_s >= start_s) & (self.centre_s < end_s)
        return float((self.voiced & inside).sum()) * HOP_S


def frames(audio: np.ndarray, rate: int) -> Frames:
    """The frames of float mono audio [samples] at `rate` Hz (none when it is shorter than one frame)."""
    import numpy as np

    x = np.asarray(audio, dtype=np.float64)
    size, hop = int(round(FRAME_S * rate)), int(round(HOP_S * rate))
    n = max(0, (len(x) - size) // hop + 1)
    if n == 0:
        empty = np.zeros(0)
        return Frames(empty, empty, empty)
    f = x[np.arange(size)[None, :] + hop * np.arange(n)[:, None]]                  # [frames, size]
    f = f - f.mean(axis=1, keepdims=True)
    power = np.mean(f * f, axis=1)
    level = 10 * np.log10(np.maximum(power, 1e-20) / max(float(power.max()), 1e-20))
    spectrum = np.fft.rfft(f, 2 * size, axis=1)
    ac = np.fft.irfft(spectrum.real ** 2 + spectrum.imag ** 2, axis=1)[:, :size]  # [frames, lag]
    lags = np.arange(int(rate / PITCH_HZ[1]), min(int(rate / PITCH_HZ[0]), size - 1))
    r = ac[:, lags] / np.maximum(ac[:, :1], 1e-20) * (size / (size - lags))      # unbiased: fewer products
    return Frames(centre_s=(np.arange(n) * hop + size / 2) / rate, level_db=level,
                  periodicity=np.clip(r.max(axis=1), 0.0, 1.0))
