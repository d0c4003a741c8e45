"""Final files measured as the listener gets them: each is encoded, decoded and measured (integrated loudness,
true peak); a lossy codec that pushed the true peak over the ceiling, or moved the loudness, gets its input
limited or scaled by what it overshot and is encoded again.  The report row carries what the final file
measures."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from engine.atomic import atomic_path
from tasks.audio.encode import LOSSLESS, encode_lossy, write_lossless
from tasks.audio.ffmpeg import CHUNK_SAMPLES, chunks, decode
from tasks.audio.loudness import Meter, db_to_gain, limit
from tasks.audio.options import BITRATES_KBPS
from tasks.book import BookMeta

if TYPE_CHECKING:
    from tasks.audio.options import PackageOptions

PRE_LIMIT_MARGIN_DB = 0.3     # dB below the ceiling the limiter aims for, before encoding
LOSSY_SAFETY_DB = 0.2         # dB below the ceiling a corrected lossy file aims for
LOSSY_LOUDNESS_TOLERANCE_LU = 0.5   # LU a lossy file may drift from the target before it is re-encoded
SHAPE_CONTEXT = 4096          # samples of context around each chunk the streaming limiter sees
VERIFY_ROUNDS = 4             # encode -> decode -> measure -> correct rounds at most
OPUS_DECODE_RATE = 48_000     # Hz, libopus always decodes at 48 kHz
MEASURE_BLOCK = 1 << 20       # samples per block read from a FLAC/WAV file


@dataclass(frozen=True)
class FileReport:
    file: str                      # name inside book_dir
    format: str
    chapter: int | None            # chapter index, None for the M4B and book-wide files
    seconds: float | None          # decoded duration
    integrated_lufs: float | None  # measured on the decoded final file (None: silent / no audio)
    true_peak_dbtp: float | None
    correction_db: float = 0.0     # extra gain applied after encoding + measuring (lossy loudness drift)
    limiter_dbtp: float | None = None  # tightened limiter ceiling after a lossy overshoot (None: not needed)
    rms_dbfs: float | None = None      # what ACX's limits are written in (tasks.audio.acx): unweighted RMS,
    peak_dbfs: float | None = None     # sample peak,
    noise_floor_dbfs: float | None = None   # the quietest 0.4 s window's RMS (-inf: digital silence)

    def as_json(self) -> dict:
        def r(v):
            return None if v is None or not math.isfinite(v) else round(v, 3)
        return {"file": self.file, "format": self.format, "chapter": self.chapter, "seconds": r(self.seconds),
                "integrated_lufs": r(self.integrated_lufs), "true_peak_dbtp": r(self.true_peak_dbtp),
                "correction_db": round(self.correction_db, 3),
                "limiter_dbtp": None if self.limiter_dbtp is None else round(self.limiter_dbtp, 3),
                "rms_dbfs": r(self.rms_dbfs), "peak_dbfs": r(self.peak_dbfs),
                "noise_floor_dbfs": "-inf" if self.noise_floor_dbfs == -math.inf else r(self.noise_floor_dbfs)}

    @classmethod
    def from_json(cls, row: dict) -> FileReport:
        """A report.json row read back (a row written before a field existed lacks it: None)."""
        floor = row.get("noise_floor_dbfs")
        return cls(**{**{k: v for k, v in row.items() if k in cls.__dataclass_fields__},
                      "noise_floor_dbfs": -math.inf if floor == "-inf" else floor})


class Measured(NamedTuple):
    """A final file as decoded: BS.1770 loudness and true peak, its length, and ACX's measures (Meter)."""
    lufs: float
    true_peak: float
    seconds: float
    rms_dbfs: float = math.nan
    peak_dbfs: float = math.nan
    noise_floor_dbfs: float = math.nan


def measure_file(path: Path, sample_rate: int | None = None) -> Measured:
    """A final file's measures, decoded (soundfile or ffmpeg)."""
    if path.suffix in (".flac", ".wav"):
        import soundfile as sf

        with sf.SoundFile(str(path)) as f:
            m = Meter(f.samplerate)
            for block in f.blocks(blocksize=MEASURE_BLOCK, dtype="float32", always_2d=True):   # (n, channels)
                m.feed(block.mean(axis=1) if block.shape[1] > 1 else block[:, 0])
    else:
        sr, it = decode(path, sample_rate)
        m = Meter(sr)
        for c in it:
            m.feed(c)
    return Measured(m.integrated_lufs(), m.true_peak_dbtp(), m.samples / m.sr, m.rms_dbfs(), m.sample_peak_dbfs(),
                    m.noise_floor_dbfs())


def shaped_chunks(audio: np.ndarray, sr: int, gain_db: float = 0.0,
                  ceiling_dbtp: float | None = None) -> Iterator[np.ndarray]:
    """`audio` (array or memmap) chunk by chunk, times gain_db and true-peak limited to ceiling_dbtp
    (None: unchanged).  Each chunk is limited with SHAPE_CONTEXT samples of context on both sides."""
    if ceiling_dbtp is None:
        yield from chunks(audio, db_to_gain(gain_db))
        return
    g = np.float32(db_to_gain(gain_db))
    n = len(audio)
    for i in range(0, n, CHUNK_SAMPLES):
        lo, hi = max(0, i - SHAPE_CONTEXT), min(n, i + CHUNK_SAMPLES + SHAPE_CONTEXT)
        y = limit(np.asarray(audio[lo:hi], dtype=np.float32) * g, sr, ceiling_dbtp)   # (hi - lo,)
        yield y[i - lo:i - lo + min(CHUNK_SAMPLES, n - i)]


def encode_verified(path: Path, fmt: str, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta,
                    opts: PackageOptions, chapter: int | None, chapters: Sequence[tuple[int, int, str]] = (),
                    before_replace: Callable[[], None] | None = None) -> FileReport:
    """Encode `audio` to `path` atomically (the last attempt is renamed into place), decode and measure it.

    For a lossy format whose codec pushed the true peak over the ceiling (or moved the loudness more than
    LOSSY_LOUDNESS_TOLERANCE_LU), tighten the limiter by the overshoot and encode again: first the limiter's
    ceiling is lowered by 1.5x the overshoot; if the codec still overshoots, the level is lowered by the
    overshoot; a loudness drift under the ceiling is followed by the gain.  At most VERIFY_ROUNDS encodes."""
    gain_db, ceiling = 0.0, None
    lossless = fmt in LOSSLESS
    with atomic_path(path, before_replace=before_replace) as tmp:
        for round_ in range(VERIFY_ROUNDS):             # each round overwrites the same temp file
            if lossless:
                write_lossless(tmp, fmt, audio, sr, tags, meta)
            else:
                encode_lossy(tmp, fmt, shaped_chunks(audio, sr, gain_db, ceiling), sr, tags, meta,
                             int(opts.bitrates_kbps.get(fmt, BITRATES_KBPS[fmt])), chapters)
            measured = measure_file(tmp, OPUS_DECODE_RATE if fmt == "opus" else sr)
            lufs, tp, secs = measured.lufs, measured.true_peak, measured.seconds
            if lossless or not opts.normalize or not math.isfinite(tp) or round_ == VERIFY_ROUNDS - 1:
                break
            over = tp - (opts.true_peak_dbtp - LOSSY_SAFETY_DB / 2)
            off = (opts.target_lufs - lufs) if math.isfinite(lufs) else 0.0
            if over <= 0 and abs(off) <= LOSSY_LOUDNESS_TOLERANCE_LU:
                break
            excess = tp - (opts.true_peak_dbtp - LOSSY_SAFETY_DB)
            if over > 0 and round_ == 0:                  # first, limit the peaks harder before encoding
                ceiling = opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB - 1.5 * excess
            elif over > 0:                                # codec noise, not peaks: lower the level itself
                gain_db -= excess
            else:                                         # under the ceiling, loudness drifted: follow it
                gain_db += off
                if ceiling is None and off > 0:
                    ceiling = opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB
    return FileReport(path.name, fmt, chapter, secs, lufs, tp, gain_db, ceiling, measured.rms_dbfs,
                      measured.peak_dbfs, measured.noise_floor_dbfs)
