"""Coverage audit: proof that every source character of a chapter is spoken in exactly one segment, or was
removed for a listed reason.  The render refuses to start while any report has `unexplained` entries.

The chapter's source stream is its units (title, paragraphs) joined by "\\n".  Segments must consume it in order:
each segment's `source_text` is found at or after the cursor; the skipped text between segments may hold only
silent material (marks, spaces, removed characters).  Inside each segment the removals are listed from the
normalization map, and the segment's speech must equal the normalization of its own source.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from tasks.book import Chapter, Segment
from tasks.text.normalize import iter_spans, printable, removals
from tasks.text.segment import SegmentOptions, chapter_units
from tasks.text.t2s import simplified

MAX_LISTED = 2_000          # entries: per-chapter cap on listed removals (the count stays exact)


def _speech(text: str) -> str:
    """Only what is spoken: letters and CJK (drops marks and spaces)."""
    return "".join(c for c in text if c.isalnum())


def _same_speech(a: str, b: str) -> bool:
    """Equal speech, up to letter case and Traditional/Simplified phrase context (OpenCC converts some
    characters differently inside a phrase, and a segment boundary can fall inside one; 著 is written 着 by its
    neighbours and its paragraph, tasks/text/zhe.py, and a segment alone may lack them)."""
    a, b = _speech(a).lower(), _speech(b).lower()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    return all(x == y or _t2s_char(x) == _t2s_char(y) or x + y in ("着著", "著着") for x, y in zip(a, b))


@lru_cache(maxsize=16_384)
def _t2s_char(c: str) -> str:
    return simplified(c)


@dataclass
class CoverageReport:
    chapter: int
    title: str
    source_chars: int = 0            # characters in the chapter's source stream (units joined by "\n")
    segment_chars: int = 0           # source characters inside segments
    segments: int = 0
    # Entries carry pos (offset in the chapter's stream), para (-1 = title) and offset (in that paragraph).
    removed: list[dict] = field(default_factory=list)       # {pos, para, offset, text, reason}: unspeakable
    removed_count: int = 0                                   # removed characters (exact, even past the cap)
    removed_by_reason: dict[str, int] = field(default_factory=dict)
    silent_outside: int = 0          # marks/spaces outside any segment (between paragraphs, '……' lines)
    unexplained: list[dict] = field(default_factory=list)   # {pos, para, offset, text, problem}: must be empty

    @property
    def ok(self) -> bool:
        return not self.unexplained

    @property
    def coverage(self) -> float:
        """Share of source characters that are in a segment or explained (1.0 when nothing is unexplained)."""
        bad = sum(len(u["text"]) for u in self.unexplained)
        return 1.0 if self.source_chars == 0 else 1.0 - bad / self.source_chars

    def to_dict(self) -> dict:
        d = asdict(self)
        d["coverage"] = self.coverage
        d["ok"] = self.ok
        return d


def _explain_gap(rep: CoverageReport, gap: str, base: int, opts: SegmentOptions, counts: Counter) -> None:
    """Text between segments: only silent material is allowed."""
    if not gap:
        return
    for sp in iter_spans(gap, opts.normalize):
        if sp.kind == "removed":
            continue
        if _speech(sp.out):
            rep.unexplained.append({"pos": base + sp.start, "text": printable(gap[sp.start:sp.end]),
                                    "problem": "speakable text in no segment"})
        else:
            rep.silent_outside += sp.end - sp.start
    _add_removals(rep, gap, base, opts, counts)


def _add_removals(rep: CoverageReport, text: str, base: int, opts: SegmentOptions, counts: Counter) -> None:
    spans = iter_spans(text, opts.normalize)
    for r in removals(spans, text, base):
        counts[r.reason] += len(r.text)
        rep.removed_count += len(r.text)
        if len(rep.removed) < MAX_LISTED:
            rep.removed.append(r.as_dict())


def audit_chapter(chapter: Chapter, segments: Iterable[Segment], *,
                  opts: SegmentOptions = SegmentOptions()) -> CoverageReport:
    """Check that `segments` cover `chapter` exactly; list removals and anything unexplained."""
    stream = "\n".join(chapter_units(chapter))
    rep = CoverageReport(chapter=chapter.index, title=chapter.title, source_chars=len(stream))
    counts: Counter = Counter()
    joins = _joins(chapter)
    cursor = 0
    expected_index = 0
    for seg in segments:
        rep.segments += 1
        if seg.chapter != chapter.index or seg.index != expected_index:
            rep.unexplained.append({"pos": cursor, "text": "",
                                    "problem": f"segment {seg.chapter}/{seg.index} out of order "
                                               f"(expected {chapter.index}/{expected_index})"})
        expected_index = seg.index + 1
        src = seg.source_text
        at = stream.find(src, cursor) if src else -1
        if at < 0:
            rep.unexplained.append({"pos": cursor, "text": printable(src[:200]),
                                    "problem": f"segment {seg.index}: source text not found after position "
                                               f"{cursor} (overlap, reorder or foreign text)"})
            continue
        _explain_gap(rep, stream[cursor:at], cursor, opts, counts)
        rep.segment_chars += len(src)
        _add_removals(rep, src, at, opts, counts)
        if not _speech(seg.text):
            rep.unexplained.append({"pos": at, "text": printable(src[:200]),
                                    "problem": f"segment {seg.index} is silent"})
        else:
            expect = _reading(stream, at, at + len(src), joins, opts)
            if not _same_speech(expect, seg.text):
                rep.unexplained.append({"pos": at, "text": printable(src[:200]),
                                        "problem": f"segment {seg.index}: text does not match its source "
                                                   f"({seg.text[:60]!r} vs {expect[:60]!r})"})
        cursor = at + len(src)
    _explain_gap(rep, stream[cursor:], cursor, opts, counts)
    rep.removed_by_reason = dict(sorted(counts.items()))
    _locate(rep, chapter)
    return rep


def _joins(chapter: Chapter) -> list[int]:
    """Positions of the "\\n"s that join the chapter's units in its stream (a unit may hold newlines of its own)."""
    joins, pos = [], -1
    for u in chapter_units(chapter)[:-1]:
        pos += len(u) + 1
        joins.append(pos)
    return joins


def _reading(stream: str, start: int, end: int, joins: list[int], opts: SegmentOptions) -> str:
    """What stream[start:end] reads as, each unit's piece normalized alone as the segmenter normalizes it (a
    segment that spans paragraphs: `I.` opening a paragraph is a heading numeral, inside one it is a word)."""
    cuts = [j for j in joins[bisect_right(joins, start - 1):] if j < end]
    bounds = [start, *[p for j in cuts for p in (j, j + 1)], end]
    out = []
    for a, b in zip(bounds[::2], bounds[1::2]):
        spans = iter_spans(stream[a:b], opts.normalize)
        out.append("".join(sp.out for sp in spans))
    return "".join(out)


def _locate(rep: CoverageReport, chapter: Chapter) -> None:
    """Add where each entry is: `para` (0-based paragraph index, -1 for the title) and `offset` in it."""
    units = chapter_units(chapter)
    has_title = bool(units) and units[0] is chapter.title
    starts, pos = [], 0
    for u in units:
        starts.append(pos)
        pos += len(u) + 1
    for entry in (*rep.removed, *rep.unexplained):
        i = max(0, bisect_right(starts, entry["pos"]) - 1) if starts else 0
        entry["para"] = i - 1 if has_title else i
        entry["offset"] = entry["pos"] - (starts[i] if starts else 0)
