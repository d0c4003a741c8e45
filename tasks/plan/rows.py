"""Plan: turn a segmented book into manifest rows — content keys, per-segment seeds, what is already done.

A segment's audio depends only on (text, voice, seed, engine version, controls), so the content key hashes exactly
those, and the audio file is named by it; controls (engine.api.Controls: pace, sampling, the refine pass) enter
the hash only when they differ from the defaults, so every key made before them is the key it was.  The seed is
derived from (text, voice) alone: the same sentence in the same voice always gets the same seed, wherever it sits
and whatever it is batched with.  An edited
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from engine.api import Controls, Request
from engine.units import without_controls
from manifests.status import STATUS_DONE, STATUS_FAILED, STATUS_PENDING
from tasks.book import Book, Segment
from tasks.bookdir import audio_relpath
from tasks.plan.fixes import Fix
from tasks.voice.voices import voice_id

GUARD_REASON_PREFIX = "guard:"   # manifest `error` of a segment the quality guard failed (tasks/synthesize/guard.py)
MAX_ATTEMPTS = 3                 # renders per segment, the first included (GuardOptions.max_attempts' default)
# A row's proof columns (manifests.SCHEMA) before any take: a done row carries its kept take's over a re-plan.
QA_EMPTY = {"take": 0, "takes": "[]", "qa": "", "qa_checks": "", "transcript": "", "cer": None, "similarity": None}


def derive_seed(text: str, vid: str) -> int:
    """A 63-bit seed from the segment's text and the book's voice."""
    h = hashlib.sha256(f"seed\x1f{vid}\x1f{text}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def content_key(text: str, vid: str, seed: int, engine_version: str, controls: str = "") -> str:
    """The audio's name: a hash of what it depends on; `controls` (Controls.key()) only when not the defaults."""
    extra = f"\x1f{controls}" if controls else ""
    return hashlib.sha256(f"{text}\x1f{vid}\x1f{seed}\x1f{engine_version}{extra}".encode()).hexdigest()[:32]


def said(row: dict) -> str:
    """What a row's audio says, as a listener hears it: the refine pass's text when it has one, else its text,
    without ChatTTS's control tokens (what the ASR check compares a take with)."""
    return without_controls(row.get("refined") or row["text"])


def row_request(row: dict, key: str | None = None, seed: int | None = None) -> Request:
    """What the engine is given for a manifest row: its text, voice, seed (or `seed`: a re-roll's, a take's), its
    controls and the refine pass's text when it has one; `key` the request's (default: the row's content key)."""
    return Request(key=key or row["content_key"], text=row["text"], spk_emb=row["spk_emb"],
                   seed=row["seed"] if seed is None else seed, controls=Controls.parse(row.get("controls") or ""),
                   refined=row.get("refined") or None)


def spoken(text: str, spk_emb: str, fix: Fix | None = None) -> tuple[str, str, str, int]:
    """What the engine is given for a segment: (text, voice string, voice id, seed).  A fix (tasks/plan/fixes.py)
    replaces the text, the voice or the seed; the seed not fixed is derived from the (fixed) text and voice."""
    if fix is not None:
        text, spk_emb = fix.text if fix.text is not None else text, fix.voice or spk_emb
    vid = voice_id(spk_emb)
    return text, spk_emb, vid, fix.seed if fix is not None and fix.seed is not None else derive_seed(text, vid)


def plan_rows(book: Book, segments: Sequence[Segment], spk_emb: str, engine_version: str,
              book_dir: Path, previous: dict[str, dict] | None = None, max_attempts: int = MAX_ATTEMPTS,
              voice_of: Callable[[str, str], str] | None = None, adopts: Sequence[str] = (),
              fixes: Mapping[tuple[int, int], Fix] | None = None,
              previous_at: Mapping[tuple[int, int], dict] | None = None,
              directed: Mapping[tuple[int, int], tuple[Controls, str]] | None = None) -> list[dict]:
    """Manifest rows for a new plan.  `previous` maps content_key -> latest row of the old plan (if any):
    a key that was done and whose audio is on disk stays done with its sample count and attempts; a key the
    guard failed after all of its `max_attempts` (GuardOptions') stays failed.  Every segment speaks with
    `spk_emb`, or with voice_of(role, speaker) (a cast: tasks.voice.cast.CastVoices.voice_of).  A segment not done
    under `engine_version` whose key under one of the `adopts` versions is done (audio on disk) keeps that row's
    key, audio and engine version.  `fixes`: overrides by 0-based (chapter, segment) (tasks.plan.fixes.match_fixes):
    the row speaks the fix's text (source_text and subtitles stay the book's), voice and seed.  `previous_at`: the
    old plan's rows by (chapter, segment): a row whose key is unchanged keeps its own kept take (a sentence repeated
    in the book shares its key, and each place may keep another take: `chattts-render fix --take`).  `directed`:
    each segment's controls and pause_after by (chapter, segment) (tasks/plan/direction.directed_segments); a
    segment without an entry gets the defaults and its own pause."""
    titles = {c.index: c.title for c in book.chapters}
    plan_id = uuid.uuid4().hex[:12]
    previous = previous or {}

    def is_done(key: str) -> bool:
        old = previous.get(key)
        return (old is not None and old["status"] == STATUS_DONE
                and (book_dir / (old.get("audio_path") or audio_relpath(key))).is_file())

    rows = []
    for s in segments:
        text, emb, vid, seed = spoken(s.text, voice_of(s.role, s.speaker) if voice_of else spk_emb,
                                      (fixes or {}).get((s.chapter, s.index)))
        controls, pause = (directed or {}).get((s.chapter, s.index), (None, s.pause_after))
        ctl = controls.key() if controls is not None else ""
        keys = {v: content_key(text, vid, seed, v, ctl) for v in (engine_version, *adopts)}
        done_as = next((v for v, k in keys.items() if is_done(k)), None)   # ours first, then the adopted
        done, version = done_as is not None, done_as or engine_version      # not done: render under ours
        key = keys[version]
        here = (previous_at or {}).get((s.chapter, s.index))
        rel, old = audio_relpath(key), here if here is not None and here["content_key"] == key else previous.get(key)
        hopeless = not done and old is not None and is_final_failure(old, max_attempts)   # same audio again
        row = old or {}                     # the old plan's row: there whenever done (is_done read it) or hopeless
        kept = {c: row.get(c, QA_EMPTY[c]) for c in QA_EMPTY} if done else dict(QA_EMPTY)   # the take kept
        if done:
            kept["take"] = kept["take"] or 1
        rows.append({
            "plan_id": plan_id, "chapter": s.chapter, "chapter_title": titles.get(s.chapter, ""),
            "segment": s.index, "text": text, "source_text": s.source_text, "pause_after": pause,
            "content_key": key, "audio_path": row.get("audio_path") or rel if done else rel,
            "status": STATUS_DONE if done else STATUS_FAILED if hopeless else STATUS_PENDING,
            "samples": row["samples"] if done else 0, "duration_s": row["duration_s"] if done else 0.0,
            "voice_id": vid, "spk_emb": emb, "seed": seed, "engine_version": version,
            "error": row["error"] if hopeless else "", "attempts": row["attempts"] if done or hopeless else 0,
            "role": s.role, "speaker": s.speaker, **kept, "controls": ctl,
            "refined": (row.get("refined") or "") if done else "",   # the refine pass's text of the audio kept
        })
    return rows


def is_final_failure(row: dict, max_attempts: int = MAX_ATTEMPTS) -> bool:
    """A row the guard already failed after all its attempts: rendering it again gives the same audio."""
    return (row.get("status") == STATUS_FAILED and (row.get("error") or "").startswith(GUARD_REASON_PREFIX)
            and (row.get("attempts") or 0) >= max_attempts)


def to_render(rows: list[dict], max_attempts: int = MAX_ATTEMPTS) -> list[dict]:
    """The rows a render still renders: not done, and not failed for good (is_final_failure)."""
    return [r for r in rows if r["status"] != STATUS_DONE and not is_final_failure(r, max_attempts)]
