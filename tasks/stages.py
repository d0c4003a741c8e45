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

    return prepare_book(opts, get_engine(opts))


def synthesize(book_dir: Path, opts: RenderOptions,
               on_done: Callable[[int, int], None] | None = None) -> dict:
    from tasks.synthesize import synthesize_book

    return synthesize_book(Path(book_dir), get_engine(opts), on_done=on_done)


def chapters(book_dir: Path) -> list[int]:
    from manifests import load

    return sorted(set(load(book_dir).column("chapter").to_pylist()))


def assemble(book_dir: Path, chapter: int, opts: RenderOptions) -> list[Path]:
    """Join one chapter's segments into its chapter file(s)."""
    from tasks.assemble import assemble_book_chapter

    return assemble_book_chapter(Path(book_dir), chapter, opts)


def package(book_dir: Path, opts: RenderOptions) -> Path | None:
    """Book-wide outputs (M4B, report)."""
    from tasks.package import package_book_dir

    return package_book_dir(Path(book_dir), opts)
