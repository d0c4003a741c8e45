"""Assembly: one chapter's segment audio -> one chapter waveform plus exact cue timings.

Each segment is trimmed of silence, then the chapter is laid out as lead-in silence, the pieces with their pauses,
and the chapter's tail, every two clips joined by an equal-power cross-fade (a fade-in and a fade-out at the
chapter's edges too); `expected_length` gives the chapter's exact length in samples before it is built, and the
cues are exact.  The layout, the length formula and the defaults: docs/modules.md, "Chapter assembly".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.units import SAMPLE_RATE
from tasks.book import CROSSFADE_S, PAUSE_KINDS, pause_kind, pause_seconds
from tasks.errors import RenderFailed

PAUSES_S: Mapping[str, float] = {   # s, silence after a segment by the boundary that follows it
    "clause": 0.25,
    "sentence": 0.45,
    "paragraph": 0.80,
    "chapter": 1.50,
}
LEAD_IN_S = 0.50             # s, silence before the first segment of a chapter
VOICE_CHANGE_PAUSE_S = 0.30  # s, the shortest pause between two segments in different voices (a cast)
TRIM_THRESHOLD_DB = -40.0    # dB relative to the segment's peak: quieter frames count as silence
TRIM_FLOOR_DBFS = -60.0      # dBFS, absolute: frames below are silence even in a very quiet segment
TRIM_FRAME_S = 0.005         # s, envelope frame for the level detector
PREROLL_S = 0.030            # s, kept before the first loud frame (a natural onset)
POSTROLL_S = 0.080           # s, kept after the last loud frame (a natural decay)


@dataclass(frozen=True)
class Piece:
    """One segment's stored audio and what follows it."""
    audio_path: Path
    pause_after: str = "sentence"    # a PauseKind, or "kind@seconds" a direction set (tasks/book.py)
    source_text: str = ""
    voice: str = ""                  # the voice id: a change of voice is a pause, never a cross-fade


@dataclass(frozen=True)
class Cue:
    """A segment's place in the chapter: [start_s, end_s) in seconds, and the same in samples."""
    start_s: float
    end_s: float
    text: str
    segment_index: int
    start_sample: int = 0
    end_sample: int = 0


@dataclass(frozen=True)
class ChapterAudio:
    audio: np.ndarray            # (samples,) float32 mono
    sample_rate: int
    cues: list[Cue] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


@dataclass(frozen=True)
class AssembleOptions:
    crossfade_s: float = CROSSFADE_S
    pauses_s: Mapping[str, float] = field(default_factory=lambda: dict(PAUSES_S))
    lead_in_s: float = LEAD_IN_S
    voice_change_pause_s: float = VOICE_CHANGE_PAUSE_S
    trim: bool = True
    trim_threshold_db: float = TRIM_THRESHOLD_DB
    trim_floor_dbfs: float = TRIM_FLOOR_DBFS
    preroll_s: float = PREROLL_S
    postroll_s: float = POSTROLL_S
    sample_rate: int = SAMPLE_RATE   # the segments' rate (assembly never resamples; packaging does)

    def crossfade_samples(self) -> int:
        return int(round(self.crossfade_s * self.sample_rate))

    def pause_samples(self, kind: str) -> int:
        """The silence after a boundary of `kind`, or the seconds a direction set in it ("sentence@1.2")."""
        secs = pause_seconds(kind)
        return int(round((self.pauses_s[pause_kind(kind)] if secs is None else secs) * self.sample_rate))

    def lead_in_samples(self) -> int:
        return int(round(self.lead_in_s * self.sample_rate))

    def pauses_after(self, kinds: Sequence[str], voices: Sequence[str] | None = None) -> list[int]:
        """P_i in samples: the pause after each piece, the last being the chapter's tail; where the next piece
        has another voice, at least voice_change_pause_s."""
        p = [self.pause_samples(k) for k in kinds[:-1]] + [self.pause_samples("chapter")] if kinds else []
        if voices:
            change = int(round(self.voice_change_pause_s * self.sample_rate))
            p = [max(x, change) if i + 1 < len(p) and voices[i] != voices[i + 1] else x for i, x in enumerate(p)]
        return p

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        if self.crossfade_s < 0:
            raise ValueError("crossfade_s must be >= 0")
        missing = [k for k in PAUSE_KINDS if k not in self.pauses_s]
        if missing:
            raise ValueError(f"pauses_s lacks the boundary kinds {missing}")
        n = self.crossfade_samples()
        if self.voice_change_pause_s <= 0:
            raise ValueError("voice_change_pause_s must be > 0: two voices are never cross-faded")
        for kind, seconds in [*self.pauses_s.items(), ("lead_in", self.lead_in_s),
                              ("voice_change", self.voice_change_pause_s)]:
            if seconds < 0:
                raise ValueError(f"pause {kind!r} is negative ({seconds} s)")
            p = int(round(seconds * self.sample_rate))
            if 0 < p < 2 * n:
                raise ValueError(f"pause {kind!r} ({seconds} s) is shorter than two cross-fades "
                                 f"({2 * self.crossfade_s} s): use 0 or at least {2 * self.crossfade_s} s")
        if self.preroll_s < 0 or self.postroll_s < 0:
            raise ValueError("preroll_s and postroll_s must be >= 0")
        if self.trim_threshold_db >= 0:
            raise ValueError("trim_threshold_db must be negative (dB below the segment's peak)")


# ----------------------------------------------------------------------------------------------------------
# Pure helpers

def equal_power_fades(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(fade_out, fade_in), each (n,) float32 with fade_out² + fade_in² = 1 at every sample."""
    t = (np.arange(n, dtype=np.float64) + 0.5) / n          # (n,) mid-sample positions in (0, 1)
    return np.cos(0.5 * np.pi * t).astype(np.float32), np.sin(0.5 * np.pi * t).astype(np.float32)


def trim_bounds(audio: np.ndarray, sample_rate: int, opts: AssembleOptions) -> tuple[int, int]:
    """[start, end) of `audio` to keep: loud frames plus pre-roll before and post-roll after.

    A frame is loud when its peak is above both trim_threshold_db relative to the segment's peak and the
    absolute floor.  An all-silent segment keeps nothing (0, 0).
    """
    n = len(audio)
    if n == 0:
        return 0, 0
    frame = max(1, int(round(TRIM_FRAME_S * sample_rate)))
    frames = -(-n // frame)
    padded = np.zeros(frames * frame, dtype=np.float32)
    padded[:n] = np.abs(audio)
    env = padded.reshape(frames, frame).max(axis=1)           # (frames,) per-frame peak
    peak = float(env.max())
    threshold = max(peak * 10 ** (opts.trim_threshold_db / 20), 10 ** (opts.trim_floor_dbfs / 20))
    loud = np.flatnonzero(env > threshold)
    if len(loud) == 0:
        return 0, 0
    start = max(0, int(loud[0]) * frame - int(round(opts.preroll_s * sample_rate)))
    end = min(n, (int(loud[-1]) + 1) * frame + int(round(opts.postroll_s * sample_rate)))
    return start, end


def trimmed_length(audio: np.ndarray, opts: AssembleOptions) -> int:
    """L_i of the length formula: the segment's length after trimming (its full length with trim=False)."""
    if not opts.trim:
        return len(audio)
    s, e = trim_bounds(np.asarray(audio, dtype=np.float32).reshape(-1), opts.sample_rate, opts)
    return e - s


def expected_length(piece_lengths: Sequence[int], pauses: Sequence[str], opts: AssembleOptions,
                    voices: Sequence[str] | None = None) -> int:
    """The chapter length in samples for pieces of these (trimmed) lengths followed by these pause kinds
    (and spoken in these voices: AssembleOptions.pauses_after).

    length = H + sum(max(L_i, 2N)) + sum(P_i) - N * (clips - 1), clips = n + #{P_i > 0} + [H > 0]
    """
    if len(piece_lengths) != len(pauses):
        raise ValueError("one pause kind per piece")
    if not piece_lengths:
        return 0
    n = opts.crossfade_samples()
    h = opts.lead_in_samples()
    p = opts.pauses_after(pauses, voices)
    clips = len(piece_lengths) + sum(1 for x in p if x > 0) + (1 if h > 0 else 0)
    return h + sum(max(int(L), 2 * n) for L in piece_lengths) + sum(p) - n * (clips - 1)


def load_piece(piece: Piece, sample_rate: int) -> np.ndarray:
    """The segment's audio as (samples,) float32 mono; RenderFailed for a missing, unreadable or wrong-rate file."""
    import soundfile as sf

    path = Path(piece.audio_path)
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError, sf.LibsndfileError) as err:
        raise RenderFailed(str(path), f"cannot read segment audio ({err})") from None
    if sr != sample_rate:
        raise RenderFailed(str(path), f"segment audio is {sr} Hz, expected {sample_rate} Hz")
    if data.shape[1] != 1:
        data = data.mean(axis=1, keepdims=True, dtype=np.float32)
    return np.ascontiguousarray(data[:, 0], dtype=np.float32)


def assemble_arrays(arrays: Sequence[np.ndarray], pauses: Sequence[str], texts: Sequence[str],
                    opts: AssembleOptions = AssembleOptions(), voices: Sequence[str] | None = None) -> ChapterAudio:
    """assemble_chapter on in-memory segment audio (each (samples,) float32 at opts.sample_rate); `voices`:
    each piece's voice id (None: one voice)."""
    if not (len(arrays) == len(pauses) == len(texts)):
        raise ValueError("arrays, pauses and texts must have the same length")
    for k in pauses:
        if pause_kind(k) not in opts.pauses_s:
            raise ValueError(f"unknown pause kind {k!r}")
    sr = opts.sample_rate
    n = opts.crossfade_samples()
    fade_out, fade_in = equal_power_fades(n)

    # Trim, then pad up to 2N so that a fade-in and a fade-out never overlap inside one piece.
    pieces: list[np.ndarray] = []
    for a in arrays:
        a = np.asarray(a, dtype=np.float32).reshape(-1)
        if opts.trim:
            s, e = trim_bounds(a, sr, opts)
            a = a[s:e]
        if len(a) < 2 * n:
            a = np.concatenate([a, np.zeros(2 * n - len(a), dtype=np.float32)])
        pieces.append(a)
    if not pieces:
        return ChapterAudio(np.zeros(0, dtype=np.float32), sr, [])

    # Lay out the clip sequence: (offset, length, piece index or -1 for silence).
    clips: list[tuple[int, int, int]] = []
    pos = 0

    def place(length: int, index: int) -> None:
        nonlocal pos
        if clips:
            pos -= n                                     # every join overlaps the previous clip by N
        clips.append((pos, length, index))
        pos += length

    h = opts.lead_in_samples()
    if h > 0:
        place(h, -1)
    after = opts.pauses_after(pauses, voices)
    for i, a in enumerate(pieces):
        place(len(a), i)
        p = after[i]
        if p > 0:
            place(p, -1)
    total = pos
    out = np.zeros(total, dtype=np.float32)              # (total,)

    cues: list[Cue] = []
    for off, length, index in clips:
        if index < 0:
            continue                                     # silence contributes zeros
        a = pieces[index].copy()
        if n > 0:                                        # fade in from the previous clip (or the file start),
            a[:n] *= fade_in                             # fade out into the next clip (or the file end)
            a[-n:] *= fade_out
        out[off:off + length] += a
        cues.append(Cue(0.0, 0.0, texts[index], index, off, off + length))

    # Pieces joined directly (zero pause) overlap by N: their cue boundary is the middle of the cross-fade.
    for i in range(len(cues) - 1):
        left, right = cues[i], cues[i + 1]
        if left.end_sample > right.start_sample:
            mid = right.start_sample + (left.end_sample - right.start_sample) // 2
            cues[i] = Cue(0.0, 0.0, left.text, left.segment_index, left.start_sample, mid)
            cues[i + 1] = Cue(0.0, 0.0, right.text, right.segment_index, mid, right.end_sample)
    cues = [Cue(c.start_sample / sr, c.end_sample / sr, c.text, c.segment_index, c.start_sample, c.end_sample)
            for c in cues]
    return ChapterAudio(out, sr, cues)


def assemble_chapter(pieces: Sequence[Piece], opts: AssembleOptions = AssembleOptions()) -> ChapterAudio:
    """Read each piece's audio, trim, cross-fade and pause: the chapter waveform and its exact cues.

    Pure and deterministic bit for bit: the result depends only on the pieces' audio and `opts`.
    """
    arrays = [load_piece(p, opts.sample_rate) for p in pieces]
    return assemble_arrays(arrays, [p.pause_after for p in pieces], [p.source_text for p in pieces], opts,
                           [p.voice for p in pieces])
