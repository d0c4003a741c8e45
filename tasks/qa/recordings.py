"""The QA checks on any recordings (`chattts-render check`): read the recordings and their intended texts, hear
them (ASR), compare, and — given a reference clip of the voice — measure the speaker similarity.

    items = read_texts(Path("transcripts.tsv"))          # [(recording, text)], recordings relative to the TSV
    audio = [read_recording(p) for p, _ in items]         # every input read and checked before any model loads
    results = check_recordings(items, audio, load_transcriber("base"), encoder, reference, "auto", QAOptions())

Bad input (an unreadable recording, a malformed TSV, an empty text) is a BookError naming the file (exit 2)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.errors import BookError
from tasks.qa.compare import LANGUAGES, detect_language
from tasks.qa.hearing import hear_texts
from tasks.qa.options import QAOptions
from tasks.qa.speaker import similarity
from tasks.qa.verdict import FLAG, INCONCLUSIVE, combine, drift_verdict

if TYPE_CHECKING:
    import numpy as np

    from tasks.qa.asr import Transcriber
    from tasks.qa.speaker import Embedding, SpeakerEncoder

LANGUAGE_CHOICES = (*LANGUAGES, "auto")


@dataclass(frozen=True)
class RecordingCheck:
    file: str
    text: str                         # what the recording should say
    transcript: str                   # what Whisper heard
    language: str
    cer: float
    similarity: float | None          # to the reference clip (None: no reference, or too little speech)
    asr: str                          # the ASR check's verdict
    drift: str | None                 # the drift gate's (None: no reference)
    verdict: str                      # combined: flag > inconclusive > pass
    reason: str                       # one line: why not a pass ("" for a pass)

    def as_json(self) -> dict:
        out = {"file": self.file, "transcript": self.transcript, "cer": round(self.cer, 4)}
        if self.drift is not None:
            out["similarity"] = None if self.similarity is None else round(self.similarity, 4)
        return {**out, "verdict": self.verdict, "reason": self.reason, "language": self.language,
                "asr": self.asr, **({"drift": self.drift} if self.drift is not None else {})}


def read_texts(tsv: Path) -> list[tuple[Path, str]]:
    """`file<TAB>text` lines (UTF-8; blank lines and # comments skipped); files relative to the TSV's folder."""
    try:
        lines = Path(tsv).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise BookError(str(tsv), "no such texts file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BookError(str(tsv), f"cannot read the texts file ({type(e).__name__})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, tab, text = line.partition("\t")
        if not tab or not name.strip():
            raise BookError(f"{tsv}:{n}", "expected file<TAB>text")
        if not text.strip():
            raise BookError(f"{tsv}:{n}", f"no text for {name.strip()}")
        out.append((Path(tsv).parent / name.strip(), text.strip()))
    if not out:
        raise BookError(str(tsv), "no file<TAB>text lines")
    return out


def read_recording(path: Path) -> tuple[np.ndarray, int]:
    """(float32 mono [samples], sample rate): soundfile (WAV, FLAC, Ogg …), else ffmpeg through pydub.  A
    recording that cannot be read or holds no audio is a BookError naming it."""
    import numpy as np
    import soundfile as sf

    path = Path(path)
    if not path.is_file():
        raise BookError(str(path), "no such recording")
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)          # [samples, channels]
    except Exception:                                 # noqa: BLE001 — not a libsndfile format: try ffmpeg
        data, rate = _read_with_ffmpeg(path)
    if data.size == 0:
        raise BookError(str(path), "the recording holds no audio")
    mono = data.mean(axis=1).astype(np.float32)
    if not np.isfinite(mono).all():
        raise BookError(str(path), "the recording holds NaN or infinite samples")
    return mono, int(rate)


def _read_with_ffmpeg(path: Path):
    import numpy as np
    from pydub import AudioSegment

    AudioSegment.converter = os.environ.get("FFMPEG") or shutil.which("ffmpeg") or "ffmpeg"
    try:
        seg = AudioSegment.from_file(str(path))
    except FileNotFoundError as e:
        raise BookError(str(path), f"cannot decode it: {e.filename} not found (is ffmpeg installed?)") from None
    except Exception as e:                            # noqa: BLE001 — CouldntDecodeError and friends
        first = (str(e).strip().splitlines() or [""])[0][:120]
        raise BookError(str(path), f"cannot decode the recording ({type(e).__name__}"
                                   f"{': ' + first if first else ''})") from None
    pcm = np.asarray(seg.get_array_of_samples(), dtype=np.float32).reshape(-1, seg.channels)   # [samples, ch]
    return pcm / float(1 << (8 * seg.sample_width - 1)), seg.frame_rate


def language_of(text: str, language: str) -> str:
    """The comparison language: the one given, or detected from the intended text ("auto")."""
    if language not in LANGUAGE_CHOICES:
        raise ValueError(f"language {language!r} must be one of {', '.join(LANGUAGE_CHOICES)}")
    return detect_language(text) if language == "auto" else language


def check_recordings(items: Sequence[tuple[Path, str]], audio: Sequence[tuple[np.ndarray, int]],
                     transcriber: Transcriber, encoder: SpeakerEncoder | None = None,
                     reference: Embedding | None = None, language: str = "auto",
                     opts: QAOptions = QAOptions()) -> list[RecordingCheck]:
    """Each recording's checks.  With a reference embedding the drift gate uses the floor alone (a handful of
    recordings has no spread to take a percentile of)."""
    langs = [language_of(text, language) for _, text in items]
    heard = hear_texts(transcriber, [(text, a, rate, lang) for (_, text), (a, rate), lang in zip(items, audio, langs)],
                       opts)
    out = []
    for (path, text), (a, rate), lang, (tr, asr) in zip(items, audio, langs, heard):
        sim, drift, reasons = None, None, [asr.reason] if asr.verdict != "pass" else []
        if encoder is not None and reference is not None:
            emb = encoder.embed(a, rate, opts.min_speech_s)
            sim = None if emb.vector is None or reference.vector is None else similarity(emb.vector,
                                                                                         reference.vector)
            drift = drift_verdict(sim, opts.drift_floor)
            if drift == FLAG:
                reasons.append(f"voice drift: similarity {sim:.2f} < {opts.drift_floor:g}")
            elif drift == INCONCLUSIVE:
                reasons.append(f"voice not judged: {emb.speech_s:.1f} s of speech (< {opts.min_speech_s:g})")
        out.append(RecordingCheck(file=str(path), text=text, transcript=tr.text, language=lang, cer=asr.cer,
                                  similarity=sim, asr=asr.verdict, drift=drift, verdict=combine(asr.verdict, drift),
                                  reason="; ".join(reasons)))
    return out
