"""A speech stand-in for the engine: given recordings for given texts, so a whole render runs on real speech.

    clips = corpus_clips(corpus_dir)                          # the corpus's Chinese clips, 24 kHz mono float32
    book = write_corpus_book(tmp / "speech.txt", clips)       # one paragraph per sentence (two bare-title chapters)
    engine = SpeechEngine({})
    book_dir = stages.prepare(opts)                           # with stages.get_engine patched to return `engine`
    engine.script = {**book_script(book_dir, clips)}          # the manifest's texts -> the clip of each take
    stages.synthesize(book_dir, opts)

A script maps a normalized text (what a Request carries: the manifest's `text`) to the clips of its takes: take k's
request has seed reroll_seed(derive_seed(text, voice_id(spk_emb)), k) (tasks.synthesize.guard, tasks.plan.rows,
tasks.voice.voices), and the engine inverts that, so it keeps no state between calls: a killed and resumed render
gets the same clip for the same take.  Past the script's last take the last clip again; a seed that is no take of
its text and voice (`fix --seed N`) gets the last clip too (its call records take None).  A text the script does
not name is refused, like a bad request, before anything is yielded.

Each Result's audio is its clip padded with silence to (2T-1)*256 samples, T the fewest steps that hold it (the
real engine's length rule); results come in completion order, shortest first, as a batch of rows would finish.
It is an engine.api.Synthesizer (mypy checks it: pyproject's files), the contract the stages use of an engine; its
speaker statistics are enough to sample and check spk_emb voices.  It has no DVAE, so no clip voices, no
--voice-anchor (anchor_voice raises); no text head, so no --refine (refine raises).
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from engine.api import DEFAULT_MAX_BATCH, Refined, Request, Result, Synthesizer
from engine.units import HOP, SAMPLE_RATE, SAMPLES_PER_TOKEN, estimate_seconds
from engine.voice import VoiceSpec, resolve_voice, sample_voice
from tasks.plan.rows import derive_seed
from tasks.synthesize.guard import reroll_seed
from tasks.voice.voices import voice_id

VERSION = "speech-standin-1"        # the stand-in's engine version (content keys hash it)
SPEECH_DIR = ("speech",)            # the corpus's speech clips (../shared/corpus/speech, MANIFEST.md)
TRANSCRIPTS = "transcripts.tsv"     # file<TAB>exact transcript
MAX_TAKE = 64                       # takes tried when a request's seed is inverted to its take
TRUNCATE_SHARE = 0.45               # a truncated clip keeps this share of the recording (its start)
NOISE_RMS = 0.05                    # full scale: white noise's level (speech in the corpus: ~0.03-0.1)
SPEAKER_DIM = 768                   # the stand-in model's speaker vector size (ChatTTS's GPT hidden size)
MIN_SEGMENT_S = 3.0                 # s: tasks.text.segment.MIN_SECONDS, a paragraph shorter than this is merged
MAX_TITLE_CHARS = 20                # characters: tasks.ingest.txt_zh.MAX_BARE_TITLE_CHARS
INDENT = "\u3000\u3000"             # a body paragraph's indent: two full-width spaces (bare titles stay flush-left)
SENTENCE_END = "。！？"
CLOSERS = "。！？，、；：,.!?;: "       # stripped when a manifest's source text is matched to a transcript
# Speakers of the Chinese clips (MANIFEST.md, "Speaker groups"): the THCHS-30 test clips' speaker is unknown (it may
# be D4), so they are never "another speaker" of D4 or of each other.
SPEAKERS = {"zh_aishell1_S0764_W0121.wav": "S0764", "zh_aishell1_S0764_W0122.wav": "S0764",
            "zh_aishell1_S0724_W0121.wav": "S0724", "zh_aishell1_S0002_W0122.wav": "S0002",
            "zh_thchs30_D4_751.wav": "D4", "zh_thchs30_D4_751_noise0dB.wav": "D4",
            "zh_thchs30_test_1.wav": "thchs?1", "zh_thchs30_test_2.wav": "thchs?2", "zh_thchs30_test_3.wav": "thchs?3",
            "zh_cosyvoice_zero_shot_prompt.wav": "cosyvoice"}
UNKNOWN_SPEAKER = "thchs?"          # prefix of a THCHS-30 speaker whose identity the corpus does not give
THCHS_SPEAKERS = ("D4",)            # the THCHS-30 speakers the corpus names
NOISY = ("_noise0dB",)              # clips that are another clip plus noise: not a sentence of their own


@dataclass(frozen=True, eq=False)
class Clip:                          # compared by identity (it holds an array)
    name: str                       # the corpus file, with what was done to it: "x.wav", "x.wav[:45%]", "noise(x.wav)"
    audio: np.ndarray               # float32 mono [samples] at engine.units.SAMPLE_RATE
    text: str                       # what it says, exactly as the corpus writes it ("" for noise)
    speaker: str                    # SPEAKERS' id ("" for noise)

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


def read_audio(path: Path) -> np.ndarray:
    """A recording as float32 mono at 24 kHz: channels averaged, resampled with torchaudio's sinc resampler."""
    import soundfile as sf
    import torch
    import torchaudio.functional as AF

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)      # [samples, channels]
    mono = data.mean(axis=1)                                              # [samples]
    if rate == SAMPLE_RATE:
        return np.ascontiguousarray(mono, dtype=np.float32)
    return AF.resample(torch.from_numpy(mono)[None], rate, SAMPLE_RATE)[0].numpy().astype(np.float32)


def corpus_clips(speech_dir: Path, language: str = "zh") -> dict[str, Clip]:
    """The corpus's clips of one language (file names start with it), by file name, read and resampled once."""
    out = {}
    for line in (Path(speech_dir) / TRANSCRIPTS).read_text(encoding="utf-8").splitlines():
        name, _, text = line.partition("\t")
        if name.startswith(f"{language}_") and text:
            out[name] = Clip(name, read_audio(Path(speech_dir) / name), text, SPEAKERS.get(name, name))
    return out


# ------------------------------------------------------------------------------------------ clips for a script

def truncated(clip: Clip, share: float = TRUNCATE_SHARE) -> Clip:
    """The first `share` of the recording (a take that stopped early); it claims the full text."""
    return Clip(f"{clip.name}[:{share:.0%}]", clip.audio[:int(len(clip.audio) * share)].copy(), clip.text,
                clip.speaker)


def noise(clip: Clip, rms: float = NOISE_RMS) -> Clip:
    """White noise as long as `clip` (seeded by its name: the same noise every time), no speech, no speaker."""
    seed = int.from_bytes(hashlib.sha256(clip.name.encode()).digest()[:8], "big")
    audio = (rms * np.random.default_rng(seed).standard_normal(len(clip.audio))).astype(np.float32)
    return Clip(f"noise({clip.name})", audio, "", "")


def sentences(clips: Mapping[str, Clip]) -> list[Clip]:
    """One clip per distinct sentence (a noisy copy of another clip is left out), in the corpus's order."""
    out, seen = [], set()
    for c in clips.values():
        if c.text not in seen and not any(m in c.name for m in NOISY):
            out.append(c)
            seen.add(c.text)
    return out


def other_sentence(clip: Clip, clips: Mapping[str, Clip]) -> Clip:
    """A clip of another sentence (the next in the corpus's order), any speaker: a take that says the wrong text."""
    pool = sentences(clips)
    k = next(i for i, c in enumerate(pool) if c.text == clip.text)
    return pool[(k + 1) % len(pool)]


def other_speaker(clip: Clip, clips: Mapping[str, Clip]) -> Clip:
    """A clip of a speaker known to be another than `clip`'s (MANIFEST.md's groups), the first in the corpus's
    order: a take in another voice (it says another sentence too: the corpus has no sentence said by two voices)."""
    for c in sentences(clips):
        if c.speaker and clip.speaker and not _maybe_same(c.speaker, clip.speaker):
            return c
    raise ValueError(f"{clip.name}: no clip of a speaker known to be another")


def _maybe_same(a: str, b: str) -> bool:
    """Speakers a and b may be one person: equal, or both of THCHS-30 with either unknown (a test clip's speaker
    may be D4 or another test clip's; other corpora are other people)."""
    thchs = {a, b} <= set(THCHS_SPEAKERS) | {s for s in (a, b) if s.startswith(UNKNOWN_SPEAKER)}
    return a == b or (thchs and (a.startswith(UNKNOWN_SPEAKER) or b.startswith(UNKNOWN_SPEAKER)))


# ---------------------------------------------------------------------------------------------------- the book

def _paragraph(text: str) -> str:
    return text if text[-1] in SENTENCE_END else text + "。"


def _titles(pool: Sequence[Clip]) -> list[Clip]:
    """The chapter titles: every sentence too short to stay a segment of its own as a paragraph (the segmenter
    merges one under MIN_SEGMENT_S with a neighbour, never a title), then the shortest that can be a bare title
    line (short, no punctuation) until there are two (the TXT ingest needs two to see an essay collection)."""
    can = [c for c in pool if len(c.text) <= MAX_TITLE_CHARS and not any(p in c.text for p in CLOSERS)]
    must = [c for c in pool if estimate_seconds(_paragraph(c.text)) < MIN_SEGMENT_S]
    if any(c not in can for c in must):
        bad = next(c for c in must if c not in can)
        raise ValueError(f"{bad.name}: too short to be a segment of its own, and not a title line either")
    titles = list(must)
    for c in sorted(can, key=lambda c: len(c.text)):
        if len(titles) >= 2:
            break
        if c not in titles:
            titles.append(c)
    if len(titles) < 2 or len(pool) < 2 * len(titles):
        raise ValueError("the corpus's sentences cannot make a book of titled chapters (two titles, each with text)")
    return titles


def write_corpus_book(path: Path, clips: Mapping[str, Clip], title: str = "语音测试") -> Path:
    """A TXT book that says every distinct sentence of `clips` once: `书名：title`, then chapters whose bare title
    lines are sentences too (flush-left, no punctuation) and whose paragraphs (indented) are the others, one
    sentence each.  Each becomes exactly one segment (tests/test_speech_engine.py proves it on the manifest)."""
    pool = sentences(clips)
    titles = _titles(pool)
    body = [c for c in pool if c not in titles]
    per = math.ceil(len(body) / len(titles))
    lines = [f"书名：{title}", ""]
    for k, t in enumerate(titles):
        lines += [t.text, ""] + [INDENT + _paragraph(c.text) for c in body[k * per:(k + 1) * per]] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _bare(text: str) -> str:
    return "".join(ch for ch in text if ch not in CLOSERS and not ch.isspace())


def book_script(book_dir: Path, clips: Mapping[str, Clip], fill=None) -> dict[str, Clip]:
    """Each planned segment's normalized text (the manifest's, as tasks/text made it) -> the clip of the sentence
    its source text is.  A segment that is not exactly one corpus sentence gets fill(row) (a Clip), or, without
    `fill`, a ValueError naming it."""
    import manifests

    by_text = {_bare(c.text): c for c in sentences(clips)}
    out: dict[str, Clip] = {}
    for r in manifests.load(book_dir).to_pylist():
        clip = by_text.get(_bare(r["source_text"]))
        if clip is None and fill is None:
            raise ValueError(f"{book_dir}: segment {r['chapter']}.{r['segment']} ({r['source_text']!r}) is not "
                             "exactly one corpus sentence")
        out[r["text"]] = clip if clip is not None else fill(r)
    return out


def tiled(clip: Clip, samples: int) -> Clip:
    """`clip`'s recording repeated and cut to `samples` (speech of a given length; it says something else)."""
    reps = -(-samples // max(1, len(clip.audio)))
    return Clip(f"{clip.name}[tiled {samples}]", np.tile(clip.audio, reps)[:samples].copy(), "", clip.speaker)


# -------------------------------------------------------------------------------------------------- the engine

def _speaker_model():
    """What engine.voice asks of a model to sample and check spk_emb voices: the speaker statistics (N(0, 1))."""
    import torch

    speaker = SimpleNamespace(dim=SPEAKER_DIM, mean=torch.zeros(SPEAKER_DIM), std=torch.ones(SPEAKER_DIM))
    gpt = SimpleNamespace(num_vq=4, num_audio_tokens=626)
    return SimpleNamespace(speaker=speaker, config=SimpleNamespace(gpt=gpt))


def padded(audio: np.ndarray) -> tuple[np.ndarray, int]:
    """(audio padded with zeros to (2T-1)*256 samples, T): T the fewest GPT steps that hold it."""
    tokens = max(1, math.ceil((len(audio) + HOP) / SAMPLES_PER_TOKEN))
    out = np.zeros((2 * tokens - 1) * HOP, dtype=np.float32)                        # [(2T-1)*256]
    out[:len(audio)] = audio
    return out, tokens


class SpeechEngine:
    """The engine's surface (engine.engine.Engine) over a script: text -> the clips of its takes (see the module)."""

    version = VERSION
    adopts: tuple[str, ...] = ()
    is_random = False
    batch = DEFAULT_MAX_BATCH["cpu"]                 # rows a batch holds at most (a schedule's tail)

    def __init__(self, script: Mapping[str, Sequence[Clip] | Clip], version: str = VERSION):
        self.script = script
        self.version = version
        self.model = _speaker_model()          # engine.voice samples and checks voices with it
        self.calls: list[tuple[str, str, int | None, str]] = []   # (key, text, take or None, clip name) per request
        self.last_batch_sizes: list[int] = []
        self.passes: list[list[list[tuple[str, int | None]]]] = []   # per synthesize call, its rounds' (text, take)

    def takes(self, text: str) -> tuple[Clip, ...]:
        got = self.script[text]
        return (got,) if isinstance(got, Clip) else tuple(got)

    def sample_voice(self, seed: int) -> str:
        return sample_voice(self.model, seed)

    def resolve_voice(self, spec: VoiceSpec) -> str:
        return resolve_voice(spec, self.model)

    def refine(self, requests: Iterable[Request]) -> Iterator[Refined]:
        raise NotImplementedError("the speech stand-in has no text head: render without --refine")

    def anchor_voice(self, voice: str, rendering: np.ndarray, text: str) -> str:
        raise NotImplementedError("the speech stand-in has no DVAE: render without --voice-anchor")

    @staticmethod
    def take_of(req: Request) -> int | None:
        """The take (1-based) whose seed the request carries, None when its seed is no take of its text and voice."""
        base = derive_seed(req.text, voice_id(req.spk_emb))
        return next((k for k in range(1, MAX_TAKE + 1) if reroll_seed(base, k) == req.seed), None)

    def clip_for(self, req: Request) -> tuple[int | None, Clip]:
        """(take, its clip): past the script's last take, or for a seed that is no take, the last clip."""
        takes = self.takes(req.text)
        take = self.take_of(req)
        return take, takes[min(take or len(takes), len(takes)) - 1]

    def synthesize(self, requests: Iterable[Request], progress: Callable[[Result], None] | None = None,
                   more: Callable[[bool], Iterable[Request]] | None = None) -> Iterator[Result]:
        """A Result per request, shortest first (then in request order).  A text the script lacks raises
        ValueError before anything of its round is yielded.  `more` (as engine.engine.Engine.synthesize's): once
        a round is yielded, more(True)'s requests are the next round of this call, until it gives none.
        `passes` records each call's rounds, as (text, take) per request."""
        rounds: list[list[tuple[str, int | None]]] = []
        self.passes.append(rounds)
        self.last_batch_sizes = []
        requests = list(requests)
        while requests or (more is not None and (requests := list(more(True)))):
            missing = [r for r in requests if r.text not in self.script]
            if missing:
                raise ValueError(f"request {missing[0].key}: the script has no clip for {missing[0].text!r}")
            done = []
            for i, req in enumerate(requests):
                take, clip = self.clip_for(req)
                self.calls.append((req.key, req.text, take, clip.name))
                audio, tokens = padded(clip.audio)
                done.append((len(audio), i, Result(key=req.key, audio=audio, tokens=tokens)))
            rounds.append([(r.text, self.take_of(r)) for r in requests])
            self.last_batch_sizes.append(len(requests))
            for _, _, res in sorted(done, key=lambda d: d[:2]):
                if progress is not None:
                    progress(res)
                yield res
            requests = []


def _is_an_engine(engine: SpeechEngine) -> Synthesizer:
    """mypy's check that the stand-in has the engine's surface the stages use (engine.api.Synthesizer)."""
    return engine
