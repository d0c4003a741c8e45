"""Prepare: read the book, normalize and segment it, prove nothing was lost, and commit a new plan when it changed.

    book_dir = prepare_book(PrepareOptions(book), book_dir, get_engine)   # tasks/stages.py: max_attempts, anchor

Everything that can fail on bad input happens before anything is written (or the model is loaded), so a bad book
leaves the output folder exactly as it was.  The engine is loaded only to resolve the voice (sample a speaker,
encode a clip); nothing here renders audio: an anchored voice (`--voice-anchor`) is rendered by the synthesize
stage, whose `anchor` function the composition passes in.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.api import DEFAULT_SPEED, SPEEDS, Controls, Refine, Synthesizer
from engine.atomic import write_bytes
from engine.voice import VoiceSpec
from manifests.crashpoints import crashpoint
from manifests.store import commit, load
from tasks.book import LANGUAGE_CHOICES, ROLE_NARRATOR, Book, Language, Segment
from tasks.bookdir import (
    BOOK_JSON,
    COVERAGE_JSON,
    FIXES_JSON,
    READING_LANGUAGE,
    TEXT_JSON,
    book_json,
    cover_file,
    json_bytes,
    text_json,
)
from tasks.errors import BookError
from tasks.ingest import load_book
from tasks.ingest.matter import MatterOptions
from tasks.plan.direction import Direction, direct, directed_segments
from tasks.plan.fixes import load_fixes, match_fixes, parse_name, save_fixes
from tasks.plan.rows import MAX_ATTEMPTS, plan_rows
from tasks.text.coverage import CoverageReport, audit_chapter
from tasks.text.inspect import set_aside_entry
from tasks.text.quotes import attribute_book, book_runs
from tasks.text.segment import SegmentOptions, book_options, segment_chapter
from tasks.voice.cast import Cast, resolve_cast
from tasks.voice.voices import book_voice

UNDETERMINED = ("", "und")               # language tags that say nothing: the reading language replaces them

Anchor = Callable[[str, "str | None", Synthesizer], str]   # (voice, stored voice, engine) -> the anchored voice string


@dataclass(frozen=True)
class PrepareOptions:
    """What the plan is made from: the book, how it is read, and its voices."""
    book: Path
    language: str = "auto"            # --language: auto | zh | en, resolved per book (segment.book_options)
    segment: SegmentOptions = field(default_factory=SegmentOptions)
    voice: VoiceSpec | None = None    # None: the voice stored in the manifest, else DEFAULT_VOICE
    cast: Cast | None = None          # voices per role and character (tasks/voice/cast.py); None: one narrator
    chapters: tuple[int, ...] = ()    # 1-based chapter numbers to render (a preview); () renders all
    matter: MatterOptions = field(default_factory=MatterOptions)   # what is set aside (tasks/ingest/matter.py)
    speed: int | None = None          # --speed: the book's pace for voices without their own (None: 5)
    refine: Refine | None = None      # --refine: upstream's refine-text pass at these levels; None: skipped
    direction: Direction | None = None   # per-line controls (tasks/plan/direction.py)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.speed is not None and self.speed not in SPEEDS:
            raise ValueError(f"--speed {self.speed}: must be 0..9 (ChatTTS's [speed_N]; 5 is its default)")
        if self.language not in LANGUAGE_CHOICES:
            raise ValueError(f"--language {self.language!r}: must be one of {', '.join(LANGUAGE_CHOICES)}")
        if self.cast is not None and self.cast.narrator is not None and self.voice is not None:
            raise ValueError(f"--voice and the narrator of {self.cast.path} both choose the narrator's voice; "
                             "keep one")


def prepare_book(opts: PrepareOptions, book_dir: Path, get_engine: Callable[[], Synthesizer],
                 max_attempts: int = MAX_ATTEMPTS,
                 anchor: Anchor | None = None) -> Path:
    """Ingest, normalize, segment and audit the book, then commit a new plan into book_dir when it changed; returns
    book_dir.  `max_attempts`: the duration guard's (a row it failed that often stays failed); `anchor`: conditions
    the narrator's voice on its own rendering (with --voice-anchor: tasks.synthesize.anchor)."""
    book = load_book(opts.book, matter=opts.matter)  # BookError on bad input: nothing written yet
    seg = book_options(book, opts.segment, opts.language)       # the reading language, from the whole book
    book = tagged(book, seg.lang)
    runs = cast_runs(book) if opts.cast else None   # the whole book's names, also for a preview
    if opts.chapters:
        book = select_chapters(book, opts.chapters)
    crashpoint("ingest")
    segments, reports = segment_book(book, seg, runs)   # BookError when characters vanished
    segments, directed, notes = direct_book(opts, segments)   # BookError naming a direction file's bad line
    old = load(book_dir).to_pylist() if book_dir.exists() else []
    engine = get_engine()                            # only a good book loads the model
    fixes = load_fixes(book_dir)                     # `chattts-render fix`: per-segment overrides
    voiced = {parse_name(n) for n, f in fixes.items() if f.voice is not None}   # their voice is not the book's
    own = [r for r in old if (r["chapter"], r["segment"]) not in voiced] or old
    stored = next((r for r in own if r["role"] == ROLE_NARRATOR), own[0])["spk_emb"] if own else None
    spk_emb = book_voice(opts.voice or (opts.cast.narrator if opts.cast else None), stored, engine)
    if anchor is not None:                           # the narrator's (a cast's dialogue has its own voices)
        spk_emb = anchor(spk_emb, stored, engine)
    voice_of = resolve_cast(opts.cast, spk_emb, engine.resolve_voice).voice_of if opts.cast else None
    overrides, dropped = match_fixes(fixes, segments)
    rows = plan_rows(book, segments, spk_emb, engine.version, book_dir,
                     previous={r["content_key"]: r for r in old}, max_attempts=max_attempts, voice_of=voice_of,
                     adopts=engine.adopts, fixes=overrides,
                     previous_at={(r["chapter"], r["segment"]): r for r in old}, directed=directed)
    for note in notes:
        print(f"chattts-render: note: {note}", file=sys.stderr)
    book_dir.mkdir(parents=True, exist_ok=True)
    if dropped:                                      # the book changed there: never apply a fix to another sentence
        save_fixes(book_dir, {n: f for n, f in fixes.items() if n not in dropped})
        print(f"chattts-render: note: {book_dir / FIXES_JSON}: dropped the fix of segment(s) {', '.join(dropped)}: "
              "the book's text there changed since the fix was made", file=sys.stderr)
    if _plan_signature(rows) != _plan_signature(old):
        commit(book_dir, rows)
    info = {**book_json(book), READING_LANGUAGE: seg.lang}    # what fix, the QA page and a re-package read back
    if book.meta.cover:
        info["cover_file"] = cover_file(book.meta.cover)
        write_bytes(book_dir / info["cover_file"], book.meta.cover, keep_same=True)   # unchanged: untouched
    write_bytes(book_dir / COVERAGE_JSON, json_bytes(coverage_json(reports, book)), keep_same=True)
    write_bytes(book_dir / BOOK_JSON, json_bytes(info), keep_same=True)
    write_bytes(book_dir / TEXT_JSON, json_bytes(text_json(book)), keep_same=True)
    return book_dir


def coverage_json(reports: Sequence[CoverageReport], book: Book) -> dict:
    """coverage.json: every chapter's audit, and every item set aside with why (never silently dropped)."""
    return {"chapters": [r.to_dict() for r in reports], "set_aside": [set_aside_entry(s) for s in book.set_aside]}


def direct_book(opts: PrepareOptions, segments: list[Segment]) -> tuple[list[Segment], dict, list[str]]:
    """The segments as directed (tasks/plan/direction.py: insertions in their text), each one's controls and pause
    by (chapter, segment), and notes.  A segment's speed: its direction's, else its voice's own (a saved voice's or
    a cast part's), else --speed, else 5; --refine's levels for all."""
    speed_of = voice_speeds(opts)

    def base(s: Segment) -> Controls:
        own = speed_of(s.role, s.speaker)
        return Controls(speed=own if own is not None else opts.speed if opts.speed is not None else DEFAULT_SPEED,
                        refine=opts.refine)

    lines = direct(segments, opts.direction, base_of=base, check_names=not opts.chapters)
    return directed_segments(segments, lines)


def voice_speeds(opts: PrepareOptions):
    """(role, speaker) -> the speed of the voice that speaks it, when that voice carries one: a cast part's spec
    (its table's `speed`, or its saved voice's), else the narrator's (--voice, the cast's narrator) for every part
    that speaks in the narrator's voice; None when the voice has none."""
    narrator = opts.voice or (opts.cast.narrator if opts.cast else None)

    def speed_of(role: str, speaker: str) -> int | None:
        spec = narrator
        if opts.cast is not None:
            part = opts.cast.part(role, speaker)
            own = opts.cast.spec(part)
            spec = own if own is not None else spec
        return spec.speed if spec is not None else None
    return speed_of


def tagged(book: Book, lang: Language) -> Book:
    """The book with an undetermined language tag ("und", "") replaced by its reading language, so the M4B/EPUB
    language tags say it; a declared tag is kept as it is."""
    if book.meta.language.strip().lower() not in UNDETERMINED:
        return book
    return replace(book, meta=replace(book.meta, language=lang))


def cast_runs(book: Book) -> dict:
    """A cast's runs: chapter -> paragraph -> narration and quotes with their speakers (tasks/text/quotes)."""
    return book_runs(book, attribute_book(book))


def segment_book(book: Book, opts: SegmentOptions | None = None,
                 runs: dict | None = None) -> tuple[list[Segment], list]:
    """Every chapter's segments and its coverage report.  A chapter whose characters vanished without a
    listed reason stops the render before it starts (BookError naming the chapter and the text).  `runs`:
    a cast's (cast_runs)."""
    opts = opts or SegmentOptions()
    segments, reports = [], []
    for chapter in book.chapters:
        segs = segment_chapter(chapter, opts=opts, runs=(runs or {}).get(chapter.index))
        rep = audit_chapter(chapter, segs, opts=opts)
        if not rep.ok:
            u = rep.unexplained[0]
            raise BookError(book.meta.source_path or book.meta.title,
                            f"chapter {chapter.index + 1} ({chapter.title[:30]!r}): text would be lost at "
                            f"position {u['pos']}: {u['problem']} ({len(rep.unexplained)} such places)")
        segments += segs
        reports.append(rep)
    return segments, reports


def select_chapters(book: Book, numbers: Sequence[int]) -> Book:
    """Only the chapters with these 1-based numbers (their indices stay those of the whole book)."""
    n = len(book.chapters)
    if max(numbers) > n:
        raise BookError(book.meta.source_path, f"--chapters asks for chapter {max(numbers)}, the book has {n}")
    return replace(book, chapters=tuple(c for c in book.chapters if c.index + 1 in set(numbers)))


def _plan_signature(rows: list[dict]) -> list[tuple]:
    return [(r["chapter"], r["segment"], r["content_key"], r["pause_after"], r["source_text"],
             r["chapter_title"], r["role"], r["speaker"]) for r in rows]
