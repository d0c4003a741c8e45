"""RenderOptions: a render's settings, composed of each stage's own options dataclass (each stage module
holds its defaults; this is where they meet).  flows/options.py builds one from a render's parameters
(flows/params.py); tests build them directly."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.api import EngineOptions, Refine
from engine.voice import VoiceSpec
from tasks.audio.assemble import AssembleOptions
from tasks.audio.options import PackageOptions
from tasks.bookdir import DEFAULT_OUT, book_slug
from tasks.ingest.matter import MatterOptions
from tasks.plan.direction import Direction
from tasks.plan.prepare import PrepareOptions
from tasks.qa.options import QAOptions
from tasks.synthesize.options import SCHEDULES, GuardOptions, Schedule
from tasks.text.lexicon import Lexicon
from tasks.text.segment import SegmentOptions
from tasks.voice.cast import Cast


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
    qa: QAOptions | None = None       # proof of every segment (tasks/qa); None: auto (tasks.stages.resolve_qa)
    language: str = "auto"            # --language: auto | zh | en, resolved per book by prepare (segment.book_options)
    matter: MatterOptions = field(default_factory=MatterOptions)   # --include / --skip (tasks/ingest/matter.py)
    speed: int | None = None          # --speed: the book's pace (None: each voice's own, else 5)
    refine: Refine | None = None      # --refine at its levels; None: no refine-text pass
    direction: Direction | None = None   # per-line controls (tasks/plan/direction.py)
    schedule: Schedule = "length"          # the order rows start in: length | chapters (tasks/synthesize/render.py)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid (its parts check their own on construction,
        the book's language and voices too: PrepareOptions)."""
        _ = self.prepare
        if self.schedule not in SCHEDULES:
            raise ValueError(f"--schedule {self.schedule!r}: must be one of {', '.join(SCHEDULES)}")

    @property
    def book_dir(self) -> Path:
        return self.out / book_slug(self.book)

    @property
    def prepare(self) -> PrepareOptions:
        return PrepareOptions(book=self.book, language=self.language, segment=self.segment, voice=self.voice,
                              cast=self.cast, chapters=self.chapters, matter=self.matter, speed=self.speed,
                              refine=self.refine, direction=self.direction)


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
