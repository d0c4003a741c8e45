"""RenderOptions: a render's settings, composed of each stage's own options dataclass (each stage module
holds its defaults; this is where they meet).  The CLI, the flow and the tests build one of these."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.api import DeviceUnavailable, EngineOptions
from engine.device import cuda_problem
from engine.voice import VoiceSpec
from tasks.audio.assemble import AssembleOptions
from tasks.audio.options import PackageOptions
from tasks.book import LANGUAGE_CHOICES, LANGUAGES
from tasks.bookdir import book_slug
from tasks.fleet import storage
from tasks.qa.options import QAOptions
from tasks.synthesize.guard import GuardOptions
from tasks.text.normalize import Lexicon
from tasks.text.segment import SegmentOptions
from tasks.voice.cast import Cast, load_cast
from tasks.voice.voices import parse_voice

DEFAULT_OUT = Path("output")          # relative to the working directory


@dataclass(frozen=True)
class RenderOptions:
    book: Path
    out: Path = DEFAULT_OUT
    voice: VoiceSpec | None = None    # None: the voice stored in the manifest, else DEFAULT_VOICE
    voice_anchor: bool = False        # condition every segment on the voice's own reference rendering
    engine: EngineOptions = field(default_factory=EngineOptions)
    segment: SegmentOptions = field(default_factory=SegmentOptions)
    assemble: AssembleOptions = field(default_factory=AssembleOptions)
    package: PackageOptions = field(default_factory=PackageOptions)
    guard: GuardOptions = field(default_factory=GuardOptions)   # duration check and re-rolls per segment
    allow_gaps: bool = False          # assemble chapters even when some segments failed (silence instead)
    chapters: tuple[int, ...] = ()    # 1-based chapter numbers to render (a preview); () renders all
    cast: Cast | None = None          # voices per role and character (tasks/voice/cast.py); None: one narrator
    store: str | None = None          # an output root URL (tasks/fleet/storage.py); `out` is then its scratch folder
    qa: QAOptions | None = None       # proof of every segment (tasks/qa); None: full for a real model, off for random
    language: str = "auto"            # --language: auto | zh | en, resolved per book by prepare (segment.book_options)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.language not in LANGUAGE_CHOICES:
            raise ValueError(f"--language {self.language!r}: must be one of {', '.join(LANGUAGE_CHOICES)}")
        if self.cast is not None and self.cast.narrator is not None and self.voice is not None:
            raise ValueError(f"--voice and the narrator of {self.cast.path} both choose the narrator's voice; "
                             "keep one")

    @property
    def book_dir(self) -> Path:
        return self.out / book_slug(self.book)


def options_from_params(book: str, out: str | None = None, model: str | None = None, voice: str | None = None,
                        formats: list[str] | tuple[str, ...] | None = None, device: str | None = None,
                        dtype: str | None = None, int8: bool = False, compile: bool = False,
                        max_batch: int | None = None, threads: int | None = None,
                        allow_gaps: bool = False, chapters: str | None = None, lexicon: str | None = None,
                        t2s: bool = True, guard: bool = True, guard_attempts: int | None = None,
                        clip_text: str | None = None, voice_anchor: bool = False,
                        cast: str | None = None, scratch: str | None = None, qa: str | None = None,
                        asr_model: str | None = None, language: str | None = None) -> RenderOptions:
    """RenderOptions from plain values (CLI arguments, flow/deployment parameters); None keeps the default.
    device "auto" (the deployments' default): cuda when this process sees a GPU (CUDA_VISIBLE_DEVICES), else cpu;
    "cuda" where there is none: DeviceUnavailable (before the book is fetched).
    `qa`: off | suspect | full (None: by the model, tasks.stages.qa_options); `asr_model` alone keeps that default.
    `language`: the book's reading language, auto | zh | en (None: auto; resolved per book by prepare).
    `cast`: a cast file (tasks/cast.load_cast: BookError when it cannot be used).  `out` or `book` as a store
    URL (tasks/fleet/storage.py): the book is downloaded and the render works in `scratch` (default: a cache folder)."""
    from dataclasses import replace

    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"

    eng = EngineOptions()       # first: a usage error or a missing GPU is named before the book is fetched or read
    eng = replace(eng, **{k: v for k, v in dict(model=model, device=device, dtype=dtype, max_batch=max_batch,
                                                 threads=threads).items() if v is not None},
                  int8=int8, compile=compile)
    if eng.device == "cuda" and (problem := cuda_problem()) is not None:
        raise DeviceUnavailable(f"--device {eng.device}: {problem}")

    store = out if storage.is_url(out) else None
    out = storage.scratch_root(scratch, store) if store else out and storage.local_path(str(out))
    book = str(storage.fetch_book(book, scratch)) if storage.is_url(book) else storage.local_path(str(book))
    pkg = PackageOptions() if formats is None else replace(PackageOptions(), formats=tuple(
        f.strip().lower() for f in formats if f.strip()))
    seg = replace(SegmentOptions(), t2s=t2s, lexicon=load_lexicon(Path(book), lexicon),   # a clip's transcript too
                  **({"lang": language} if language in LANGUAGES else {}))        # auto: prepare resolves it
    grd = replace(GuardOptions(), enabled=guard, **({} if guard_attempts is None else {"max_attempts": guard_attempts}))
    qa_opts = None if qa is None and asr_model is None else QAOptions(
        mode=qa or "full", device=eng.device, **({} if asr_model is None else {"asr_model": asr_model}))
    if clip_text is not None and voice is None:
        raise ValueError("--clip-text is the transcript of a --voice clip:PATH recording")
    return RenderOptions(book=Path(book), out=Path(out) if out else DEFAULT_OUT,
                         voice=parse_voice(voice, clip_text, seg) if voice is not None else None, engine=eng,
                         segment=seg, package=pkg, guard=grd, allow_gaps=allow_gaps,
                         chapters=parse_chapters(chapters) if chapters else (), voice_anchor=voice_anchor,
                         cast=load_cast(cast) if cast else None, store=store, qa=qa_opts,
                         language=language or "auto")


def parse_chapters(spec: str) -> tuple[int, ...]:
    """"1-3,7" -> (1, 2, 3, 7): 1-based chapter numbers (ValueError naming the bad part)."""
    out: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or int(lo) < 1 or (hi and int(hi) < int(lo)):
            raise ValueError(f"--chapters {spec!r}: {part!r} is not N or N-M (chapters count from 1)")
        out.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(out))


GLOBAL_LEXICON = Path("~/.config/chattts-render/lexicon.tsv")   # or $CHATTTS_RENDER_LEXICON


def lexicon_paths(book: Path, explicit: str | None = None) -> list[Path]:
    """The lexicons that apply, in order (later entries win): the global one, the book's
    (`<book stem>.lexicon.tsv` beside the book), then an explicit --lexicon file."""
    glob = Path(os.environ.get("CHATTTS_RENDER_LEXICON", GLOBAL_LEXICON)).expanduser()
    paths = [p for p in (glob, book.with_name(book.stem + ".lexicon.tsv")) if p.is_file()]
    if explicit:
        paths.append(Path(explicit))          # must exist: Lexicon.load names it when it does not
    return paths


def load_lexicon(book: Path, explicit: str | None = None):
    paths = lexicon_paths(book, explicit)
    return Lexicon.load(*paths) if paths else None
