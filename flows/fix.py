"""`chattts-render fix BOOK SEGMENT...`: pickups — re-take, choose a take, or override one segment's text, seed or
voice, then re-package only the chapters that changed.  The work is tasks/synthesize/fix.py's and the stages';
this module parses, holds the book's lock and prints.

    fix BOOK 2.14 --retake        a new take of chapter 2, segment 14 (kept; `--take K` goes back)
    fix BOOK 2.14 --takes         its takes (no model loaded)
    fix BOOK 2.14 --take 1        keep take 1 again (no model loaded)
    fix BOOK 2.14 --text "…"      speak this instead (kept in OUT/<book>/fixes.json, applied at every plan)

With `--out URL` the fix works in the store's scratch folder as a render does (tasks/fleet/storage.py: leased,
pulled — and the named segments' takes and check records with it — and every commit published); `--takes` reads
a temp mirror of the store's book and holds nothing.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from flows import arguments as arg
from flows.arguments import EXIT_OK, UsageError, note_threads, options
from tasks.book import segment_name
from tasks.bookdir import read_report, reading_language
from tasks.errors import BookError
from tasks.fleet import storage
from tasks.plan.fixes import Fix, parse_name, read_names
from tasks.text.normalize import normalize
from tasks.voice.voices import book_voice, parse_voice

ACTIONS = ("--retake", "--take", "--takes", "--text/--seed/--voice")


def arguments(p: argparse.ArgumentParser) -> None:
    """The fix command's own arguments (flows/cli.py registers the command with its BOOK)."""
    p.add_argument("segments", nargs="*", metavar="SEGMENT",
                   help="CHAPTER.SEGMENT, both counted from 1, as the player and the QA page show them")
    p.add_argument("--from", dest="from_file", default=None, metavar="FILE",
                   help="more segments: one CHAPTER.SEGMENT a line (blank lines and # comments allowed)")
    p.add_argument("--retake", action="store_true", help="render a new take of each segment and keep it")
    p.add_argument("--takes", action="store_true", help="list each segment's takes (the model is not loaded)")
    p.add_argument("--take", type=int, default=None, metavar="K", help="keep take K (the model is not loaded)")
    p.add_argument("--text", default=None, help="what the segment says instead (the subtitles keep the book's)")
    p.add_argument("--seed", type=int, default=None, help="render the segment with this seed")
    arg.add(p, "voices")
    arg.add(p, "formats", default=None, help="output formats (default: those of the book's last packaging)")
    arg.add(p, "allow_gaps", help="re-package even if other segments are not rendered (silence in their place)")
    arg.add(p, "output", "engine", "text", "proof")


def cmd_fix(a) -> int:
    from flows.pipeline import locked
    from manifests import compact, load

    names = _names(a)
    action = _action(a)
    params = arg.params_of(a, "output", "engine", "text", "proof", "allow_gaps")
    opts = options(a.book, need_book=False, **params)
    with storage.viewed(opts) as (view, store):      # --out URL: the store's manifest, report.json, book.json
        if load(view).num_rows == 0:
            raise BookError(str(a.book), f"no render found in {opts.store or view}")
        if action == "--takes":
            from tasks.synthesize.fix import takes_table

            print(takes_table(view, _rows(view, names, a.book, store)))
            return EXIT_OK
        formats = a.format.split(",") if a.format else read_report(view).get("formats")
        fix, spec = _fix_of(a, opts, view) if action == ACTIONS[3] else (None, None)
    opts = options(a.book, need_book=False, **params, **({"formats": formats} if formats else {}))
    note_threads(opts.engine)
    with locked(opts), storage.attached(opts) as store:    # a store: leased, pulled, every commit published
        rendered, before, after = _fix(a, opts, names, action, fix, spec, store)
        compact(opts.book_dir)
    chapters = ", ".join(map(str, _changed(before, after))) if after is not None else "none (other segments are " \
        "not rendered: render the book, or pass --allow-gaps)"
    print(f"fix: {rendered} segments rendered, chapters re-packaged: {chapters or 'none'}")
    return EXIT_OK


def _rows(book_dir: Path, names: list[str], book: str, store) -> list[dict]:
    """The named rows; with a store, their segments' takes and check records pulled where the scratch lacks them."""
    from manifests import load
    from tasks.synthesize.fix import find_rows

    rows = find_rows(load(book_dir).to_pylist(), names, book)
    if store is not None:
        store.pull_takes(rows)
    return rows


def _fix(a, opts, names: list[str], action: str, fix: Fix | None, spec, store):
    """Under the lock: change the rows, render what needs it, package.  Returns (segments rendered, the
    chapters' packaging before, after — None when the book cannot be packaged yet)."""
    from manifests import load
    from tasks import stages
    from tasks.qa.checker import checker_for
    from tasks.synthesize.fix import choose_take, override, packaged_chapters, retake
    from tasks.synthesize.render import synthesize_book

    book_dir = opts.book_dir
    rows = _rows(book_dir, names, a.book, store)
    before, rendered = packaged_chapters(book_dir), 0
    if action == "--take":
        new = choose_take(book_dir, rows, a.take, a.book)
    else:
        engine = stages.get_engine(opts)
        qa = stages.qa_options(opts, engine)
        checker = checker_for(qa) if qa.mode != "off" else None
        if checker is not None:
            checker.load()                               # a missing extra or model: one line, nothing rendered
        if action == "--retake":
            new = retake(book_dir, engine, rows, a.book, qa, opts.guard, checker)
            rendered = len({r["content_key"] for r in new})
        else:
            if spec is not None:
                fix = replace(fix, voice=book_voice(spec, None, engine))   # resolved once, stored as a string
            changed = override(book_dir, rows, fix, engine.version)
            counts = synthesize_book(book_dir, engine, guard=opts.guard, qa=qa, checker=checker,
                                     keys={r["content_key"] for r in changed})
            rendered = counts["rendered"] + counts["adopted"]
            new = [*changed, *(r for r in rows if r["content_key"] not in {c["content_key"] for c in changed})]
    for r in sorted(load(book_dir).to_pylist(), key=lambda r: (r["chapter"], r["segment"])):
        if any((r["chapter"], r["segment"]) == (n["chapter"], n["segment"]) for n in new):
            print(f"{segment_name(r['chapter'], r['segment'])}: {r['status']}, take {r['take']} kept"
                  + (f" ({r['qa']})" if r["qa"] else "") + (f": {r['error']}" if r["error"] else ""))
    if not opts.allow_gaps and any(r["status"] != "done" for r in load(book_dir).to_pylist()):
        return rendered, before, None
    stages.package(book_dir, opts)
    return rendered, before, packaged_chapters(book_dir)


def _changed(before: dict, after: dict) -> list[int]:
    from tasks.synthesize.fix import repackaged

    return repackaged(before, after)


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


def _fix_of(a, opts, book_dir: Path):
    """(the override, its voice still a placeholder; the parsed --voice spec): checked before the lock or the model.
    book_dir holds the book.json that gives the book's reading language."""
    seg = replace(opts.segment, lang=reading_language(book_dir) if opts.language == "auto" else opts.language)
    text = None if a.text is None else normalize(a.text, t2s=seg.t2s, lexicon=seg.lexicon, tn=seg.tn,
                                                 lang=seg.lang).strip()
    spec = parse_voice(a.voice, a.clip_text, seg) if a.voice is not None else None
    try:                                             # the voice is resolved with the model, under the lock
        return Fix("", text=text, seed=a.seed, voice="(resolved later)" if spec is not None else None), spec
    except ValueError as e:
        raise UsageError(f"--text/--seed: {e}") from None
