"""Pickups: fix single segments of a rendered book without rendering the rest (`chattts-render fix`).

    rows = find_rows(manifest_rows, ["2.3", "7.1"], book)    # the named rows; BookError for a name not there
    takes_table(book_dir, rows)                              # every take of each: seed, verdict, cer, kept
    new = choose_take(book_dir, rows, 1, book)                # keep take 1 again (committed); no model
    new = retake(book_dir, engine, rows, book, qa, guard, checker)   # a new take, kept (committed)
    new = override(book_dir, rows, Fix(...), engine.version)  # fixes.json + the rows re-keyed, pending (committed)

Every take is kept on disk (tasks.bookdir.take_relpath, its check record beside it: check_relpath); a row keeps
one (`take`, `audio_path`, the proof columns) and lists them all (`takes`).  A take is chosen only among the
takes on disk, so `--take K` gives back exactly the audio that take had.  The composition (the lock, rendering
the overridden rows, packaging only their chapters) is flows/fix.py's.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from engine.api import Synthesizer
from engine.atomic import read_json
from engine.units import SAMPLE_RATE
from manifests.store import commit
from tasks.book import segment_name
from tasks.bookdir import CHAPTERS_JSON, audio_relpath, check_relpath, take_relpath
from tasks.errors import BookError
from tasks.plan.fixes import Fix, load_fixes, parse_name, save_fixes
from tasks.plan.rows import QA_EMPTY, content_key, spoken
from tasks.qa.checker import Checker
from tasks.qa.options import QAOptions
from tasks.synthesize.guard import reroll_seed
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.proof import public_take, verdict_of
from tasks.synthesize.render import renderer_for
from tasks.synthesize.segment_audio import audio_frames

TAKES_HEADER = ("segment", "take", "seed", "verdict", "cer", "similarity", "seconds", "kept")
TAKES_WIDTHS = (8, 5, 20, 13, 6, 10, 8, 4)      # characters per column of `fix --takes`


def find_rows(rows: list[dict], names: list[str], book: str) -> list[dict]:
    """The manifest rows named C.S (1-based), in the order named, each once.  A name not in the manifest:
    BookError naming it (and how many segments its chapter has)."""
    by_pos = {(r["chapter"], r["segment"]): r for r in rows}
    out, seen = [], set()
    for name in names:
        try:
            pos = parse_name(name)
        except ValueError as e:
            raise BookError(book, str(e)) from None
        if pos not in by_pos:
            n = sum(c == pos[0] for c, _ in by_pos)
            where = f"chapter {pos[0] + 1} has {n} segments" if n else f"the book has no chapter {pos[0] + 1}"
            raise BookError(book, f"segment {name}: not in the rendered book ({where})")
        if pos not in seen:
            seen.add(pos)
            out.append(by_pos[pos])
    return out


def take_entries(book_dir: Path, row: dict) -> list[dict]:
    """Every take of the row's segment on disk, 1, 2, …, as the `takes` column lists them: from its check record,
    else from the row's own list, else from the audio (a segment rendered before takes existed has take 1)."""
    listed = {e.get("take"): e for e in json.loads(row.get("takes") or "[]")}
    key, out, t = row["content_key"], [], 1
    while (book_dir / take_relpath(key, t)).is_file():
        rec = read_json(book_dir / check_relpath(key, t)) or None
        if rec:
            out.append(public_take(rec))
        elif t in listed:
            out.append(listed[t])
        else:
            out.append(public_take({"take": t, "seed": _seed_of_take(row, t), "audio_path": take_relpath(key, t),
                                    "samples": audio_frames(book_dir / take_relpath(key, t)) or 0}))
        t += 1
    return out


def _seed_of_take(row: dict, take: int) -> int:
    """The seed a take without a record was rendered with: a render without proof keeps take 1 under the
    attempt the duration guard accepted (tasks.synthesize.render.render_guarded); a re-take, reroll_seed(seed, t)."""
    attempt = max(row.get("attempts") or 1, 1) if take == 1 and row.get("takes", "[]") == "[]" else take
    return reroll_seed(row["seed"], attempt)


def takes_table(book_dir: Path, rows: list[dict]) -> str:
    """`fix --takes`: one line per take of each row (the kept one marked)."""
    lines = [" ".join(f"{h:>{w}}" for h, w in zip(TAKES_HEADER, TAKES_WIDTHS))]
    for r in rows:
        for e in take_entries(book_dir, r):
            cells = (segment_name(r["chapter"], r["segment"]), e["take"], e["seed"], e.get("verdict") or "-",
                     _num(e.get("cer")), _num(e.get("similarity")), f"{(e.get('samples') or 0) / SAMPLE_RATE:.2f}",
                     "*" if e["take"] == (r.get("take") or 0) and r["status"] == "done" else "")
            lines.append(" ".join(f"{c!s:>{w}}" for c, w in zip(cells, TAKES_WIDTHS)))
    return "\n".join(lines)


def choose_take(book_dir: Path, rows: list[dict], take: int, book: str) -> list[dict]:
    """Keep take `take` of each row (its audio must be on disk: BookError naming the segment otherwise, before
    anything is committed); commits and returns the new rows."""
    for r in rows:
        if take < 1 or not (book_dir / take_relpath(r["content_key"], take)).is_file():
            n = len(take_entries(book_dir, r))
            raise BookError(book, f"segment {segment_name(r['chapter'], r['segment'])} has no take {take} "
                                  f"({n} take{'s' if n != 1 else ''} on disk: `fix --takes` lists them)")
    new = [_keeping(book_dir, r, take, take_entries(book_dir, r)) for r in rows]
    commit(book_dir, new)
    return new


def retake(book_dir: Path, engine: Synthesizer, rows: list[dict], book: str, qa: QAOptions | None,
           guard: GuardOptions, checker: Checker | None) -> list[dict]:
    """A new take of each row's segment: take n = (highest take on disk) + 1 with reroll_seed(seed, n), rendered
    (tasks.synthesize.render.renderer_for), heard when qa is on and a checker given, and kept.  Rows of one content
    key (a repeated sentence) share the new take.  A row whose audio another engine made: BookError (its key names
    that engine).  Commits and returns the new rows."""
    versions = (engine.version, *engine.adopts)
    for r in rows:
        if r["engine_version"] not in versions:
            raise BookError(book, f"segment {segment_name(r['chapter'], r['segment'])} was rendered by engine "
                                  f"{r['engine_version']}, this process runs {engine.version}: pass the render's "
                                  "engine options (--model, --dtype, --int8, …)")
    before = {r["content_key"]: take_entries(book_dir, r) for r in rows}
    wanted = {k: (next(r for r in rows if r["content_key"] == k), len(e) + 1) for k, e in before.items()}
    recs = renderer_for(book_dir, engine, guard, qa if checker is not None else None, checker).takes(wanted)
    new = [_keeping(book_dir, r, wanted[r["content_key"]][1],
                    before[r["content_key"]] + [public_take(recs[r["content_key"]])]) for r in rows]
    commit(book_dir, new)
    return new


def _keeping(book_dir: Path, row: dict, take: int, entries: list[dict]) -> dict:
    """The row done with take `take` (on disk): its audio, and the proof columns from its check record (none:
    not checked)."""
    key = row["content_key"]
    rec = read_json(book_dir / check_relpath(key, take)) or {}
    samples = audio_frames(book_dir / take_relpath(key, take)) or 0
    heard = bool(rec.get("version"))
    return {**row, "status": "done", "error": "", "take": take, "audio_path": take_relpath(key, take),
            "samples": samples, "duration_s": samples / SAMPLE_RATE, "takes": json.dumps(entries, ensure_ascii=False),
            "qa": verdict_of(rec) if heard else "", "qa_checks": ",".join(rec.get("checks", [])) if heard else "",
            "transcript": rec.get("transcript") or "", "cer": rec.get("cer"), "similarity": rec.get("similarity")}


def override(book_dir: Path, rows: list[dict], fix: Fix, engine_version: str) -> list[dict]:
    """Persist `fix` (its source_text is ignored: each row's own is recorded) for each row in fixes.json — added
    to the segment's earlier fix — and commit the rows it changes, re-keyed and pending (render them with
    synthesize_book(keys=…)).  Returns the changed rows (a fix that changes nothing, e.g. the seed the row has,
    changes no row)."""
    fixes = load_fixes(book_dir)
    changed = []
    for r in rows:
        name = segment_name(r["chapter"], r["segment"])
        mine = replace(fix, source_text=r["source_text"])
        old = fixes.get(name)
        fixes[name] = old.merged(mine) if old is not None and old.source_text == r["source_text"] else mine
        text, emb, vid, seed = spoken(r["text"], r["spk_emb"], fixes[name])
        key = content_key(text, vid, seed, engine_version, r.get("controls") or "")   # the line's controls stay
        if key != r["content_key"]:
            changed.append({**r, **QA_EMPTY, "text": text, "spk_emb": emb, "voice_id": vid, "seed": seed,
                            "refined": "",
                            "content_key": key, "engine_version": engine_version, "status": "pending",
                            "audio_path": audio_relpath(key), "samples": 0, "duration_s": 0.0, "error": "",
                            "attempts": 0})
    save_fixes(book_dir, fixes)                    # first: a crash before the commit re-plans with the fix
    commit(book_dir, changed)
    return changed


def packaged_chapters(book_dir: Path) -> dict[str, object]:
    """Each chapter's entry of the last packaging's .chapters.json (signature and file hashes), by index."""
    return dict((read_json(Path(book_dir) / CHAPTERS_JSON) or {}).get("chapters", {}))


def repackaged(before: dict[str, object], after: dict[str, object]) -> list[int]:
    """The chapters (1-based) whose packaging changed between two packaged_chapters snapshots."""
    return sorted(int(i) + 1 for i, e in after.items() if before.get(i) != e)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
