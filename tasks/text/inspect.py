"""`chattts-render inspect BOOK`: what a render would speak, before rendering it.

`inspect_book(book, opts)` segments and audits every chapter and returns a JSON-ready dict; `format_inspect(d)`
prints it for a terminal.  The CLI wiring (and `--json`) lives in flows/.
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from engine.units import compact, estimate_seconds, hms
from tasks.book import Book, Run, Segment, SetAside, segment_name
from tasks.text.coverage import audit_chapter
from tasks.text.polyphones import polyphone_words
from tasks.text.segment import SegmentOptions, iter_segments

MAX_LISTED_REMOVALS = 20     # removals shown by format_inspect (the JSON keeps each chapter's list)
MAX_LISTED_POLYPHONES = 100  # polyphonic words shown by format_inspect (the JSON has them all)
MAX_LISTED_SPEAKERS = 30     # speaker names shown by format_inspect with a cast (the JSON has them all)
TITLE_WIDTH = 28             # characters of a chapter title shown in the table
LANGUAGE_NAMES = {"zh": "Chinese", "en": "English"}


def inspect_book(book: Book, opts: SegmentOptions = SegmentOptions(),
                 runs: Mapping[int, Mapping[int, Sequence[Run]]] | None = None, segments: bool = False,
                 polyphones: bool = False, direct: Callable[[list[Segment]], tuple] | None = None) -> dict:
    """Title, author, encoding, the declared `language` and the `reading_language` (opts.lang: resolved by the
    caller, tasks.text.segment.book_options), per-chapter characters/segments/estimated seconds, and the coverage
    reports.
    With a cast's `runs` (chapter -> paragraph -> runs, tasks/text/quotes.book_runs): quotes are segmented
    apart, and "parts" tallies segments and source characters per (role, speaker).  With `segments`: every
    segment as the manifest will hold it — chapter and segment (0-based, the manifest's), `name` (C.S, 1-based,
    as the player and `fix` show it), `text` (what ChatTTS is given), `source_text` (the book's), its pause,
    role and speaker, and its estimated seconds.  With `polyphones`: the words of what ChatTTS is given that hold
    a character of more than one reading in use, most frequent first (tasks/text/polyphones.polyphone_words).
    `direct` (tasks/plan/prepare.direct_book): with `segments`, each one's text as directed, its `controls`
    (engine.api.Controls.key(): "" for the defaults) and pause; the direction's notes in "direction_notes"."""
    parts: Counter = Counter()
    chapters = []
    reports = []
    removed: Counter = Counter()
    unexplained: list[dict] = []
    total_chars = total_segs = 0
    total_secs = 0.0
    listed = []
    spoken: list[tuple[str, str]] = []
    every: list[Segment] = []
    for ch in book.chapters:
        segs = list(iter_segments(ch, opts=opts, runs=(runs or {}).get(ch.index)))
        if segments:
            listed += [segment_entry(s) for s in segs]
            every += segs
        if polyphones:
            spoken += [(segment_name(s.chapter, s.index), s.text) for s in segs]
        rep = audit_chapter(ch, segs, opts=opts)
        for s in segs:
            parts[(s.role, s.speaker, "segments")] += 1
            parts[(s.role, s.speaker, "characters")] += len(s.source_text)
        chars = len(ch.title) + sum(len(p) for p in ch.paragraphs)
        secs = sum(estimate_seconds(s.text) for s in segs)
        chapters.append({"index": ch.index, "title": ch.title, "paragraphs": len(ch.paragraphs),
                         "characters": chars, "segments": len(segs), "estimated_seconds": round(secs, 1),
                         "max_segment_chars": max((len(s.text) for s in segs), default=0),
                         "coverage_ok": rep.ok})
        reports.append(rep.to_dict())
        removed.update(rep.removed_by_reason)
        unexplained.extend({"chapter": ch.index, **u} for u in rep.unexplained)
        total_chars += chars
        total_segs += len(segs)
        total_secs += secs
    notes: list[str] = []
    if segments and direct is not None:
        directed, by_pos, notes = direct(every)
        for entry, s in zip(listed, directed):
            controls, pause = by_pos[(s.chapter, s.index)]
            entry.update(text=s.text, pause_after=pause, controls=controls.key(), speed=controls.speed)
    m = book.meta
    return {
        "title": m.title, "author": m.author, "language": m.language, "reading_language": opts.lang,
        "source_path": m.source_path,
        "source_format": m.source_format, "encoding": m.encoding,
        "options": {"target_seconds": opts.target_seconds, "max_seconds": opts.max_seconds,
                    "max_chars": opts.max_chars, "min_chars": opts.min_chars, "max_words": opts.max_words,
                    "min_words": opts.min_words, "t2s": opts.normalize.t2s, "tn": opts.normalize.tn,
                    "lexicon_entries": len(opts.normalize.lexicon.entries) if opts.normalize.lexicon else 0},
        "totals": {"chapters": len(chapters), "characters": total_chars, "segments": total_segs,
                   "estimated_seconds": round(total_secs, 1)},
        "chapters": chapters,
        "coverage": {"ok": not unexplained, "unexplained": unexplained,
                     "removed_by_reason": dict(sorted(removed.items())),
                     "removed_count": sum(removed.values())},
        "coverage_reports": reports,
        "set_aside": [set_aside_entry(s) for s in book.set_aside],
        **({"parts": [{"role": r, "speaker": sp, "segments": n, "characters": parts[(r, sp, "characters")]}
                      for (r, sp, what), n in parts.items() if what == "segments"]} if runs is not None else {}),
        **({"segments": listed} if segments else {}),
        **({"direction_notes": notes} if notes else {}),
        **({"polyphones": polyphone_words(spoken)} if polyphones else {}),
    }


def set_aside_entry(s: SetAside) -> dict:
    """What was not read and why, as inspect and coverage.json list it (tasks/ingest/matter.py)."""
    return {"number": s.number, "kind": s.kind, "title": s.title, "reason": s.reason, "after_chapter": s.after,
            "paragraphs": len(s.paragraphs), "characters": s.characters, "text": list(s.paragraphs)}


def segment_entry(s: Segment) -> dict:
    """One segment as `inspect --segments` lists it (the manifest's names for its fields)."""
    return {"chapter": s.chapter, "segment": s.index, "name": segment_name(s.chapter, s.index), "text": s.text,
            "source_text": s.source_text, "pause_after": s.pause_after, "role": s.role, "speaker": s.speaker,
            "estimated_seconds": round(estimate_seconds(s.text), 1)}


def _width(text: str) -> int:
    """Terminal columns: East Asian wide/full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    while _width(text) > width:
        text = text[:-2] + "…"
    return text


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _where(entry: dict) -> str:
    para = entry.get("para")
    if para is None:
        return f"pos {entry['pos']}"
    return ("title" if para < 0 else f"paragraph {para}") + f" char {entry.get('offset', 0)}"


def format_inspect(d: dict) -> str:
    """A terminal rendering of inspect_book's dict."""
    t = d["totals"]
    lines = [
        f"Title:     {d['title']}",
        f"Author:    {d['author'] or '-'}",
        f"Source:    {d['source_path'] or '-'} ({d['source_format']}, {d['encoding']})",
        f"Language:  read as {LANGUAGE_NAMES[d['reading_language']]} ({d['reading_language']}; the book declares "
        f"{d['language'] or 'none'})",
        f"Chapters:  {t['chapters']}   characters: {t['characters']:,}   segments: {t['segments']:,}   "
        f"estimated: {hms(t['estimated_seconds'])}",
        "",
        f"{'#':>4}  {'title':<{TITLE_WIDTH}}  {'chars':>8}  {'segs':>5}  {'est.':>8}  coverage",
    ]
    for c in d["chapters"]:
        lines.append(f"{c['index'] + 1:>4}  {_pad(_clip(c['title'] or '(untitled)', TITLE_WIDTH), TITLE_WIDTH)}  "
                     f"{c['characters']:>8,}  {c['segments']:>5}  {hms(c['estimated_seconds']):>8}  "
                     f"{'ok' if c['coverage_ok'] else 'UNEXPLAINED'}")
    cov = d["coverage"]
    lines.append("")
    if cov["ok"]:
        lines.append("Coverage:  100% - every character is in a segment or removed for a listed reason")
    else:
        lines.append(f"Coverage:  {len(cov['unexplained'])} UNEXPLAINED problem(s) - the render will not start:")
        for u in cov["unexplained"][:MAX_LISTED_REMOVALS]:
            lines.append(f"    chapter {u['chapter']} {_where(u)}: {u['problem']}  {_clip(u['text'], 40)!r}")
    if cov["removed_count"]:
        reasons = ", ".join(f"{k} {v}" for k, v in cov["removed_by_reason"].items())
        lines.append(f"Removed:   {cov['removed_count']} unspeakable character(s): {reasons}")
        shown = 0
        for rep in d["coverage_reports"]:
            for r in rep["removed"]:
                if shown >= MAX_LISTED_REMOVALS:
                    break
                lines.append(f"    chapter {rep['chapter']} {_where(r)}: {r['text']!r} ({r['reason']})")
                shown += 1
        if sum(len(rep["removed"]) for rep in d["coverage_reports"]) > shown:
            lines.append("    ... (all of them in --json)")
    if d.get("set_aside"):
        lines += _format_set_aside(d["set_aside"])
    if "cast" in d:
        lines += _format_cast(d["cast"])
    if "segments" in d:
        lines += _format_segments(d["segments"])
    for note in d.get("direction_notes", []):
        lines.append(f"note: {note}")
    if "polyphones" in d:
        lines += _format_polyphones(d["polyphones"])
    return "\n".join(lines)


def _format_set_aside(items: list[dict]) -> list[str]:
    """What is not read: number (for --include N), kind, where, size, title and why."""
    lines = ["", f"Set aside: {len(items)} item(s) not read aloud "
                 "(--include KIND or N brings one back, --skip KIND or N sets more aside):",
             f"{'#':>4}  {'kind':<15}  {'where':<18}  {'chars':>7}  title — why"]
    for s in items:
        where = "before chapter 1" if s["after_chapter"] == 0 else f"after chapter {s['after_chapter']}"
        lines.append(f"{s['number']:>4}  {s['kind']:<15}  {where:<18}  {s['characters']:>7,}  "
                     f"{_clip(s['title'], TITLE_WIDTH)} — {s['reason']}")
    return lines


def _format_segments(segments: list[dict]) -> list[str]:
    """Every segment: its C.S name and what ChatTTS is given (its controls where they are not the defaults, its
    status in a render); below it, the book's text where that differs, and the refine pass's text after a render
    that ran it."""
    lines = ["", f"Segments:  {len(segments)} (C.S  what ChatTTS is given  {{controls}};  < the book's text, where it "
                 "differs;  ~ the refine pass's text)"]
    width = max((len(s["name"]) for s in segments), default=3)
    for s in segments:
        who = f"  [{s['role']}{': ' + s['speaker'] if s['speaker'] else ''}]" if s["role"] != "narrator" else ""
        how = f"  {{{s['controls']}}}" if s.get("controls") else ""
        status = f"  ({s['status']})" if s.get("status") else ""
        pause = f"  +{s['pause_after'].split('@')[1]} s" if "@" in s["pause_after"] else ""
        lines.append(f"{s['name']:>{width}}  {s['text']}{how}{pause}{who}{status}")
        if " ".join(s["source_text"].split()) != s["text"]:
            lines.append(f"{'<':>{width}}  {' '.join(s['source_text'].split())}")
        if s.get("refined"):
            lines.append(f"{'~':>{width}}  {compact(s['refined'])}")
    return lines


def _format_polyphones(words: list[dict]) -> list[str]:
    """The polyphonic words: count, word, pypinyin's reading (and the lexicon line that asks for it), the readings
    of its polyphones, and where it first occurs."""
    lines = ["", f"Polyphones: {len(words)} words hold a character of more than one reading "
                 f"({sum(w['count'] for w in words):,} occurrences); to steer one, a lexicon line word<TAB>reading:"]
    for w in words[:MAX_LISTED_POLYPHONES]:
        alts = "  ".join(f"{c} {'/'.join(rs)}" for c, rs in w["polyphones"].items())
        how = "phrase" if w["phrase"] else "chars"
        lines.append(f"  {w['count']:>7,}  {w['word']}\t{w['lexicon']:<16}  {w['reading']}  ({how}; {alts})  "
                     f"{w['sample']['name']}: {' '.join(w['sample']['text'].split())}")
    if len(words) > MAX_LISTED_POLYPHONES:
        lines.append("    ... (all of them in --json)")
    return lines


def _format_cast(c: dict) -> list[str]:
    """The cast section (tasks/voice/cast.cast_report): parts with voice, segments, characters, share; speakers."""
    lines = ["", f"Cast:      {c['file']}",
             f"    {'part':<14}  {'voice':<24}  {'segs':>6}  {'chars':>9}  {'share':>6}"]
    for r in c["parts"]:
        lines.append(f"    {_pad(_clip(r['part'], 14), 14)}  {_pad(_clip(r['voice'], 24), 24)}  {r['segments']:>6}  "
                     f"{r['characters']:>9,}  {r['share']:>6.1%}")
    found = c["speakers"]
    lines.append(f"Speakers:  the text names {len(found)} speakers in {sum(s['quotes'] for s in found)} of "
                 f"{len(c['quotes'])} quotes (the others speak in the dialogue voice)")
    for s in found[:MAX_LISTED_SPEAKERS]:
        lines.append(f"    {_pad(_clip(s['name'], 14), 14)}  {s['quotes']:>6} quotes  -> {s['part']}")
    if len(found) > MAX_LISTED_SPEAKERS:
        lines.append("    ... (all of them, and every quote, in --json)")
    return lines
