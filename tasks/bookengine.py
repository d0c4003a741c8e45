"""The book's engine: a book is rendered with one engine, chosen once.  Its first render records the CPU back-end
it chose (manifests/engine.py); every later run of it — a resume, each shard, every fleet worker, `fix` — runs that
back-end again (engine.api.EngineOptions.record) and measures nothing, so a book never mixes engines because a
worker or a moment chose differently.

    engine = book_engine(opts, book_dir, reengine, load)   # load: tasks.stages.get_engine
    keep_engine(book_dir, engine)                          # after a plan: the book's engine recorded (if it changed)
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from engine.api import EngineMismatch, EngineOptions, EngineRecord, Synthesizer
from manifests.engine import read_engine, record_engine, row_versions
from tasks.errors import RenderFailed


def book_engine(opts: EngineOptions, book_dir: Path, reengine: bool,
                load: Callable[[EngineOptions], Synthesizer]) -> Synthesizer:
    """The engine (load(options)) that renders the book in book_dir.  On CPU (torch): the back-end its record names,
    never measured again; a book without one (rendered before records) the back-end of its rows' engine versions
    where this process has one, else a first choice.  Where this process cannot run the book's engine:
    RenderFailed, one line naming the book and both engines (nothing rendered).  This process's own choice
    instead, with a note, where `reengine` (a render's planning or `fix`: a shard only follows) or an explicit
    --dtype or --int8 asks for another engine than the book's."""
    if opts.device != "cpu" or opts.backend != "torch":
        return load(opts)
    record = read_engine(book_dir)
    if record is None:                           # rendered before records: its rows say which engine
        for r in filter(None, map(EngineRecord.of_version, row_versions(book_dir))):
            if not r.asked_otherwise(opts):
                try:
                    return load(replace(opts, record=r, int8=r.int8))
                except EngineMismatch:
                    continue
        return load(opts)
    why = f"{asked} asks for another engine than" if (asked := record.asked_otherwise(opts)) else \
        "--reengine: this process's own choice replaces" if reengine else ""
    if not why:
        try:
            return load(replace(opts, record=record, int8=record.int8))
        except EngineMismatch as e:
            raise RenderFailed(str(book_dir), f"{e}; nothing of the book was rendered: render it where its engine "
                                              "runs, or pass --reengine to render the rest with this one") from None
    engine = load(opts)
    if engine.record is None or engine.record.backend != record.backend or engine.record.dtype != record.dtype \
            or engine.record.int8 != record.int8:
        print(f"chattts-render: note: {book_dir}: {why} the book's engine {record.path} ({record.version}): it is "
              f"now {engine.record.path if engine.record else '?'} ({engine.version}); what is done stays",
              file=sys.stderr, flush=True)
    return engine


def keep_engine(book_dir: Path, engine: Synthesizer) -> None:
    """Record `engine` as the book's (manifests/engine.py) where it has a CPU back-end: the first render's choice,
    or the one the book switched to."""
    if (record := engine.record) is not None:
        record_engine(book_dir, record)
