"""Synthesize: feed a book's pending manifest rows to the engine and commit results as they finish.

    counts = synthesize_book(book_dir, engine, guard=GuardOptions(), qa=None)   # {rendered, adopted, …}

Three steps: the rows to render (select_rows: a shard's, or `fix`'s keys), the audio a crash left on disk adopted
(adopt), and a renderer (renderer_for: the guarded one, or with proof on the proofed one, tasks/synthesize/proof.py)
whose decided rows a Commits batches into the manifest — at once for the last row of a chapter, so a chapter is
playable as soon as it is rendered.  Each segment's audio is written content-addressed (FLAC, 24-bit, atomic) before
its row is committed, so a crash loses at most the uncommitted batch's rows — and not even their audio: a pending
row whose file already exists is adopted without rendering.

Schedules (the order the engine starts rows in; never the audio): "length" hands the engine every row alike and
its scheduler starts the longest first (engine.scheduler); "chapters" ranks each row by its chapter, so the
earliest unfinished chapter is rendered first while the batch stays full with the next ones — except that the
chapters of the book's last batch-worth of rows share one rank, so the run drains longest first (chapter_ranks).
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from engine.api import Controls, Request, Synthesizer
from engine.units import SAMPLE_RATE
from manifests.crashpoints import crashpoint
from manifests.status import STATUS_DONE, STATUS_FAILED
from manifests.store import commit, load
from tasks.bookdir import take_relpath
from tasks.errors import RenderFailed
from tasks.plan.rows import row_request, to_render
from tasks.qa.checker import Checker
from tasks.qa.options import QAOptions
from tasks.synthesize.guard import check, reroll_seed
from tasks.synthesize.options import GuardOptions, Schedule
from tasks.synthesize.proof import key_and_take, reference_keys, render_proofed, render_takes
from tasks.synthesize.segment_audio import audio_frames, write_segment_audio

COMMIT_EVERY_ROWS = 8          # rows per manifest part while rendering
COMMIT_EVERY_S = 10.0          # seconds: commit at least this often when anything finished

Rows = list[dict]                                  # manifest rows
Finish = Callable[[Rows], None]                    # a renderer hands each decided key's rows to this
Attempt = tuple[str, np.ndarray, str | None, int]  # (key, audio, why the guard failed it or None, attempt)
Ranks = Mapping[str, int]                          # content key -> its Request.rank (the "chapters" schedule)


class RowSet(Protocol):
    """The rows one of several writers renders (tasks.fleet.shards.Shard): its content keys, its writer tag."""

    @property
    def keys(self) -> Set[str]: ...

    @property
    def writer(self) -> str: ...


class Renderer(Protocol):
    """Renders segments, content key -> its rows (one request a key), and hands each decided key's rows (done or
    failed) to `finish`; renders chosen takes of keys for `chattts-render fix`.  `hears`: audio a crash left on
    disk is a take to hear (proof), not a segment to adopt."""

    @property
    def hears(self) -> bool: ...

    def render(self, by_key: Mapping[str, Rows], finish: Finish, ranks: Ranks | None = None) -> dict[str, int]:
        """Counts {rendered, failed} (proof: retaken too), in rows; `ranks`: each key's Request.rank."""

    def takes(self, wanted: Mapping[str, tuple[dict, int]]) -> dict[str, dict]:
        """Take t of each key (key -> (a row of it, t)) into tasks.bookdir.take_relpath: key -> its record."""


def chapter_ranks(rows: Rows, batch: int) -> dict[str, int]:
    """The "chapters" schedule: each content key's rank, its chapter (a sentence repeated in two chapters: the
    earlier), but the chapters holding the last `batch` of these rows (reading order) all rank as the first of
    them: those rows start longest first, so the batch drains evenly at the end of the run."""
    ranks: dict[str, int] = {}
    for r in rows:
        ranks.setdefault(r["content_key"], r["chapter"])
    tail = rows[max(0, len(rows) - batch)]["chapter"] if rows else 0
    return {k: min(c, tail) for k, c in ranks.items()}


def render_guarded(engine: Synthesizer, items: Mapping[str, Request], guard: GuardOptions) -> Iterator[Attempt]:
    """Render each item, key -> the engine's request (its seed the first attempt's), through the quality guard
    (tasks.synthesize.guard): an outlier is re-rendered with reroll_seed(seed, attempt) up to guard.max_attempts
    (the refine pass's text, when the request has one, stays).  A re-roll joins the same engine call at once (its
    `more`), with its item's rank: a chapter waits for its own re-rolls, not for the rest of the book's first
    attempts.  Yields (key, audio, reason, attempt) as items finish: reason is None for accepted audio, else why
    the last attempt failed."""
    attempts = dict.fromkeys(items, 1)
    rerolls: list[Request] = []

    def more(_idle: bool) -> list[Request]:
        out = rerolls[:]
        rerolls.clear()
        return out

    first = [replace(items[k], key=k, seed=reroll_seed(items[k].seed, 1)) for k in items]
    for result in engine.synthesize(first, more=more):
        key, attempt = result.key, attempts[result.key]
        reason = check(items[key].text, result.audio, SAMPLE_RATE, guard)
        if reason and attempt < guard.max_attempts:
            attempts[key] = attempt + 1
            rerolls.append(replace(items[key], key=key, seed=reroll_seed(items[key].seed, attempt + 1)))
            continue
        yield key, result.audio, reason, attempt


@dataclass(frozen=True)
class GuardedRenderer:
    """Every key through the duration guard (render_guarded); accepted audio written content-addressed, a key
    that fails every attempt committed as failed with the reason and its attempt count."""
    book_dir: Path
    engine: Synthesizer
    guard: GuardOptions
    hears: bool = False

    def render(self, by_key: Mapping[str, Rows], finish: Finish, ranks: Ranks | None = None) -> dict[str, int]:
        items = {k: replace(row_request(rs[0]), rank=(ranks or {}).get(k, 0)) for k, rs in by_key.items()}
        counts = {"rendered": 0, "failed": 0}
        for key, audio, reason, attempt in render_guarded(self.engine, items, self.guard):
            rows = by_key[key]
            if reason:
                finish([{**r, "status": STATUS_FAILED, "samples": 0, "duration_s": 0.0,
                         "error": f"{reason} after {attempt} attempts", "attempts": attempt} for r in rows])
                counts["failed"] += len(rows)
                continue
            write_segment_audio(self.book_dir / rows[0]["audio_path"], audio, SAMPLE_RATE)
            crashpoint("segment-written")
            finish([{**r, "status": STATUS_DONE, "samples": len(audio), "duration_s": len(audio) / SAMPLE_RATE,
                     "error": "", "attempts": attempt, "take": 1} for r in rows])
            counts["rendered"] += len(rows)
        return counts

    def takes(self, wanted: Mapping[str, tuple[dict, int]]) -> dict[str, dict]:
        """Nothing heard: each record is the take's seed, audio and duration check (`version` absent)."""
        requests = [row_request(row, f"{k}#{t}", reroll_seed(row["seed"], t)) for k, (row, t) in wanted.items()]
        out = {}
        for res in self.engine.synthesize(requests):
            k, take = key_and_take(res.key)
            row = wanted[k][0]
            write_segment_audio(self.book_dir / take_relpath(k, take), res.audio, SAMPLE_RATE)
            reason = check(row["text"], res.audio, SAMPLE_RATE, self.guard) or ""
            out[k] = {"take": take, "seed": reroll_seed(row["seed"], take), "audio_path": take_relpath(k, take),
                      "samples": int(len(res.audio)), "checks": ["duration"] if self.guard.enabled else [],
                      "transcript": "", "cer": None, "similarity": None, "duration": reason, "reason": reason}
        return out


@dataclass(frozen=True)
class ProofedRenderer:
    """Every take kept and heard beside synthesis, flagged takes re-taken (tasks/synthesize/proof.py)."""
    book_dir: Path
    engine: Synthesizer
    guard: GuardOptions
    qa: QAOptions
    checker: Checker
    book_rows: Sequence[dict] = ()     # the whole book's, in reading order: a voice's reference is its first takes
    hears: bool = True

    def render(self, by_key: Mapping[str, Rows], finish: Finish, ranks: Ranks | None = None) -> dict[str, int]:
        if by_key:
            self.checker.load()        # a missing extra or model: one line before anything renders
        return render_proofed(self.book_dir, self.engine, dict(by_key), self.qa, self.guard, self.checker, finish,
                              list(self.book_rows), dict(ranks) if ranks is not None else None)

    def takes(self, wanted: Mapping[str, tuple[dict, int]]) -> dict[str, dict]:
        return render_takes(self.book_dir, self.engine, dict(wanted), self.qa, self.guard, self.checker)


def renderer_for(book_dir: Path, engine: Synthesizer, guard: GuardOptions, qa: QAOptions | None = None,
                 checker: Checker | None = None, book_rows: Sequence[dict] = ()) -> Renderer:
    """With qa on (mode suspect or full) the proofed renderer (`checker`: made from qa when None), else the
    guarded one."""
    if qa is not None and qa.mode != "off":
        return ProofedRenderer(book_dir, engine, guard, qa, checker or Checker(qa), book_rows)
    return GuardedRenderer(book_dir, engine, guard)


class Commits:
    """Decided rows committed in small batches (every COMMIT_EVERY_ROWS rows or COMMIT_EVERY_S seconds, at once with
    the last row of a chapter, and what is left on closing, also when the engine fails) as `writer`'s parts;
    on_done(done, total) after each add.  `pending`: the rows to render (their chapters' counts)."""

    def __init__(self, book_dir: Path, writer: str, done: int, total: int, pending: Sequence[dict] = (),
                 on_done: Callable[[int, int], None] | None = None) -> None:
        self.book_dir, self.writer, self.done, self.total, self.on_done = book_dir, writer, done, total, on_done
        self.left = Counter(r["chapter"] for r in pending)          # rows still to finish, by chapter
        self._batch: Rows = []
        self._last = time.monotonic()

    def __enter__(self) -> Commits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    def add(self, rows: Rows, at_once: bool = False) -> None:
        """Decided rows; `at_once`: committed now, and not among the pending (the audio a crash left, adopted)."""
        self._batch += rows
        self.done += len(rows)
        if not at_once:
            self.left.subtract(r["chapter"] for r in rows)
            at_once = any(self.left[r["chapter"]] == 0 for r in rows)     # its chapter's last row: playable now
        if at_once or len(self._batch) >= COMMIT_EVERY_ROWS or time.monotonic() - self._last >= COMMIT_EVERY_S:
            self.flush()
        if self.on_done:
            self.on_done(self.done, self.total)

    def flush(self) -> None:
        commit(self.book_dir, self._batch, writer=self.writer)
        self._batch, self._last = [], time.monotonic()


def select_rows(rows: Rows, shard: RowSet | None = None, keys: Set[str] | None = None) -> Rows:
    """The rows a render takes: a shard's content keys, and of those `keys` (`chattts-render fix`)."""
    if shard is not None:
        rows = [r for r in rows if r["content_key"] in shard.keys]
    if keys is not None:
        rows = [r for r in rows if r["content_key"] in keys]
    return rows


def adopt(book_dir: Path, todo: Rows) -> tuple[Rows, Rows]:
    """(rows done with audio written before a crash but never committed, rows still to render).  Only audio that
    passed the guard is ever written, so it is adopted as it is."""
    adopted, pending = [], []
    for r in todo:
        if frames := audio_frames(book_dir / r["audio_path"]):
            adopted.append({**r, "status": STATUS_DONE, "samples": frames, "duration_s": frames / SAMPLE_RATE,
                            "error": "", "attempts": max(r["attempts"], 1), "take": 1})
        else:
            pending.append(r)
    return adopted, pending


def by_content_key(rows: Rows) -> dict[str, Rows]:
    """One request per distinct content key (a repeated sentence is rendered once)."""
    out: dict[str, Rows] = {}
    for r in rows:
        out.setdefault(r["content_key"], []).append(r)
    return out


def synthesize_book(book_dir: Path, engine: Synthesizer, *, on_done: Callable[[int, int], None] | None = None,
                    guard: GuardOptions | None = None, shard: RowSet | None = None, qa: QAOptions | None = None,
                    checker: Checker | None = None, keys: Set[str] | None = None,
                    schedule: Schedule = "length") -> dict:
    """Render every pending row of the book's manifest (and failed rows that may succeed on another try).
    Returns counts {rendered, adopted, already_done, failed, total} (with proof, retaken too).  `on_done(done,
    total)` is called as rows finish.  With shard: only its rows, committed as its parts, while other shards render
    the rest; with keys (content keys): only those rows (`chattts-render fix`).  With qa on (QAOptions, mode
    suspect or full): every take kept and heard, flagged takes re-taken (renderer_for; checker made from qa when
    None).  `schedule`: the order rows start in (the module docstring)."""
    guard = guard or GuardOptions()
    book_rows = load(book_dir).to_pylist()                  # reading order
    rows = select_rows(book_rows, shard, keys)
    todo = to_render(rows, guard.max_attempts)               # final failures are left: the same audio again
    unfinished = sum(r["status"] != STATUS_DONE for r in rows)
    counts = {"rendered": 0, "adopted": 0, "already_done": len(rows) - unfinished,
              "failed": unfinished - len(todo), "total": len(rows)}
    renderer = renderer_for(book_dir, engine, guard, qa, checker, book_rows)
    adopted, pending = ([], todo) if renderer.hears else adopt(book_dir, todo)   # proof hears takes on disk
    check_engine(book_dir, pending, engine.version)
    ranks = chapter_ranks(pending, engine.batch) if schedule == "chapters" else None
    with Commits(book_dir, shard.writer if shard is not None else "", counts["already_done"], len(rows), pending,
                 on_done) as commits:
        if adopted:
            commits.add(adopted, at_once=True)
            counts["adopted"] = len(adopted)
        by_key = by_content_key(pending)
        refine_pending(engine, by_key)          # --refine: the refine pass's text first, one batched pass
        got = renderer.render(by_key, commits.add, ranks)
    counts["rendered"] += got["rendered"]
    counts["failed"] += got["failed"]
    return {**counts, **{k: v for k, v in got.items() if k not in counts}}


def refine_pending(engine: Synthesizer, by_key: Mapping[str, Rows]) -> int:
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


def render_references(book_dir: Path, engine: Synthesizer, *, guard: GuardOptions | None = None,
                      qa: QAOptions | None = None, checker: Checker | None = None) -> int:
    """Before a sharded render splits the book (flows/shards.py), with proof on: render each voice's first rows in
    reading order (tasks.synthesize.proof.reference_keys) until its drift reference is frozen in qa.json or it has
    no row left to render.  So every shard judges against the voice's one reference, whatever the split, and no
    shard writes qa.json.  Returns the rows rendered."""
    guard = guard or GuardOptions()
    rendered = 0
    if qa is None or qa.mode == "off":
        return rendered
    tried: set[str] = set()
    while keys := reference_keys(book_dir, load(book_dir).to_pylist(), qa, guard.max_attempts, tried):
        tried |= keys                            # asked for once: a row still to render after it is not again
        rendered += synthesize_book(book_dir, engine, guard=guard, keys=keys, qa=qa, checker=checker)["rendered"]
    return rendered


def check_engine(book_dir: Path, rows: Rows, version: str) -> None:
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
