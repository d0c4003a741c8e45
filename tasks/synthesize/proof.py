"""Synthesize with proof: every take is kept and heard beside synthesis; a flagged take is re-taken.

One request per distinct content key, as render.py.  Take k (1-based) renders with reroll_seed(seed, k) into
tasks.bookdir.take_relpath(key, k) (durable), then the checker thread hears it while the engine decodes on
(tasks.qa.checker.Checker.hear_many: the ASR — mode full: every take; suspect: the takes whose duration is odd and
those the drift gate flags — and the speaker embedding) and writes its record beside it (check_relpath).  In full
mode the takes wait until they fill one of Whisper's 30-s windows, where they are heard together (packed: one
encoder pass for several takes, most of the ASR's cost on a CPU; docs/qa.md), or until the engine waits for them
(idle, or its pass is over); in suspect mode the thread hears every take waiting whenever it is free.  A take
the duration guard or the ASR flags is re-taken in the same pass: the engine asks for more rows before every step
(Engine.synthesize's `more`), and when it has none left it waits for the takes still being heard.  After each
pass over the engine:

- each voice's reference is frozen in the book's qa.json once its takes give one (tasks.qa.checker.voice_reference,
  the cutoff from the book's own spread), and the drift gate judges every take against it;
- a take the drift gate flags is re-taken in the next pass; every re-take up to max_takes; an inconclusive take
  is never re-taken;
- a segment that is decided keeps its best take (tasks.qa.verdict.take_rank): the row is done with that take's
  audio and what the checks found, or failed when every take failed the duration guard.

A killed render loses nothing and hears nothing twice: takes on disk are never rendered again, and a take whose
record is on disk is never checked again; only a decided row is committed.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Set
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.api import Request, Synthesizer
from engine.atomic import read_json, write_bytes
from engine.units import SAMPLE_RATE, estimate_seconds
from manifests.crashpoints import crashpoint
from manifests.status import STATUS_DONE
from tasks.bookdir import QA_JSON, check_relpath, json_bytes, take_relpath
from tasks.plan.rows import row_request, said, to_render
from tasks.qa.asr import pack_windows
from tasks.qa.checker import CHECK_ORDER, Checker, ToHear, accepted, judge_drift, reference_cutoff, voice_reference
from tasks.qa.options import QAOptions
from tasks.qa.speaker import decode_vector, encode_vector
from tasks.qa.verdict import FLAG, PASS, combine, take_rank
from tasks.synthesize.guard import check as guard_check, reroll_seed
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.segment_audio import read_audio, write_segment_audio

SUSPECT_RATIO = (0.6, 1.6)    # duration / expected outside this: `--qa suspect` transcribes the take
REFERENCE_ROWS_FACTOR = 4     # x reference_takes: rows of a voice a sharded render's parent renders for its reference
RECORD_VERSION = 1            # of a take's check record (<key>[.t<k>].qa.json)
PUBLIC = ("take", "seed", "audio_path", "samples", "checks", "transcript", "cer", "similarity", "verdict",
          "reason")          # a take as the manifest's `takes` lists it (no embedding)


@dataclass
class _Segment:
    rows: list[dict]                                  # the manifest rows of this content key
    takes: dict[int, dict | None] = field(default_factory=dict)   # take -> its record (None: not heard yet)

    @property
    def first(self) -> dict:
        return self.rows[0]


def render_proofed(book_dir: Path, engine: Synthesizer, by_key: dict[str, list[dict]], qa: QAOptions,
                   guard: GuardOptions, checker: Checker, finish: Callable[[list[dict]], None],
                   all_rows: list[dict], ranks: dict[str, int] | None = None) -> dict:
    """Render, hear and decide every key of by_key (the module docstring); finish(rows) commits decided rows;
    `ranks`: each key's Request.rank (render.chapter_ranks).  Returns counts {rendered, failed, retaken}."""
    segs = {k: _Segment(rs, _takes_on_disk(book_dir, k)) for k, rs in by_key.items()}
    counts = {"rendered": 0, "failed": 0, "retaken": 0}
    refs = _read_references(book_dir)
    open_keys = set(segs)
    hearing: list[Future] = []                          # this pass's takes being heard while the engine decodes on

    def retakes(idle: bool) -> list[Request]:
        """The engine asks before every step: the re-takes of the takes heard since (flagged by the duration guard
        or the ASR) join its running pass.  Idle: wait for every take still being heard."""
        if idle:
            checking.flush()
        done = [f for f in hearing if idle or f.done()]
        _collect(done, segs)
        hearing[:] = [f for f in hearing if f not in done]
        new = {k: t for k in sorted({f.result()[0] for f in done})
               if (t := _next_take(segs[k], qa)) is not None and t not in segs[k].takes}
        counts["retaken"] += len(new)
        return [_request(segs[k], k, t, ranks) for k, t in new.items()]

    with _CheckerThread(book_dir, qa, guard, checker) as checking:
        while open_keys:
            heard = _hear_on_disk(book_dir, checking, segs, open_keys)        # a killed render's takes, first
            need = {k: t for k in sorted(open_keys) if (t := _next_take(segs[k], qa)) is not None
                    and t not in segs[k].takes}
            counts["retaken"] += sum(t > 1 for t in need.values())
            requests = [_request(segs[k], k, t, ranks) for k, t in need.items()]
            for res in engine.synthesize(requests, more=retakes):
                k, take = key_and_take(res.key)
                write_segment_audio(book_dir / take_relpath(k, take), res.audio, SAMPLE_RATE)
                crashpoint("segment-written")
                segs[k].takes[take] = None
                hearing.append(checking.submit(k, take, segs[k], res.audio))
            checking.flush()
            _collect(hearing, segs)
            hearing.clear()
            refs = _judge_voices(book_dir, segs, refs, qa, checker, all_rows)
            decided = _decided(segs, open_keys, refs, qa)
            if not decided and not requests and not heard:
                raise RuntimeError("proof: no segment could be decided and none rendered")   # a bug, not input
            for k in sorted(decided):
                rows = _decide(segs[k], k)
                counts["failed" if rows[0]["status"] == "failed" else "rendered"] += len(rows)
                finish(rows)
            open_keys -= decided
    return counts


def _hear_on_disk(book_dir: Path, checking: _CheckerThread, segs: dict[str, _Segment], open_keys: set[str]) -> bool:
    """Hear the takes on disk not heard yet (a killed render's): their verdicts decide the re-takes.  Whether there
    were any."""
    unheard = [(k, t) for k in sorted(open_keys) for t, rec in segs[k].takes.items() if rec is None]
    waits = [checking.submit(k, t, segs[k], read_audio(book_dir / take_relpath(k, t))) for k, t in unheard]
    checking.flush()
    _collect(waits, segs)
    return bool(unheard)


def _decided(segs: dict[str, _Segment], open_keys: set[str], refs: dict, qa: QAOptions) -> set[str]:
    """The open keys whose segment is decided: no take left to render, none waiting on its voice's reference."""
    waiting = {s.first["voice_id"] for k, s in segs.items() if k in open_keys
               and s.first["voice_id"] not in refs and _next_take(s, qa) is not None}
    return {k for k in open_keys if _next_take(segs[k], qa) is None and not _waits(segs[k], waiting)}


def key_and_take(request_key: str) -> tuple[str, int]:
    """(content key, take) of a take's request key `<content key>#<take>`."""
    key, take = request_key.rsplit("#", 1)
    return key, int(take)


def _request(seg: _Segment, key: str, take: int, ranks: dict[str, int] | None = None) -> Request:
    row = seg.first
    return replace(row_request(row, f"{key}#{take}", reroll_seed(row["seed"], take)), rank=(ranks or {}).get(key, 0))


class _CheckerThread:
    """The checker thread: takes handed to it (submit) wait in a queue until they fill one of Whisper's windows
    (full QA: tasks.qa.asr.pack_windows — they are heard packed into it) or the render waits for them (flush: the
    engine is idle, or a pass ends); then it hears every take waiting, at most checker.batch windows of them, in
    one call (_hear_many), and resolves each take's future with (key, take, record).  In suspect mode a take is
    heard as soon as the thread is free (only odd takes are transcribed: nothing to pack).  An error fails the
    futures of its batch (the render stops at the first it collects); closing hears what is still waiting, then
    ends the thread."""

    def __init__(self, book_dir: Path, qa: QAOptions, guard: GuardOptions, checker: Checker):
        self._hear = lambda jobs: _hear_many(book_dir, jobs, qa, guard, checker)
        self._batch = checker.batch
        self._pack = qa.mode == "full"
        self._waiting: list[tuple[tuple, Future]] = []
        self._closed = self._flushing = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="qa-checker", daemon=True)

    def __enter__(self) -> _CheckerThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()

    def submit(self, key: str, take: int, seg: _Segment, audio: np.ndarray) -> Future:
        done: Future = Future()
        with self._ready:
            self._waiting.append(((key, take, seg, audio), done))
            self._ready.notify()
        return done

    def flush(self) -> None:
        """Hear every take waiting now, full window or not (the render is about to wait for them)."""
        with self._ready:
            self._flushing = bool(self._waiting)
            self._ready.notify()

    def _windows(self) -> list[list[int]]:
        return pack_windows([len(audio) / SAMPLE_RATE for (_, _, _, audio), _ in self._waiting],
                            [""] * len(self._waiting))         # one language: a window's worth of audio

    def _due(self) -> bool:
        return bool(self._waiting) and (self._closed or self._flushing or not self._pack
                                        or len(self._windows()) > 1)

    def _run(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._due() or (self._closed and not self._waiting))
                if not self._waiting:
                    return
                windows = self._windows()
                whole = windows if self._closed or self._flushing else windows[:-1]   # the last may fill still
                n = len([i for w in whole[:self._batch] for i in w]) if self._pack else self._batch
                batch, self._waiting = self._waiting[:n], self._waiting[n:]
                if not self._waiting:
                    self._flushing = False
            try:
                heard = self._hear([job for job, _ in batch])
            except BaseException as e:                  # noqa: BLE001 — handed to whoever waits on these takes
                for _, done in batch:
                    done.set_exception(e)
                continue
            for (_, done), result in zip(batch, heard):
                done.set_result(result)


def _hear_many(book_dir: Path, jobs: list[tuple[str, int, _Segment, np.ndarray]], qa: QAOptions,
               guard: GuardOptions, checker: Checker) -> list[tuple[str, int, dict]]:
    """Takes (key, take, segment, audio) heard: each one's duration check, then their ASR in one call and their
    embeddings (Checker.hear_many), then each record on disk, in order → [(key, take, record)]."""
    asked, durations = [], []
    for _, _, seg, audio in jobs:
        text = seg.first["text"]
        duration = guard_check(text, audio, SAMPLE_RATE, guard) or ""
        ratio = len(audio) / SAMPLE_RATE / max(estimate_seconds(text), 1e-6)
        odd = bool(duration) or not SUSPECT_RATIO[0] <= ratio <= SUSPECT_RATIO[1]
        asr = qa.mode == "full" or (qa.mode == "suspect" and odd)
        asked.append(ToHear(said(seg.first), audio, SAMPLE_RATE, asr=asr and not duration,   # said: without
                            embed=not duration))                                                 # control tokens
        durations.append(duration)                                             # failed: no more checks
    out = []
    for (key, take, seg, audio), duration, rec in zip(jobs, durations, checker.hear_many(asked)):
        rec = {**rec, "version": RECORD_VERSION, "take": take, "seed": reroll_seed(seg.first["seed"], take),
               "audio_path": take_relpath(key, take), "samples": int(len(audio)), "duration": duration}
        if duration:
            rec["checks"], rec["reason"] = ["duration"], duration
        elif guard.enabled:
            rec["checks"] = ["duration", *rec["checks"]]
        _write_record(book_dir, key, take, rec)
        crashpoint("take-heard")
        out.append((key, take, rec))
    return out


def _collect(futures: list[Future], segs: dict[str, _Segment]) -> None:
    for f in futures:
        key, take, rec = f.result()                     # a checker error stops the render (rows stay pending)
        segs[key].takes[take] = rec


def _judge_voices(book_dir: Path, segs: dict[str, _Segment], refs: dict, qa: QAOptions, checker: Checker,
                  all_rows: list[dict]) -> dict:
    """Freeze each voice's reference once its book gives one; judge every take not judged yet against it; in
    suspect mode, transcribe the takes the drift gate flags (in one call, the checker thread idle)."""
    changed = False
    for vid in sorted({s.first["voice_id"] for s in segs.values()}):
        if vid not in refs and (frozen := _reference(book_dir, vid, segs, qa, all_rows)) is not None:
            refs[vid], changed = frozen, True
        if vid not in refs:
            continue
        ref, cutoff = decode_vector(refs[vid]["reference"]), refs[vid]["cutoff"]
        judged = [(k, t, judge_drift(rec, ref, cutoff)) for k, s in sorted(segs.items()) if s.first["voice_id"] == vid
                  for t, rec in sorted(s.takes.items())
                  if rec is not None and rec.get("embedding") and rec.get("similarity") is None]
        odd = [i for i, (_, _, rec) in enumerate(judged)                       # what did the odd voice say?
               if rec["drift"] == FLAG and qa.mode == "suspect" and "asr" not in rec["checks"]]
        for i, rec in zip(odd, _transcribed(book_dir, [(segs[judged[i][0]], judged[i][2]) for i in odd], checker)):
            judged[i] = (*judged[i][:2], rec)
        for k, t, rec in judged:
            segs[k].takes[t] = rec
            _write_record(book_dir, k, t, rec)
    if changed:
        write_bytes(book_dir / QA_JSON, json_bytes({"version": 1, "voices": refs}), durable=True)
    return refs


def _reference(book_dir: Path, vid: str, segs: dict[str, _Segment], qa: QAOptions,
               all_rows: list[dict]) -> dict | None:
    """A voice's reference and cutoff once they can be told: its first accepted takes in reading order
    (checker.voice_reference), waiting on a segment still undecided before them; the cutoff from every heard take
    of the voice (the book's own spread, with the floor).  None: not yet, or the book has too few."""
    ordered, heard = [], []
    for r in all_rows:                                   # reading order (manifests.load sorts)
        if r["voice_id"] != vid:
            continue
        seg = segs.get(r["content_key"])
        if seg is None:
            rec = _kept_record(book_dir, r) if r["status"] == "done" else None
            recs = [rec] if rec else []
        else:
            recs = [rec for _, rec in sorted(seg.takes.items()) if rec is not None]
        heard += recs
        good = next((rec for rec in recs if accepted(rec)), None)
        if good is not None:
            ordered.append(good)
        elif seg is not None and len(ordered) < qa.reference_takes and _next_take(seg, qa) is not None:
            return None                                  # an earlier segment may still give an accepted take
    ref = voice_reference(ordered, qa)
    if ref is None:
        return None
    return {"reference": encode_vector(ref), "cutoff": round(reference_cutoff(heard, ref, qa), 4),
            "takes": min(len(ordered), qa.reference_takes), "heard": sum(bool(r.get("embedding")) for r in heard)}


def reference_keys(book_dir: Path, rows: list[dict], qa: QAOptions, max_attempts: int,
                   skip: Set[str] = frozenset()) -> set[str]:
    """What a sharded render renders before it splits the book (tasks.synthesize.render.render_references): for
    each voice with rows still to render and no drift reference in qa.json, its first content keys to render in
    reading order, as many as qa.reference_takes less the accepted takes its done rows kept (at least one), until
    REFERENCE_ROWS_FACTOR * reference_takes were asked for (then its shards freeze their own).  Empty when every
    voice left to render has its reference.  rows: the book's, in reading order; skip: keys not to ask
    for (rendered already, their takes undecided)."""
    refs, skip = _read_references(book_dir), set(skip)
    todo = {r["content_key"] for r in to_render(rows, max_attempts)} - skip
    keys: set[str] = set()
    for vid in dict.fromkeys(r["voice_id"] for r in rows):
        mine = [r for r in rows if r["voice_id"] == vid]
        left = list(dict.fromkeys(r["content_key"] for r in mine if r["content_key"] in todo))
        asked = len({r["content_key"] for r in mine} & skip)
        if vid in refs or not left or asked >= REFERENCE_ROWS_FACTOR * qa.reference_takes:
            continue
        have = sum(r["status"] == STATUS_DONE and accepted(_kept_record(book_dir, r)) for r in mine)
        keys.update(left[:max(1, qa.reference_takes - have)])
    return keys


def _transcribed(book_dir: Path, takes: list[tuple[_Segment, dict]], checker: Checker) -> list[dict]:
    """The records of these takes (segment, record) with their transcripts and ASR verdicts added."""
    asked = [ToHear(said(seg.first), read_audio(book_dir / rec["audio_path"]), SAMPLE_RATE, asr=True, embed=False)
             for seg, rec in takes]
    return [{**rec, **{f: h[f] for f in ("transcript", "cer", "asr", "language")},
             "checks": sorted(set(rec["checks"]) | {"asr"}, key=CHECK_ORDER.index),
             "reason": rec["reason"] or h["reason"]} for (_, rec), h in zip(takes, checker.hear_many(asked))]


def verdict_of(rec: dict) -> str:
    """A heard take's verdict: flag when any check flags it, else inconclusive when one could not tell."""
    return combine(FLAG if rec.get("duration") else PASS, rec.get("asr") or PASS, rec.get("drift") or PASS)


def _next_take(seg: _Segment, qa: QAOptions) -> int | None:
    """The take to render next, None when the segment is decided (a take passed or was inconclusive, or
    max_takes were tried).  Takes not heard yet, or not judged by a drift gate that exists, are undecided."""
    if not seg.takes:
        return 1
    last = max(seg.takes)
    rec = seg.takes[last]
    if rec is None:
        return last                                     # being heard
    if verdict_of(rec) != FLAG or last >= qa.max_takes:
        return None
    return last + 1


def _waits(seg: _Segment, waiting: set[str]) -> bool:
    """Its last take waits on the drift gate: it has an embedding, and its voice's reference is still to come."""
    rec = seg.takes[max(seg.takes)]
    return seg.first["voice_id"] in waiting and rec is not None and bool(rec.get("embedding")) \
        and rec.get("similarity") is None


def _decide(seg: _Segment, key: str) -> list[dict]:
    """The rows of a decided segment: done with its best take, or failed when every take failed the guard."""
    recs = [rec for t in sorted(seg.takes) if (rec := seg.takes[t]) is not None]
    assert len(recs) == len(seg.takes)                  # decided: every take heard
    public = json.dumps([_public(r) for r in recs], ensure_ascii=False)
    if all(r.get("duration") for r in recs):
        return [{**r, "status": "failed", "samples": 0, "duration_s": 0.0, "take": 0, "takes": public,
                 "error": f"{recs[-1]['duration']} after {len(recs)} attempts", "attempts": len(recs)}
                for r in seg.rows]
    best = min((r for r in recs if not r.get("duration")),
               key=lambda r: (take_rank(verdict_of(r), r.get("cer"), r.get("similarity")), r["take"]))
    return [{**r, "status": "done", "audio_path": best["audio_path"], "samples": best["samples"],
             "duration_s": best["samples"] / SAMPLE_RATE, "error": "", "attempts": len(recs), "take": best["take"],
             "takes": public, "qa": verdict_of(best),
             "qa_checks": ",".join(best["checks"]), "transcript": best.get("transcript") or "",
             "cer": best.get("cer"), "similarity": best.get("similarity")} for r in seg.rows]


def _public(rec: dict) -> dict:
    return {**{f: rec.get(f) for f in PUBLIC}, "verdict": verdict_of(rec)}


def _kept_record(book_dir: Path, row: dict) -> dict | None:
    return read_json(book_dir / check_relpath(row["content_key"], row.get("take") or 1)) or None


def _takes_on_disk(book_dir: Path, key: str) -> dict[int, dict | None]:
    """Takes 1, 2, … whose audio is on disk, with their records (None: not heard yet)."""
    takes: dict[int, dict | None] = {}
    t = 1
    while (book_dir / take_relpath(key, t)).is_file():
        rec = read_json(book_dir / check_relpath(key, t)) or None
        takes[t] = rec if rec and rec.get("version") == RECORD_VERSION else None
        t += 1
    return takes


def _read_references(book_dir: Path) -> dict:
    data = read_json(book_dir / QA_JSON) or {}
    return dict(data.get("voices", {})) if data.get("version") == 1 else {}


def _write_record(book_dir: Path, key: str, take: int, rec: dict) -> None:
    write_bytes(book_dir / check_relpath(key, take), json_bytes(rec), durable=True)


# ------------------------------------------------------------- chosen takes (`chattts-render fix --retake`)

def render_takes(book_dir: Path, engine: Synthesizer, wanted: dict[str, tuple[dict, int]], qa: QAOptions,
                 guard: GuardOptions, checker: Checker) -> dict[str, dict]:
    """Render take t of each key (wanted: key -> (a row of that key, t)) with reroll_seed(seed, t) into
    take_relpath(key, t), durable; each take is heard as render_proofed hears one and judged against its voice's
    frozen reference (qa.json) when there is one; its record is written beside it.  Returns key -> the take's
    record (tasks.synthesize.render.GuardedRenderer.takes: the same without hearing)."""
    refs = _read_references(book_dir)
    requests = [row_request(row, f"{k}#{t}", reroll_seed(row["seed"], t)) for k, (row, t) in wanted.items()]
    out = {}
    for res in engine.synthesize(requests):
        k, t = key_and_take(res.key)
        row = wanted[k][0]
        write_segment_audio(book_dir / take_relpath(k, t), res.audio, SAMPLE_RATE)
        rec = _hear_many(book_dir, [(k, t, _Segment([row]), res.audio)], qa, guard, checker)[0][2]
        if (ref := refs.get(row["voice_id"])) is not None:
            rec = judge_drift(rec, decode_vector(ref["reference"]), ref["cutoff"])
            _write_record(book_dir, k, t, rec)
        out[k] = rec
    return out


def public_take(rec: dict) -> dict:
    """A take as the manifest's `takes` lists it; a take nothing heard (no record version) has verdict "" unless
    the duration check failed it."""
    if rec.get("version") is None:
        return {**{f: rec.get(f) for f in PUBLIC}, "verdict": FLAG if rec.get("duration") else ""}
    return _public(rec)
