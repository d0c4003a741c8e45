"""Synthesize: feed a book's pending manifest rows to the engine and commit results as they finish.

Each finished segment's audio is written content-addressed (FLAC, 24-bit, atomic), then its row is committed
with the others of the same small batch — at once when it is the last of its chapter to finish, so a chapter is
playable (its rows done in the manifest) as soon as it is rendered.  A crash loses at most the uncommitted
batch's rows — and not even their audio: a pending row whose file already exists is adopted without rendering.

Schedules (the order the engine starts rows in; never the audio): "length" hands the engine every row alike and
its scheduler starts the longest first (engine.scheduler); "chapters" ranks each row by its chapter, so the
earliest unfinished chapter is rendered first while the batch stays full with the next ones — except that the
chapters of the book's last batch-worth of rows share one rank, so the run drains longest first as "length" does
(without it the last rows start in reading order and a long one finishes alone: chapter_ranks).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal, get_args

from engine.api import Controls, Request
from engine.units import SAMPLE_RATE
from manifests.crashpoints import crashpoint
from tasks.errors import RenderFailed
from tasks.plan.rows import row_request, to_render
from tasks.qa.checker import Checker
from tasks.synthesize.guard import GuardOptions, check, reroll_seed
from tasks.synthesize.segment_audio import audio_frames, write_segment_audio

COMMIT_EVERY_ROWS = 8          # rows per manifest part while rendering
COMMIT_EVERY_S = 10.0          # seconds: commit at least this often when anything finished
Schedule = Literal["length", "chapters"]   # the order rows start in (module docstring); "length" is the default
SCHEDULES = get_args(Schedule)


def chapter_ranks(rows: list[dict], batch: int) -> dict[str, int]:
    """The "chapters" schedule: each content key's rank, its chapter (a sentence repeated in two chapters: the
    earlier), but the chapters holding the last `batch` of these rows (reading order) all rank as the first of
    them: those rows start longest first, so the batch drains evenly at the end of the run."""
    ranks: dict[str, int] = {}
    for r in rows:
        ranks.setdefault(r["content_key"], r["chapter"])
    tail = rows[max(0, len(rows) - batch)]["chapter"] if rows else 0
    return {k: min(c, tail) for k, c in ranks.items()}


def render_guarded(engine, items: dict[str, Request], guard) -> Iterator[tuple]:
    """Render each item, key -> the engine's request (its seed the first attempt's), through the quality guard
    (tasks.synthesize.guard): an outlier is re-rendered with reroll_seed(seed, attempt) up to guard.max_attempts
    (the refine pass's text, when the request has one, stays).  Yields (key, audio, reason, attempt) as items
    finish: reason is None for accepted audio, else why the last attempt failed."""
    keys = list(items)
    for attempt in range(1, guard.max_attempts + 1):
        if not keys:
            break
        requests = [replace(items[k], key=k, seed=reroll_seed(items[k].seed, attempt)) for k in keys]
        retry = []
        for result in engine.synthesize(requests):
            reason = check(items[result.key].text, result.audio, SAMPLE_RATE, guard)
            if reason and attempt < guard.max_attempts:
                retry.append(result.key)
                continue
            yield result.key, result.audio, reason, attempt
        keys = retry


def synthesize_book(book_dir: Path, engine, *, on_done: Callable[[int, int], None] | None = None,
                    guard=None, shard=None, qa=None, checker=None, keys=None, schedule: Schedule = "length") -> dict:
    """Render every pending row of the book's manifest (and failed rows that may succeed on another try).
    Returns counts {rendered, adopted, already_done, failed, total}.  `on_done(done, total)` is called as
    rows finish.  Each result passes the quality guard (tasks.synthesize.guard) or is re-rolled with a derived seed; a
    segment that fails every attempt is committed as failed with the reason and its attempt count.
    With shard (tasks.fleet.shards.Shard): only the rows of its content keys, committed as its parts (its writer
    tag), while other shards render the rest of the book at the same time.
    With keys (a set of content keys): only the rows of those keys (`chattts-render fix`), the rest left as they are.
    With qa (tasks.qa.options.QAOptions, mode suspect or full): every take is kept and heard beside synthesis,
    flagged takes re-taken (tasks/synthesize/proof.py; checker: a tasks.qa.checker.Checker, made from qa when
    None).  `schedule`: one of SCHEDULES (the module docstring)."""
    from manifests.store import STATUS_DONE, STATUS_FAILED, commit, load

    guard = guard or GuardOptions()
    rows = book_rows = load(book_dir).to_pylist()            # reading order
    if shard is not None:
        rows = [r for r in rows if r["content_key"] in shard.keys]
    if keys is not None:
        rows = [r for r in rows if r["content_key"] in keys]
    total = len(rows)
    unfinished = sum(r["status"] != STATUS_DONE for r in rows)
    todo = to_render(rows, guard.max_attempts)                  # final failures are left: the same audio again
    counts = {"rendered": 0, "adopted": 0, "already_done": total - unfinished,
              "failed": unfinished - len(todo), "total": total}
    done_count = counts["already_done"]
    commit = partial(commit, writer=shard.writer if shard is not None else "")

    proofed = qa is not None and qa.mode != "off"
    # Adopt audio that was written before a crash but never committed (only audio that passed the guard is
    # ever written, so it is adopted as is).  With proof, takes on disk are heard instead (proof.py).
    pending, adopted = [], []
    for r in todo:
        frames = None if proofed else audio_frames(book_dir / r["audio_path"])
        if frames:
            adopted.append({**r, "status": STATUS_DONE, "samples": frames,
                            "duration_s": frames / SAMPLE_RATE, "error": "", "attempts": max(r["attempts"], 1),
                            "take": 1})
        else:
            pending.append(r)
    check_engine(book_dir, pending, engine.version)
    if adopted:
        commit(book_dir, adopted)
        counts["adopted"] = len(adopted)
        done_count += len(adopted)
        if on_done:
            on_done(done_count, total)

    # One request per distinct content key (a repeated sentence is rendered once).
    by_key: dict[str, list[dict]] = {}
    for r in pending:
        by_key.setdefault(r["content_key"], []).append(r)

    refine_pending(engine, by_key)          # --refine: the refine pass's text first, one batched pass
    batch: list[dict] = []
    last_commit = time.monotonic()
    left = Counter(r["chapter"] for r in pending)          # rows still to finish, by chapter
    ranks = chapter_ranks(pending, engine.opts.batch) if schedule == "chapters" else None

    def finish(new_rows: list[dict]) -> None:
        nonlocal batch, last_commit, done_count
        batch += new_rows
        done_count += len(new_rows)
        left.subtract(r["chapter"] for r in new_rows)
        chapter_done = any(left[r["chapter"]] == 0 for r in new_rows)     # its last row: playable now
        if chapter_done or len(batch) >= COMMIT_EVERY_ROWS or time.monotonic() - last_commit >= COMMIT_EVERY_S:
            commit(book_dir, batch)
            batch, last_commit = [], time.monotonic()
        if on_done:
            on_done(done_count, total)

    if proofed:
        from tasks.synthesize.proof import render_proofed

        checker = checker or Checker(qa)
        if by_key:
            checker.load()                  # a missing extra or model: one line before anything renders
        try:
            got = render_proofed(book_dir, engine, by_key, qa, guard, checker, finish, book_rows, ranks)
        finally:
            commit(book_dir, batch)
        counts["rendered"] += got["rendered"]
        counts["failed"] += got["failed"]
        counts["retaken"] = got["retaken"]
        return counts

    items = {k: replace(row_request(rs[0]), rank=(ranks or {}).get(k, 0)) for k, rs in by_key.items()}
    try:
        for key, audio, reason, attempt in render_guarded(engine, items, guard):
            rs = by_key[key]
            n = int(len(audio))
            if reason:
                finish([{**r, "status": STATUS_FAILED, "samples": 0, "duration_s": 0.0,
                         "error": f"{reason} after {attempt} attempts", "attempts": attempt} for r in rs])
                counts["failed"] += len(rs)
                continue
            write_segment_audio(book_dir / rs[0]["audio_path"], audio, SAMPLE_RATE)
            crashpoint("segment-written")
            finish([{**r, "status": STATUS_DONE, "samples": n, "duration_s": n / SAMPLE_RATE,
                     "error": "", "attempts": attempt, "take": 1} for r in rs])
            counts["rendered"] += len(rs)
    finally:
        commit(book_dir, batch)   # whatever finished is kept, also when the engine fails
    return counts


def refine_pending(engine, by_key: dict[str, list[dict]]) -> int:
    """The refine-text pass (engine.refine, batched like the code pass) of every key whose controls ask for one and
    whose rows hold no refined text yet: its text is set on the rows, which carry it into the manifest when they
    are committed (a crash before: refined again, the same text).  Returns how many keys it refined."""
    todo = {k: rs for k, rs in by_key.items()
            if not rs[0].get("refined") and Controls.parse(rs[0].get("controls") or "").refine is not None}
    if not todo:
        return 0
    for res in engine.refine([row_request(rs[0], k) for k, rs in todo.items()]):
        for r in todo[res.key]:
            r["refined"] = res.text
    return len(todo)


def render_references(book_dir: Path, engine, *, guard=None, qa=None, checker=None) -> int:
    """Before a sharded render splits the book (flows/shards.py), with proof on: render each voice's first rows in
    reading order (tasks.synthesize.proof.reference_keys) until its drift reference is frozen in qa.json or it has
    no row left to render.  So every shard judges against the voice's one reference, whatever the split, and no
    shard writes qa.json.  Returns the rows rendered."""
    from manifests.store import load
    from tasks.synthesize.proof import reference_keys

    guard = guard or GuardOptions()
    rendered = 0
    if qa is None or qa.mode == "off":
        return rendered
    tried: set[str] = set()
    while keys := reference_keys(book_dir, load(book_dir).to_pylist(), qa, guard.max_attempts, tried):
        tried |= keys                            # asked for once: a row still to render after it is not again
        rendered += synthesize_book(book_dir, engine, guard=guard, keys=keys, qa=qa, checker=checker)["rendered"]
    return rendered


def check_engine(book_dir: Path, rows: list[dict], version: str) -> None:
    """RenderFailed (one line) when a row to render was planned for another engine than `version`: its content
    key names the engine whose arithmetic makes its audio, so audio of another back-end (our kernel, oneDNN,
    another ISA) is never stored under it.  A render re-plans first (tasks.plan.prepare: the rows get this
    engine's keys); a shard renders its parent's plan as it is, so a shard on a worker whose engine differs
    refuses here before it renders anything."""
    other = sorted({r["engine_version"] for r in rows} - {version})
    if other:
        n = sum(r["engine_version"] != version for r in rows)
        raise RenderFailed(str(book_dir), f"{n} segments to render were planned for engine {other[0]}, but this "
                                          f"process runs {version}; render them where the engine is the same "
                                          "(or rerun the whole render here, which plans them for this engine)")
