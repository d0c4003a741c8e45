"""`chattts-render fix BOOK SEGMENT...`: pickups — re-take, choose a take, or override one segment's text, seed or
voice, then re-package only the chapters that changed.  The work is tasks/synthesize/pickups.py's and the stages';
this module parses, holds the book's lock and prints.

    fix BOOK 2.14 --retake        a new take of chapter 2, segment 14 (kept; `--take K` goes back)
    fix BOOK 2.14 --takes         its takes (no model loaded)
    fix BOOK 2.14 --take 1        keep take 1 again (no model loaded)
    fix BOOK 2.14 --text "…"      speak this instead (kept in OUT/<book>/fixes.json, applied at every plan)

With `--out URL` the fix works in the store's scratch folder as a render does (tasks/fleet/attach.py: leased,
pulled — and the named segments' takes and check records with it — and every commit published); `--takes` reads
a temp mirror of the store's book and holds nothing.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from flows import arguments as arg
from flows.arguments import EXIT_OK, UsageError, note_threads, usage
from flows.options import book_path, book_place, engine_options, package_options, qa_options, segment_options
from flows.params import RenderParams
from flows.pipeline import locked
from manifests.store import compact, load
from tasks import stages
from tasks.audio.assemble import AssembleOptions
from tasks.audio.options import LOUDNESS_PRESETS
from tasks.book import LanguageChoice, segment_name
from tasks.bookdir import read_report, reading_language
from tasks.errors import BookError
from tasks.fleet import attach
from tasks.plan.fixes import Fix, parse_name, read_names
from tasks.synthesize.pickups import find_rows, takes_table
from tasks.text.normalize import normalize
from tasks.text.segment import SegmentOptions
from tasks.voice.voices import parse_voice

ACTIONS = ("--retake", "--take", "--takes", "--text/--seed/--voice")


def cmd_fix(a) -> int:
    names = _names(a)
    action = _action(a)
    with usage():                                    # the options a fix reads: checked before the book is looked at
        p = RenderParams(book=a.book, **arg.params_of(a, "fix"))
        engine = engine_options(p)
        segment = segment_options(p, book_path(p.book, p.scratch))
    book_dir, store = book_place(p.book, p.out, p.scratch)
    with attach.viewed(book_dir, store) as (view, pub):    # --out URL: the store's manifest, report.json, book.json
        if load(view).num_rows == 0:
            raise BookError(str(a.book), f"no render found in {store or view}")
        if action == "--takes":
            print(takes_table(view, _rows(view, names, a.book, pub)))
            return EXIT_OK
        last = read_report(view)
        override, spec = _fix_of(a, segment, p.language, view) if action == ACTIONS[3] else (None, None)
    with usage():
        package = package_options(_packaging(a, p, last))
    note_threads(engine)
    with locked(book_dir), attach.attached(book_dir, store) as pub:   # a store: leased, pulled, commits published
        rows = _rows(book_dir, names, a.book, pub)
        rendered, fixed = stages.fix(book_dir, rows, a.book, take=a.take, override=override, voice=spec,
                                     engine=engine, qa=qa_options(p, engine.device))
        for r in fixed:
            print(f"{segment_name(r['chapter'], r['segment'])}: {r['status']}, take {r['take']} kept"
                  + (f" ({r['qa']})" if r["qa"] else "") + (f": {r['error']}" if r["error"] else ""))
        changed = stages.repackage(book_dir, AssembleOptions(), package, p.allow_gaps)
        compact(book_dir)
    chapters = ", ".join(map(str, changed)) if changed is not None else "none (other segments are not rendered: " \
        "render the book, or pass --allow-gaps)"
    print(f"fix: {rendered} segments rendered, chapters re-packaged: {chapters or 'none'}")
    return EXIT_OK


def _packaging(a, p: RenderParams, report: dict) -> RenderParams:
    """p with the packaging options the fix names, else those of the book's last packaging (its report.json)."""
    return replace(p, formats=tuple(a.format.split(",")) if a.format else tuple(report.get("formats") or p.formats),
                   loudness=_last_loudness(report.get("loudness", {}), p.loudness) if a.loudness is None
                   else a.loudness, tempo=report.get("tempo", p.tempo) if a.tempo is None else a.tempo)


def _last_loudness(head: dict, default: float | str) -> float | str:
    """The --loudness of the last packaging (report.json's "loudness"): the preset whose target and ceiling it has,
    else its target."""
    target, ceiling = head.get("target_lufs"), head.get("true_peak_ceiling_dbtp")
    if target is None:
        return default
    return next((name for name, pr in LOUDNESS_PRESETS.items()
                 if (pr.target_lufs, pr.true_peak_dbtp) == (target, ceiling)), target)


def _rows(book_dir: Path, names: list[str], book: str, store) -> list[dict]:
    """The named rows; with a store, their segments' takes and check records pulled where the scratch lacks them."""
    rows = find_rows(load(book_dir).to_pylist(), names, book)
    if store is not None:
        store.pull_takes(rows)
    return rows


def _names(a) -> list[str]:
    names = list(a.segments) + (read_names(Path(a.from_file)) if a.from_file else [])
    if not names:
        raise UsageError("name the segments to fix: CHAPTER.SEGMENT (e.g. 2.14), or --from FILE")
    for n in names:
        try:
            parse_name(n)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return names


def _action(a) -> str:
    """The one thing asked: --retake, --take K, --takes, or an override (--text, --seed, --voice, together)."""
    asked = [x for x, on in zip(ACTIONS, (a.retake, a.take is not None, a.takes,
                                          any(v is not None for v in (a.text, a.seed, a.voice)))) if on]
    if len(asked) != 1:
        raise UsageError(f"fix needs exactly one of {', '.join(ACTIONS)}"
                         + (f" (got {' and '.join(asked)})" if asked else ""))
    return asked[0]


def _fix_of(a, segment: SegmentOptions, language: LanguageChoice, book_dir: Path):
    """(the override, its voice still a placeholder; the parsed --voice spec): checked before the lock or the model.
    The text is read as the book is (`segment`; `language` auto: book_dir's book.json gives the reading language)."""
    lang = reading_language(book_dir) if language == "auto" else language
    seg = replace(segment, normalize=replace(segment.normalize, lang=lang))
    text = None if a.text is None else normalize(a.text, seg.normalize).strip()
    spec = parse_voice(a.voice, a.clip_text, seg) if a.voice is not None else None
    try:                                             # the voice is resolved with the model, under the lock
        return Fix("", text=text, seed=a.seed, voice="(resolved later)" if spec is not None else None), spec
    except ValueError as e:
        raise UsageError(f"--text/--seed: {e}") from None
