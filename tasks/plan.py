"""Plan: turn a segmented book into manifest rows — content keys, per-segment seeds, what is already done.

A segment's audio depends only on (text, voice, seed, engine version), so the content key hashes exactly
those, and the audio file is named by it.  The seed is derived from (text, voice) alone: the same sentence
in the same voice always gets the same seed, wherever it sits and whatever it is batched with.  An edited
book re-plans; every segment whose key already has audio on disk is adopted as done, the rest are pending.

Incremental re-render: editing a paragraph changes only the keys of the segments cut from it (a segment's
key never depends on its neighbours or its position), so only those are rendered again; a new voice or
engine version changes every key, so everything is rendered again — except that an engine keeps the audio of
the earlier versions it adopts (`Engine.adopts`: the same model and settings, only the arithmetic's rounding
changed): a done segment of such a version stays done under its old key, and only what is not rendered yet
renders with the new engine (its rows record which engine made their audio).  Audio of keys no longer in the plan is
kept on disk: `segments/` is a content-addressed cache, and undoing an edit (or switching back to a voice)
reuses it without rendering.  Delete `segments/` by hand to reclaim the space (the next render re-renders).
"""
from __future__ import annotations

import hashlib
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from tasks.book import ROLE_NARRATOR, Book, Segment
from manifests.crashpoints import crashpoint

SEGMENTS_DIRNAME = "segments"
AUDIO_EXT = ".flac"


@lru_cache(maxsize=256)
def voice_id(spk_emb: str) -> str:
    return hashlib.sha256(spk_emb.encode()).hexdigest()[:16]


def derive_seed(text: str, vid: str) -> int:
    """A 63-bit seed from the segment's text and the book's voice."""
    h = hashlib.sha256(f"seed\x1f{vid}\x1f{text}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def content_key(text: str, vid: str, seed: int, engine_version: str) -> str:
    return hashlib.sha256(f"{text}\x1f{vid}\x1f{seed}\x1f{engine_version}".encode()).hexdigest()[:32]


def audio_relpath(key: str) -> str:
    return f"{SEGMENTS_DIRNAME}/{key[:2]}/{key}{AUDIO_EXT}"


def plan_rows(book: Book, segments: Sequence[Segment], spk_emb: str, engine_version: str,
              book_dir: Path, previous: dict[str, dict] | None = None, guard=None,
              voice_of: Callable[[str, str], str] | None = None, adopts: Sequence[str] = ()) -> list[dict]:
    """Manifest rows for a new plan.  `previous` maps content_key -> latest row of the old plan (if any):
    a key that was done and whose audio is on disk stays done with its sample count and attempts; a key the
    guard failed after all of `guard`'s attempts (GuardOptions) stays failed.  Every segment speaks with
    `spk_emb`, or with voice_of(role, speaker) (a cast: tasks/cast.CastVoices.voice_of).  A segment not done
    under `engine_version` whose key under one of the `adopts` versions is done (audio on disk) keeps that row's
    key, audio and engine version."""
    from manifests import STATUS_DONE, STATUS_FAILED, STATUS_PENDING
    from tasks.guard import GuardOptions, is_final_failure

    guard = guard or GuardOptions()
    titles = {c.index: c.title for c in book.chapters}
    plan_id = uuid.uuid4().hex[:12]
    previous = previous or {}

    def is_done(key: str) -> bool:
        old = previous.get(key)
        return old is not None and old["status"] == STATUS_DONE and (book_dir / audio_relpath(key)).is_file()

    rows = []
    for s in segments:
        emb = voice_of(s.role, s.speaker) if voice_of else spk_emb
        vid = voice_id(emb)
        seed = derive_seed(s.text, vid)
        keys = {v: content_key(s.text, vid, seed, v) for v in (engine_version, *adopts)}
        done_as = next((v for v, k in keys.items() if is_done(k)), None)   # ours first, then the adopted
        done, version = done_as is not None, done_as or engine_version      # not done: render under ours
        key = keys[version]
        rel, old = audio_relpath(key), previous.get(key)
        hopeless = not done and old is not None and is_final_failure(old, guard)   # same audio again
        rows.append({
            "plan_id": plan_id, "chapter": s.chapter, "chapter_title": titles.get(s.chapter, ""),
            "segment": s.index, "text": s.text, "source_text": s.source_text, "pause_after": s.pause_after,
            "content_key": key, "audio_path": rel,
            "status": STATUS_DONE if done else STATUS_FAILED if hopeless else STATUS_PENDING,
            "samples": old["samples"] if done else 0, "duration_s": old["duration_s"] if done else 0.0,
            "voice_id": vid, "spk_emb": emb, "seed": seed, "engine_version": version,
            "error": old["error"] if hopeless else "", "attempts": old["attempts"] if done or hopeless else 0,
            "role": s.role, "speaker": s.speaker,
        })
    return rows


BOOK_JSON = "book.json"
COVERAGE_JSON = "coverage.json"
TEXT_JSON = "text.json"        # every chapter's original title and paragraphs (read-along outputs)


def prepare_book(opts, get_engine) -> Path:
    """Ingest, normalize, segment and audit the book, then commit a new plan when it changed.

    Everything that can fail on bad input happens before anything is written (or the model is loaded), so a
    bad book leaves the output folder exactly as it was.  Returns the book directory."""
    from engine.atomic import write_bytes
    from manifests import commit, load
    from tasks.ingest import load_book
    from tasks.voices import book_voice

    book = load_book(opts.book)                     # BookError on bad input: nothing written yet
    runs = cast_runs(book) if opts.cast else None   # the whole book's names, also for a preview
    if opts.chapters:
        book = select_chapters(book, opts.chapters)
    crashpoint("ingest")
    segments, reports = segment_book(book, opts.segment, runs)   # BookError when characters vanished
    book_dir = opts.book_dir
    old = load(book_dir).to_pylist() if book_dir.exists() else []
    engine = get_engine()                            # only a good book loads the model
    stored = next((r for r in old if r["role"] == ROLE_NARRATOR), old[0])["spk_emb"] if old else None
    spk_emb = book_voice(opts.voice or (opts.cast and opts.cast.narrator), stored, engine, opts.voice_anchor,
                         opts.guard)                # the narrator's (a cast's dialogue has its own voices)
    voice_of = None
    if opts.cast:
        from tasks.cast import resolve_cast

        voice_of = resolve_cast(opts.cast, spk_emb, engine.loaded).voice_of
    rows = plan_rows(book, segments, spk_emb, engine.version, book_dir,
                     previous={r["content_key"]: r for r in old}, guard=opts.guard, voice_of=voice_of,
                     adopts=engine.adopts)
    book_dir.mkdir(parents=True, exist_ok=True)
    if _plan_signature(rows) != _plan_signature(old):
        commit(book_dir, rows)
    info = book_info(book)
    if book.meta.cover:
        ext = "png" if book.meta.cover[:4] == b"\x89PNG" else "jpg"
        info["cover_file"] = f"cover.{ext}"
        write_bytes(book_dir / info["cover_file"], book.meta.cover, keep_same=True)   # unchanged: untouched
    write_bytes(book_dir / COVERAGE_JSON, _json_bytes([r.to_dict() for r in reports]), keep_same=True)
    write_bytes(book_dir / BOOK_JSON, _json_bytes(info), keep_same=True)
    write_bytes(book_dir / TEXT_JSON, _json_bytes(text_info(book)), keep_same=True)
    return book_dir


def cast_runs(book: Book) -> dict:
    """A cast's runs: chapter -> paragraph -> narration and quotes with their speakers (tasks/text/quotes)."""
    from tasks.text.quotes import attribute_book, book_runs

    return book_runs(book, attribute_book(book))


def segment_book(book: Book, opts=None, runs: dict | None = None) -> tuple[list[Segment], list]:
    """Every chapter's segments and its coverage report.  A chapter whose characters vanished without a
    listed reason stops the render before it starts (BookError naming the chapter and the text).  `runs`:
    a cast's (cast_runs)."""
    from tasks.errors import BookError
    from tasks.text.coverage import audit_chapter
    from tasks.text.segment import SegmentOptions, segment_chapter

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
    from dataclasses import replace

    from tasks.errors import BookError

    n = len(book.chapters)
    if max(numbers) > n:
        raise BookError(book.meta.source_path, f"--chapters asks for chapter {max(numbers)}, the book has {n}")
    return replace(book, chapters=tuple(c for c in book.chapters if c.index + 1 in set(numbers)))


def _plan_signature(rows: list[dict]) -> list[tuple]:
    return [(r["chapter"], r["segment"], r["content_key"], r["pause_after"], r["source_text"],
             r["chapter_title"], r["role"], r["speaker"]) for r in rows]


def book_info(book: Book) -> dict:
    m = book.meta
    return {"title": m.title, "author": m.author, "language": m.language, "source_path": m.source_path,
            "source_format": m.source_format, "encoding": m.encoding, "cover_mime": m.cover_mime,
            "chapters": [{"index": c.index, "title": c.title} for c in book.chapters]}


def text_info(book: Book) -> dict:
    return {"chapters": [{"index": c.index, "title": c.title, "paragraphs": list(c.paragraphs)}
                         for c in book.chapters]}


def load_text(book_dir: Path) -> dict[int, list[str]] | None:
    """Each chapter's units (title, paragraphs: tasks.text.segment.chapter_units) from text.json, for
    packaging without the book; None for a book planned before text.json was written."""
    import json

    from tasks.book import Chapter
    from tasks.text.segment import chapter_units

    try:
        info = json.loads((book_dir / TEXT_JSON).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return {c["index"]: chapter_units(Chapter(c["index"], c["title"], tuple(c["paragraphs"])))
            for c in info["chapters"]}


def _json_bytes(data) -> bytes:
    import json

    return json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")


def load_meta(book_dir: Path):
    """BookMeta (cover included) and chapter titles from book.json, for packaging without the book."""
    import json

    from tasks.book import BookMeta

    info = json.loads((book_dir / BOOK_JSON).read_text(encoding="utf-8"))
    cover = (book_dir / info["cover_file"]).read_bytes() if info.get("cover_file") else None
    meta = BookMeta(title=info["title"], author=info["author"], language=info["language"],
                    source_path=info["source_path"], source_format=info["source_format"],
                    encoding=info["encoding"], cover=cover, cover_mime=info.get("cover_mime", ""))
    return meta, {c["index"]: c["title"] for c in info["chapters"]}
