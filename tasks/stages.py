"""The pipeline's stages as plain functions over a book directory.  flows/ composes them — directly for the
CLI, as Prefect tasks for the flow — and tests call them without a server.  Stages pass paths and ids; each
takes the options it reads (RenderOptions where it reads much of a render's: prepare, synthesize)."""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from engine.api import EngineOptions, Synthesizer
from engine.atomic import find_temps, remove_temp
from engine.voice import VoiceSpec
from manifests.status import STATUS_DONE
from manifests.store import compact, load
from tasks.audio.assemble import AssembleOptions
from tasks.audio.incremental import package_changed
from tasks.audio.options import PackageOptions
from tasks.audio.package import check_tools
from tasks.options import RenderOptions
from tasks.plan.fixes import Fix
from tasks.plan.prepare import prepare_book
from tasks.qa.asr import INSTALL_HINT
from tasks.qa.checker import checker_for
from tasks.qa.options import QA_SHARE_GOAL, QAOptions, auto_mode
from tasks.site.player import write_book_page
from tasks.site.qa import qa_summary, write_qa_page
from tasks.synthesize import pickups
from tasks.synthesize.anchor import anchored
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.render import render_references, synthesize_book
from tasks.voice.voices import book_voice


def get_engine(opts: EngineOptions) -> Synthesizer:
    """The engine for these options.  Engine.load keeps one model per process and settings, behind a lock,
    so every stage and thread shares it."""
    from engine.engine import Engine  # the model's gateway: torch, ChatTTS (packaging never loads it)

    return Engine.load(opts)


def prepare(opts: RenderOptions) -> Path:
    """ingest → normalize → segment → audit → voice (anchored: the synthesize stage renders the anchor) → plan;
    returns the book dir.  A tool the output formats need (ffmpeg) is looked for first: missing, the render stops
    before it reads the book or loads the model."""
    check_tools(opts.package)
    if opts.qa is not None and opts.qa.mode in ("suspect", "full"):
        checker_for(opts.qa).load()             # the QA extra and model: missing, one line before anything is made
    anchor = (lambda voice, stored, engine: anchored(voice, stored, engine, opts.guard)) if opts.voice_anchor \
        else None
    return prepare_book(opts.prepare, opts.book_dir, lambda: get_engine(opts.engine), opts.guard.max_attempts,
                        anchor=anchor)


def synthesize(book_dir: Path, opts: RenderOptions,
               on_done: Callable[[int, int], None] | None = None, shard=None) -> dict:
    """Render the book's pending rows, then compact its manifest; with shard (tasks.fleet.shards.Shard) only that
    shard's rows, and no compaction (other shards still commit: the parent compacts once they all ended)."""
    engine = get_engine(opts.engine)
    qa, why = resolve_qa(opts.qa, opts.engine.device, engine)
    if why:
        print(why, file=sys.stderr, flush=True)          # the one line that says what `--qa auto` picked
    counts = synthesize_book(Path(book_dir), engine, on_done=on_done, guard=opts.guard, shard=shard, qa=qa,
                             checker=checker_for(qa) if qa.mode != "off" else None, schedule=opts.schedule)
    if shard is None:
        compact(book_dir)
    return counts


def freeze_references(book_dir: Path, opts: RenderOptions) -> dict:
    """A sharded render's first step (flows/shards.py), before it splits the book: with proof on, each voice's
    first rows are rendered here until its drift reference is frozen (tasks.synthesize.render.render_references),
    so all shards judge against it.  Returns {rendered}; nothing to do with proof off."""
    engine = get_engine(opts.engine)
    qa = qa_options(opts.qa, opts.engine.device, engine)
    checker = checker_for(qa) if qa.mode != "off" else None
    return {"rendered": render_references(Path(book_dir), engine, guard=opts.guard, qa=qa, checker=checker)}


def qa_options(qa: QAOptions | None, device: str, engine: Synthesizer) -> QAOptions:
    """The render's proof: `qa` as asked, `auto` (None too) resolved (resolve_qa)."""
    return resolve_qa(qa, device, engine)[0]


def resolve_qa(qa: QAOptions | None, device: str, engine: Synthesizer) -> tuple[QAOptions, str]:
    """(the proof, one line saying what `auto` picked and why; "" when `qa` asked for a mode or the weights are
    random).  auto (the default;
    None too): off for random weights (their audio is noise) and where the QA extra or its ASR model is missing
    (nothing to hear with), else full where its estimated cost fits and suspect where it does not
    (tasks.qa.options.auto_mode).  `device`: the engine's, where the checks run too."""
    qa = qa if qa is not None else QAOptions(mode="auto", device=device)
    if qa.mode != "auto":
        return qa, ""
    if engine.is_random:
        return replace(qa, mode="off"), ""           # their audio is noise: nothing to hear, nothing to say
    mode, share = auto_mode(qa.device, qa.asr_model)
    picked = replace(qa, mode=mode)
    if not checker_for(picked).available():
        return replace(qa, mode="off"), (f"qa auto: off (the qa extra or Whisper {qa.asr_model} is not installed: "
                                         f"{INSTALL_HINT})")
    return picked, (f"qa auto: {mode} (Whisper {qa.asr_model} on {qa.device} adds about {share:.2f} of a render's "
                    f"time with every take heard, {'within' if mode == 'full' else 'over'} "
                    f"{QA_SHARE_GOAL[qa.device]:.2f}{'' if mode == 'full' else ': only odd takes are transcribed'})")


def package(book_dir: Path, assemble: AssembleOptions = AssembleOptions(), package: PackageOptions = PackageOptions(),
            allow_gaps: bool = False) -> Path:
    """Remove a killed run's temp files, then write the outputs of the chapters whose inputs changed
    (tasks.audio.incremental; report.json's "qa": what the checks found), the QA page (qa.html) and the book's
    web player (index.html).  Needs no engine: `chattts-render package` calls this alone.  Callers hold the
    book's lock (render, `chattts-render package`, `fix`)."""
    clean_temp_files(book_dir)
    book_dir = package_changed(Path(book_dir), assemble, package, allow_gaps,
                               report_extra=lambda rows: {"qa": qa_summary(rows)})
    write_qa_page(book_dir)
    write_book_page(book_dir)
    return book_dir


def fix(book_dir: Path, rows: list[dict], book: str, *, take: int | None = None, override: Fix | None = None,
        voice: VoiceSpec | None = None, engine: EngineOptions = EngineOptions(), qa: QAOptions | None = None,
        guard: GuardOptions = GuardOptions()) -> tuple[int, list[dict]]:
    """`chattts-render fix`'s pickups of these manifest rows (tasks.synthesize.pickups.find_rows): keep take `take` (no
    model), or apply `override` (fixes.json; its voice resolved from `voice` with the model) and render the rows it
    re-keys, or else render a new take of each.  `engine`, `qa`, `guard`: how a take is rendered and heard; `book`:
    the book as named (errors).  Callers hold the book's lock.  Returns (segments rendered, the manifest's rows of
    those segments now, in reading order)."""
    rendered = 0
    if take is not None:
        new = pickups.choose_take(book_dir, rows, take, book)
    else:
        model = get_engine(engine)
        proof = qa_options(qa, engine.device, model)
        checker = checker_for(proof) if proof.mode != "off" else None
        if checker is not None:
            checker.load()                               # a missing extra or model: one line, nothing rendered
        if override is None:
            new = pickups.retake(book_dir, model, rows, book, proof, guard, checker)
            rendered = len({r["content_key"] for r in new})
        else:
            if voice is not None:
                override = replace(override, voice=book_voice(voice, None, model))   # resolved once, a string
            changed = pickups.override(book_dir, rows, override, model.version)
            counts = synthesize_book(book_dir, model, guard=guard, qa=proof, checker=checker,
                                     keys={r["content_key"] for r in changed})
            rendered = counts["rendered"] + counts["adopted"]
            new = [*changed, *(r for r in rows if r["content_key"] not in {c["content_key"] for c in changed})]
    where = {(r["chapter"], r["segment"]) for r in new}
    now = [r for r in load(book_dir).to_pylist() if (r["chapter"], r["segment"]) in where]
    return rendered, sorted(now, key=lambda r: (r["chapter"], r["segment"]))


def repackage(book_dir: Path, assemble: AssembleOptions = AssembleOptions(),
              package_opts: PackageOptions = PackageOptions(), allow_gaps: bool = False) -> list[int] | None:
    """Package again after a fix: the chapters (1-based) whose outputs changed, or None when segments are not all
    rendered and not allow_gaps (nothing packaged)."""
    before = pickups.packaged_chapters(book_dir)
    if not allow_gaps and any(r["status"] != STATUS_DONE for r in load(book_dir).to_pylist()):
        return None
    package(book_dir, assemble, package_opts, allow_gaps)
    return pickups.repackaged(before, pickups.packaged_chapters(book_dir))


def clean_temp_files(book_dir: Path) -> int:
    """Remove the temp files and folders a killed render left in book_dir (engine.atomic.find_temps: `.tmp-*`
    at any depth, and the `<name>.<random>.tmp` files of versions before it).  Call only while holding the
    book's lock: then no writer is alive.  Returns how many were removed."""

    temps = find_temps(Path(book_dir))
    for p in temps:
        remove_temp(p)
    return len(temps)
