"""The pipeline's stages as plain functions over a book directory.  flows/ composes them — directly for the
CLI, as Prefect tasks for the flow — and tests call them without a server.  Stages pass paths and ids."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from tasks.options import RenderOptions

_engine_lock = threading.Lock()
_engines: dict = {}


def get_engine(opts: RenderOptions):
    """The process's engine for these options, loaded once behind a lock (threads share it)."""
    key = opts.engine
    with _engine_lock:
        if key not in _engines:
            from engine.engine import Engine

            _engines[key] = Engine.load(opts.engine)
        return _engines[key]


def prepare(opts: RenderOptions) -> Path:
    """ingest → normalize → segment → audit → plan; returns the book dir."""
    from tasks.plan import prepare_book

    return prepare_book(opts, lambda: get_engine(opts))


def synthesize(book_dir: Path, opts: RenderOptions,
               on_done: Callable[[int, int], None] | None = None) -> dict:
    from manifests import compact
    from tasks.synthesize import synthesize_book

    counts = synthesize_book(Path(book_dir), get_engine(opts), on_done=on_done)
    compact(book_dir)
    return counts


def package(book_dir: Path, opts: RenderOptions) -> Path:
    """Assemble every chapter from its stored segment audio and write the outputs (chapter files, M4B,
    subtitles, report.json).  Needs no engine: `chattts-render package` calls this alone."""
    from tasks.package import package_book
    from tasks.plan import load_meta

    book_dir = Path(book_dir)
    meta, titles = load_meta(book_dir)
    chapters = [(index, titles.get(index, ""), _chapter_loader(pieces, opts))
                for index, pieces in chapter_pieces(book_dir, opts.allow_gaps).items()]
    package_book(book_dir, chapters, meta, opts.package)
    return book_dir


def chapter_pieces(book_dir: Path, allow_gaps: bool = False) -> dict[int, list]:
    """Per chapter, its segments' stored audio in order (assemble.Piece).  A chapter with segments that are
    not done cannot be assembled unless allow_gaps (then they are left out, listed by the caller)."""
    from manifests import STATUS_DONE, load
    from tasks.assemble import Piece

    out: dict[int, list] = {}
    missing = []
    for r in load(book_dir).to_pylist():
        if r["status"] != STATUS_DONE:
            missing.append(r)
            continue
        out.setdefault(r["chapter"], []).append(
            Piece(book_dir / r["audio_path"], r["pause_after"], r["source_text"]))
    if missing and not allow_gaps:
        r = missing[0]
        raise RuntimeError(f"{len(missing)} segments are not rendered (first: chapter {r['chapter'] + 1}, "
                           f"segment {r['segment'] + 1}: {r['status']} {r['error']}); rerun to finish them, "
                           "or pass --allow-gaps")
    return out


def _chapter_loader(pieces: list, opts: RenderOptions) -> Callable:
    def load():
        from tasks.assemble import assemble_chapter

        return assemble_chapter(pieces, opts.assemble)
    return load
