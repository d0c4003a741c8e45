"""The pipeline's stages as plain functions over a book directory.  flows/ composes them — directly for the
CLI, as Prefect tasks for the flow — and tests call them without a server.  Stages pass paths and ids."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from engine.atomic import find_temps, remove_temp
from tasks.audio.incremental import package_changed
from tasks.audio.package import check_tools
from tasks.options import RenderOptions
from tasks.plan.prepare import prepare_book
from tasks.qa.checker import checker_for
from tasks.qa.options import QAOptions
from tasks.site.player import write_book_page
from tasks.site.qa import qa_summary, write_qa_page
from tasks.synthesize.anchor import anchored
from tasks.synthesize.render import render_references, synthesize_book


def get_engine(opts: RenderOptions):
    """The engine for these options.  Engine.load keeps one model per process and settings, behind a lock,
    so every stage and thread shares it."""
    from engine.engine import Engine            # the model's gateway: torch, ChatTTS (packaging never loads it)

    return Engine.load(opts.engine)


def prepare(opts: RenderOptions) -> Path:
    """ingest → normalize → segment → audit → voice (anchored: the synthesize stage renders the anchor) → plan;
    returns the book dir.  A tool the output formats need (ffmpeg) is looked for first: missing, the render stops
    before it reads the book or loads the model."""
    check_tools(opts.package)
    if opts.qa is not None and opts.qa.mode != "off":
        checker_for(opts.qa).load()             # the QA extra and model: missing, one line before anything is made
    anchor = (lambda voice, stored, engine: anchored(voice, stored, engine, opts.guard)) if opts.voice_anchor \
        else None
    return prepare_book(opts, lambda: get_engine(opts), anchor=anchor)


def synthesize(book_dir: Path, opts: RenderOptions,
               on_done: Callable[[int, int], None] | None = None, shard=None) -> dict:
    """Render the book's pending rows, then compact its manifest; with shard (tasks.fleet.shards.Shard) only that
    shard's rows, and no compaction (other shards still commit: the parent compacts once they all ended)."""
    from manifests import compact

    engine = get_engine(opts)
    qa = qa_options(opts, engine)
    counts = synthesize_book(Path(book_dir), engine, on_done=on_done, guard=opts.guard, shard=shard, qa=qa,
                             checker=checker_for(qa) if qa.mode != "off" else None)
    if shard is None:
        compact(book_dir)
    return counts


def freeze_references(book_dir: Path, opts: RenderOptions) -> dict:
    """A sharded render's first step (flows/shards.py), before it splits the book: with proof on, each voice's
    first rows are rendered here until its drift reference is frozen (tasks.synthesize.render.render_references),
    so all shards judge against it.  Returns {rendered}; nothing to do with proof off."""
    engine = get_engine(opts)
    qa = qa_options(opts, engine)
    checker = checker_for(qa) if qa.mode != "off" else None
    return {"rendered": render_references(Path(book_dir), engine, guard=opts.guard, qa=qa, checker=checker)}


def qa_options(opts: RenderOptions, engine) -> QAOptions:
    """The render's proof: as asked; by default full for a real model when the QA extra and its ASR model are
    installed (off when they are not: nothing to hear with), off for random weights (their audio is noise)."""
    if opts.qa is not None:
        return opts.qa
    if engine.loaded.is_random:
        return QAOptions(mode="off")
    full = QAOptions(mode="full", device=opts.engine.device)
    return full if checker_for(full).available() else QAOptions(mode="off")


def package(book_dir: Path, opts: RenderOptions) -> Path:
    """Remove a killed run's temp files, then write the outputs of the chapters whose inputs changed
    (tasks.audio.incremental; report.json's "qa": what the checks found), the QA page (qa.html) and the book's
    web player (index.html).  Needs no engine: `chattts-render package` calls this alone.  Callers hold the
    book's lock (render, `chattts-render package`)."""

    clean_temp_files(book_dir)
    book_dir = package_changed(Path(book_dir), opts, report_extra=lambda rows: {"qa": qa_summary(rows)})
    write_qa_page(book_dir)
    write_book_page(book_dir)
    return book_dir


def clean_temp_files(book_dir: Path) -> int:
    """Remove the temp files and folders a killed render left in book_dir (engine.atomic.find_temps: `.tmp-*`
    at any depth, and the `<name>.<random>.tmp` files of versions before it).  Call only while holding the
    book's lock: then no writer is alive.  Returns how many were removed."""

    temps = find_temps(Path(book_dir))
    for p in temps:
        remove_temp(p)
    return len(temps)
