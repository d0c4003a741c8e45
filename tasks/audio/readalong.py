"""Read-along text: a chapter's original text with each segment's span in it and its cue time.

The chapter's source stream is its units (title, then paragraphs: tasks.text.segment.chapter_units) joined by
"\\n", as the segmenter and the coverage audit see it.  Every segment's source text is a slice of that stream,
in order (the audit proves it), so `align` finds each one at or after the previous one's end; the text between
them holds only silent material (a "＊＊＊" line, the line breaks between paragraphs).  `read_along` puts the
spans together with the segments' cues (tasks.audio.subtitles.TimedText: the SRT's milliseconds) and `blocks`
lays the chapter out as paragraphs of runs, each run spoken by one segment or by none: what a read-along
document (the EPUB's XHTML, a web player) shows and highlights.

A segment that spans a paragraph break (the segmenter merges very short paragraphs into their neighbour) makes
the paragraphs it touches one block; the break stays inside the run as "\\n" (a line break on the page).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tasks.audio.subtitles import TimedText
from tasks.book import pause_kind
from tasks.bookdir import load_chapters
from tasks.text.segment import chapter_units

PARAGRAPH_PAUSES = ("paragraph", "chapter")   # a segment with this pause_after ends its unit


class TextMismatch(ValueError):
    """A segment's source text is not in the chapter's text after the previous segment (stale text)."""


@dataclass(frozen=True)
class Run:
    text: str                      # original text; "\n" where a segment runs across a paragraph break
    segment: int | None            # position in the chapter's cues (0-based), None: spoken by no segment


@dataclass(frozen=True)
class Block:
    title: bool                    # the chapter title (the first unit) rather than a paragraph
    runs: tuple[Run, ...]


@dataclass(frozen=True)
class ReadAlong:
    """One chapter: its units, each segment's [start, end) in "\\n".join(units), and each segment's cue."""
    title: str
    units: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    cues: tuple[TimedText, ...]

    def blocks(self) -> list[Block]:
        """The chapter's blocks; the first is the title when the first unit is the title (always, but in a
        chapter rebuilt from segments that do not speak it)."""
        return blocks(self.units, self.spans, has_title=bool(self.title.strip()) and self.units[:1] == (self.title,))


def align(units: Sequence[str], texts: Sequence[str]) -> list[tuple[int, int]]:
    """Each segment text's [start, end) in "\\n".join(units), found in order; TextMismatch when one is
    missing."""
    stream = "\n".join(units)
    spans, cursor = [], 0
    for i, text in enumerate(texts):
        at = stream.find(text, cursor) if text else -1
        if at < 0:
            raise TextMismatch(f"segment {i} ({text[:30]!r}) is not in the chapter text after position {cursor}")
        spans.append((at, at + len(text)))
        cursor = at + len(text)
    return spans


def units_from_segments(texts: Sequence[str], pauses: Sequence[str] | None = None) -> list[str]:
    """The chapter's units rebuilt from its segments alone (a book planned before its text was kept): a
    segment whose pause is a paragraph's or the chapter's ends its unit (without pauses, every segment
    does).  Text no segment speaks (a "＊＊＊" paragraph) is not in it."""
    units, cur = [], ""
    for i, text in enumerate(texts):
        cur += text
        if pauses is None or pause_kind(pauses[i]) in PARAGRAPH_PAUSES or i == len(texts) - 1:
            units += cur.split("\n")
            cur = ""
    return units


def read_along(title: str, units: Sequence[str] | None, cues: Sequence[TimedText]) -> ReadAlong:
    """The chapter's read-along text: `units` (title first when the title is not empty) aligned with the cues'
    texts (the segments' source texts).  Without units, or when they no longer match the cues (a text record
    older than the plan), the units are rebuilt from the cues' texts (units_from_segments)."""
    texts = [c.text for c in cues]
    if units is not None:
        try:
            return ReadAlong(title, tuple(units), tuple(align(units, texts)), tuple(cues))
        except TextMismatch:
            pass
    rebuilt = units_from_segments(texts)
    return ReadAlong(title, tuple(rebuilt), tuple(align(rebuilt, texts)), tuple(cues))


def blocks(units: Sequence[str], spans: Sequence[tuple[int, int]], has_title: bool) -> list[Block]:
    """The units as blocks of runs.  Units joined by a segment that crosses the "\\n" between them are one
    block; a block's runs tile its text exactly (spoken runs carry their segment's position)."""
    starts, pos = [], 0
    for u in units:                                   # each unit's offset in the stream
        starts.append(pos)
        pos += len(u) + 1
    groups: list[list[int]] = []                      # unit indices per block
    for k in range(len(units)):
        boundary = starts[k] - 1                      # the "\n" before unit k
        if groups and any(s <= boundary < e for s, e in spans):
            groups[-1].append(k)
        else:
            groups.append([k])
    out = []
    for g in groups:
        lo, hi = starts[g[0]], starts[g[-1]] + len(units[g[-1]])
        stream = "\n".join(units[g[0]:g[-1] + 1])
        runs, at = [], lo
        for i, (s, e) in enumerate(spans):
            if e <= lo or s >= hi:
                continue
            if s > at:
                runs.append(Run(stream[at - lo:s - lo], None))
            runs.append(Run(stream[max(s, lo) - lo:min(e, hi) - lo], i))
            at = min(e, hi)
        if at < hi:
            runs.append(Run(stream[at - lo:hi - lo], None))
        out.append(Block(has_title and g[0] == 0, tuple(r for r in runs if r.text)))
    return out


def load_text(book_dir) -> dict[int, list[str]] | None:
    """Each chapter's units (title, paragraphs: tasks.text.segment.chapter_units) from text.json, for packaging
    without the book; None for a book planned before text.json was written."""
    chapters = load_chapters(book_dir)
    return None if chapters is None else {i: chapter_units(c) for i, c in chapters.items()}
