"""A segment take's audio on disk: FLAC, 24-bit, written crash-safely; read back and measured."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from engine.atomic import write_bytes

AUDIO_SUBTYPE = "PCM_24"       # FLAC sample format of stored segment audio


def write_segment_audio(path: Path, audio: np.ndarray, sample_rate: int) -> None:
    """Encode in memory, then write the bytes crash-safely and fsynced (engine.atomic: a done row names this
    file, and audio on disk is adopted as done).  soundfile writing into a Python file object swallows the
    file's write errors — a full disk would leave a truncated file — so the encoder never touches the disk."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, audio, sample_rate, format="FLAC", subtype=AUDIO_SUBTYPE)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, buf.getvalue(), durable=True)


def audio_frames(path: Path) -> int | None:
    import soundfile as sf

    try:
        return sf.info(str(path)).frames
    except (OSError, RuntimeError, sf.LibsndfileError):
        return None


def read_audio(path: Path) -> np.ndarray:
    """A stored take's samples, float32 mono."""
    import soundfile as sf

    audio, _rate = sf.read(str(path), dtype="float32")
    return audio
