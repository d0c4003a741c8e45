"""Audition: candidate voices read one passage of the book before a 20-hour render is committed to.

    heard = audition(book, book_dir, AuditionOptions(count=6), get_engine)   # an Audition: what was rendered
    write_audition(book_dir, heard)      # tasks/site/audition.py: OUT/<book>/voices/ (a file a candidate, the page)

The passage is the first ~15 s of the book's first chapter after normalization (or `text`, normalized the same
way).  Candidates: the book's stored voice (when it was rendered into OUT), every saved voice
(tasks/voice/voices.py), then `seed:S` … `seed:S+N-1`; a voice that sounds the same as an earlier one (the same voice
string) is listed once.  Each candidate is rendered like a segment — seed plan.derive_seed(passage, voice),
content key plan.content_key, the quality guard, audio in the book's content-addressed `segments/` — so the
same passage in the same voice is never rendered twice (a segment of the book with the same text is that same
audio).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.api import Request, Synthesizer
from engine.units import SAMPLE_RATE, estimate_seconds, speakable_chars
from engine.voice import VoiceError, VoiceSpec, parse_voice_spec
from manifests.store import load
from tasks.book import Book
from tasks.bookdir import audio_relpath
from tasks.errors import BookError
from tasks.ingest import load_book
from tasks.plan.rows import content_key, derive_seed
from tasks.synthesize.options import AuditionOptions, GuardOptions
from tasks.synthesize.render import render_guarded
from tasks.synthesize.segment_audio import write_segment_audio
from tasks.text.normalize import normalize
from tasks.text.segment import SegmentOptions, book_options, segment_chapter
from tasks.voice.voices import saved_voices, voice_id

if TYPE_CHECKING:
    import numpy as np

AUDITION_SECONDS = 15.0            # s: the default passage is the first chapter's pieces up to this long
PIECE_SECONDS = 8.0                # s: the pieces it is packed from (the segmenter's target for the passage)
MAX_PASSAGE_SECONDS = 25.0         # s: never longer than this
BOOK_VOICE_NAME = "book"           # the candidate that is the book's stored voice


@dataclass(frozen=True)
class Candidate:
    name: str                      # "seed:2222", a saved voice's name, "book"
    spec: VoiceSpec
    flag: str                      # the --voice value that selects it
    seed: int | None = None        # the voice's seed, for seed candidates


def passage(book: Book, segment: SegmentOptions, text: str | None = None) -> str:
    """The audition passage, normalized as the book's text is (`segment`: SegmentOptions).  BookError when
    nothing of it can be spoken."""
    if text is not None:
        out = normalize(text, segment.normalize).strip()
    else:
        pieces = segment_chapter(book.chapters[0], opts=replace(segment, target_seconds=PIECE_SECONDS,
                                                                max_seconds=max(PIECE_SECONDS, segment.min_seconds)))
        out = ""
        for p in pieces:
            longer = out + p.text
            if out and (estimate_seconds(longer) > MAX_PASSAGE_SECONDS or len(longer) > segment.max_chars):
                break
            out = longer
            if estimate_seconds(out) >= AUDITION_SECONDS:
                break
    if speakable_chars(out) == 0:
        raise BookError(book.meta.source_path, "the audition passage has nothing to speak"
                        + (" (--text)" if text is not None else " (first chapter)"))
    if text is not None and (estimate_seconds(out) > MAX_PASSAGE_SECONDS or len(out) > segment.max_chars):
        raise BookError(book.meta.source_path, f"the audition passage (--text) reads ~{estimate_seconds(out):.0f} s "
                        f"({len(out)} characters); at most {MAX_PASSAGE_SECONDS:g} s and {segment.max_chars} "
                        "characters")
    return out


def candidates(aud: AuditionOptions, stored: str | None) -> tuple[list[Candidate], list[str]]:
    """(candidates in page order, notes on saved voices that cannot be used)."""

    out, notes = [], []
    if stored:
        out.append(Candidate(BOOK_VOICE_NAME, parse_voice_spec(stored), stored))
    for e in saved_voices():
        if e["problem"]:
            notes.append(f"saved voice {e['name']} skipped: {e['problem']}")
        else:
            spec = parse_voice_spec(e["name"])
            out.append(Candidate(e["name"], spec, e["name"], seed=spec.seed))
    for s in range(aud.from_seed, aud.from_seed + aud.count):
        out.append(Candidate(f"seed:{s}", VoiceSpec(f"seed:{s}", seed=s), f"seed:{s}", seed=s))
    return out, notes


@dataclass(frozen=True)
class Audition:
    """A rendered audition: what tasks/site/audition.py writes into voices/ and shows on its page."""
    book: str                                        # the book's title
    text: str                                        # the passage, normalized
    engine: str                                      # the engine's version
    picked: list[tuple[str, Candidate, str]]         # (voice string, candidate, content key), in page order
    failed: dict[str, tuple[np.ndarray, str]]        # content key -> (its last rendering, why the guard failed it)
    rendered: int                                    # candidates rendered now (the others: from the cache)
    notes: list[str]                                 # candidates skipped, and why


def audition(path: Path, book_dir: Path, aud: AuditionOptions, get_engine: Callable[[], Synthesizer],
             segment: SegmentOptions = SegmentOptions(), language: str = "auto",
             guard: GuardOptions = GuardOptions()) -> Audition:
    """Render the audition of the book at `path` (see the module docstring), its text read as a render reads it
    (`segment`, `language`), each candidate checked by the duration `guard`; accepted audio is cached in book_dir's
    segments/.  The caller holds the book's lock."""
    book = load_book(path)                               # BookError: nothing written yet
    text = passage(book, book_options(book, segment, language), aud.text)   # the book's reading language
    rows = load(book_dir).to_pylist() if book_dir.exists() else []
    cands, notes = candidates(aud, rows[0]["spk_emb"] if rows else None)
    engine = get_engine()
    picked, todo = _pick(book_dir, engine, cands, text, notes)
    failed: dict[str, tuple[np.ndarray, str]] = {}
    for key, audio, reason, _attempt in render_guarded(engine, todo, guard):
        if reason:                                       # heard on the page, never cached as a segment
            failed[key] = (audio, reason)
        else:
            write_segment_audio(book_dir / audio_relpath(key), audio, SAMPLE_RATE)
    return Audition(book.meta.title, text, engine.version, picked, failed, len(todo), notes)


def _pick(book_dir: Path, engine: Synthesizer, cands: list[Candidate], text: str,
          notes: list[str]) -> tuple[list[tuple[str, Candidate, str]], dict[str, Request]]:
    """(each distinct voice's (voice string, candidate, content key), what to render: content key -> what the
    engine is given, for those not in the cache); a candidate whose voice does not resolve is noted and left out."""
    picked: dict[str, tuple[Candidate, str]] = {}        # voice string -> (candidate, content key)
    todo: dict[str, Request] = {}
    for c in cands:
        try:
            voice = engine.resolve_voice(c.spec)
        except VoiceError as e:
            notes.append(f"{c.name} skipped: {e}")
            continue
        if voice in picked:
            continue
        seed = derive_seed(text, voice_id(voice))
        keys = [content_key(text, voice_id(voice), seed, v) for v in (engine.version, *engine.adopts)]
        key = next((k for k in keys if (book_dir / audio_relpath(k)).is_file()), keys[0])   # adopted audio too
        picked[voice] = (c, key)
        if not (book_dir / audio_relpath(key)).is_file():
            todo[key] = Request(key, text, voice, seed)
    return [(v, c, k) for v, (c, k) in picked.items()], todo
