"""ACX's published limits for an audiobook's files, and a file's measures checked against them.

ACX (Audible's Audiobook Creation Exchange) publishes, per uploaded file ("ACX Audio Submission Requirements",
https://www.acx.com/help/acx-audio-submission-requirements/201456300): an RMS between -23 and -18 dB, peaks no higher
than -3 dB, a noise floor no higher than -60 dB RMS, at most 120 minutes.  ACX does not publish how it measures;
these are measured as Audacity's "ACX Check" analyzer measures them (Steve Daulton's plugin, the check narrators
run before uploading): the RMS of the whole file (unweighted, 20 log10), its sample peak, and its noise floor as
the RMS of the quietest 0.4 s window taken every 0.1 s (tasks.audio.loudness.Meter).  docs/loudness.md has the
sources and what is not checked here (MP3 at 192 kbit/s CBR and 44.1 kHz, room tone, one voice).

A rendered book's files are measured when they are packaged (tasks.audio.verify, report.json's rows), so
`check_report` reads them back; `check_audio` measures any recording.  `chattts-render check --acx` prints them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks.audio.ffmpeg import CHUNK_SAMPLES
from tasks.audio.loudness import Meter
from tasks.audio.verify import FileReport

RMS_MIN_DBFS = -23.0          # dBFS, ACX: "between -23dB and -18dB RMS"
RMS_MAX_DBFS = -18.0
PEAK_MAX_DBFS = -3.0          # dBFS, ACX: "peak values no higher than -3dB"
NOISE_FLOOR_MAX_DBFS = -60.0  # dBFS RMS, ACX: "a noise floor no higher than -60dB RMS"
MAX_MINUTES = 120.0           # min, ACX: "no longer than 120 minutes" per file
CHAPTER_FORMATS = ("flac", "wav", "mp3", "opus", "m4a")   # a book's per-chapter files (not the M4B, not the EPUB's)


@dataclass(frozen=True)
class AcxResult:
    """One file's ACX measures and the limits it misses ("" in `failures` means none)."""
    file: str
    chapter: int | None            # 0-based chapter index, None for a file that is not a book's chapter
    seconds: float | None
    rms_dbfs: float | None
    peak_dbfs: float | None
    noise_floor_dbfs: float | None

    @property
    def failures(self) -> list[str]:
        """The limits missed, each with its measure; a measure that is missing (a file packaged before ACX's
        measures were kept) is one failure of its own."""
        out = []
        if self.rms_dbfs is None or self.peak_dbfs is None or self.noise_floor_dbfs is None:
            return ["not measured (packaged before ACX measures were kept: run `chattts-render package` again)"]
        if not RMS_MIN_DBFS <= self.rms_dbfs <= RMS_MAX_DBFS:
            out.append(f"RMS {self.rms_dbfs:.1f} dBFS outside {RMS_MIN_DBFS:g}..{RMS_MAX_DBFS:g}")
        if self.peak_dbfs > PEAK_MAX_DBFS:
            out.append(f"peak {self.peak_dbfs:.1f} dBFS above {PEAK_MAX_DBFS:g}")
        if self.noise_floor_dbfs > NOISE_FLOOR_MAX_DBFS:
            out.append(f"noise floor {self.noise_floor_dbfs:.1f} dBFS above {NOISE_FLOOR_MAX_DBFS:g}")
        if self.seconds is not None and self.seconds > MAX_MINUTES * 60:
            out.append(f"{self.seconds / 60:.0f} min, more than {MAX_MINUTES:g}")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def notes(self) -> list[str]:
        """What ACX Check warns about without it being a limit: digital silence as the noise floor."""
        return ["the noise floor is digital silence (ACX asks for room tone)"] \
            if self.noise_floor_dbfs == -math.inf else []

    def as_json(self) -> dict:
        def r(v):
            return v if v is None or not math.isfinite(v) else round(v, 2)
        return {"file": self.file, "chapter": self.chapter, "seconds": r(self.seconds), "rms_dbfs": r(self.rms_dbfs),
                "peak_dbfs": r(self.peak_dbfs),
                "noise_floor_dbfs": "-inf" if self.noise_floor_dbfs == -math.inf else r(self.noise_floor_dbfs),
                "ok": self.ok, "failures": self.failures, "notes": self.notes}


def from_report(rows: Iterable[FileReport]) -> list[AcxResult]:
    """The chapter files of a packaged book (report.json's rows), in its order."""
    return [AcxResult(f.file, f.chapter, f.seconds, f.rms_dbfs, f.peak_dbfs, f.noise_floor_dbfs)
            for f in rows if f.chapter is not None and f.format in CHAPTER_FORMATS]


def check_report(report: dict) -> list[AcxResult]:
    """from_report on report.json's contents."""
    return from_report(FileReport.from_json(r) for r in report.get("files", []))


def check_audio(name: str, audio: np.ndarray, sample_rate: int) -> AcxResult:
    """Any recording, as (samples,) float32 mono (a stereo file mixed down), measured now."""
    m = Meter(sample_rate, true_peak=False)
    for i in range(0, len(audio), CHUNK_SAMPLES):
        m.feed(audio[i:i + CHUNK_SAMPLES])
    return AcxResult(name, None, m.samples / sample_rate, m.rms_dbfs(), m.sample_peak_dbfs(), m.noise_floor_dbfs())


def format_acx(results: Sequence[AcxResult]) -> str:
    """The table `check --acx` prints: per file its measures, pass or the limits it misses."""
    def db(v: float | None) -> str:
        return "    -" if v is None else ("-inf" if v == -math.inf else f"{v:6.1f}")
    width = max([len(Path(r.file).name) for r in results] + [4])
    lines = [f"{'ch':>4}  {'file':<{width}}  {'RMS':>6} {'peak':>6} {'floor':>6}  "
             f"ACX ({RMS_MIN_DBFS:g}..{RMS_MAX_DBFS:g} RMS, peak <= {PEAK_MAX_DBFS:g}, "
             f"floor <= {NOISE_FLOOR_MAX_DBFS:g} dBFS)"]
    for r in results:
        ch = "" if r.chapter is None else str(r.chapter + 1)
        verdict = "pass" if r.ok else "FAIL: " + "; ".join(r.failures)
        lines.append(f"{ch:>4}  {Path(r.file).name:<{width}}  {db(r.rms_dbfs)} {db(r.peak_dbfs)} "
                     f"{db(r.noise_floor_dbfs)}  {verdict}" + "".join(f" ({n})" for n in r.notes))
    n_bad = sum(not r.ok for r in results)
    lines.append(f"{len(results)} file(s): {len(results) - n_bad} pass, {n_bad} fail")
    return "\n".join(lines)
