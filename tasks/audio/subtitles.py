"""Subtitles from the assembly's cues: SRT, WebVTT and LRC, per chapter and book-wide (the M4B's timeline).

Cue times are the assembly's segment boundaries, rounded to the nearest millisecond (exact integer
arithmetic on sample positions); the text is the segment's original source text.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from engine.units import speakable_chars
from tasks.audio.assemble import Cue
from tasks.audio.options import SUBTITLE_FORMATS


@dataclass(frozen=True)
class TimedText:
    """A cue on some timeline, in integer milliseconds."""
    start_ms: int
    end_ms: int
    text: str


def to_ms(seconds: Fraction) -> int:
    """Round half up to the nearest millisecond."""
    return int((seconds * 1000 + Fraction(1, 2)) // 1)


def timed(cues: Sequence[Cue], sample_rate: int, offset: Fraction = Fraction(0)) -> list[TimedText]:
    """The cues as millisecond TimedText, shifted by `offset` seconds (a chapter's start in the book)."""
    out = []
    for c in cues:
        start = offset + Fraction(c.start_sample, sample_rate)
        end = offset + Fraction(c.end_sample, sample_rate)
        out.append(TimedText(to_ms(start), to_ms(end), c.text))
    return out


_SENTENCE = re.compile(r"[^。！？!?…]*(?:[。！？!?…]+[”」』）)\"'’]*|$)")


def split_sentences(text: str) -> list[str]:
    """`text` cut after sentence-ending punctuation (closing quotes stay with their sentence)."""
    parts = [m.group(0) for m in _SENTENCE.finditer(text) if m.group(0).strip()]
    return parts or [text]


def by_sentence(items: Sequence[TimedText]) -> list[TimedText]:
    """Each cue split into its sentences, the cue's time shared by speakable characters (an estimate inside
    the cue; the cue's own start and end, the assembly's segment boundaries, stay exact)."""

    out: list[TimedText] = []
    for t in items:
        parts = split_sentences(t.text)
        if len(parts) == 1:
            out.append(t)
            continue
        weights = [speakable_chars(p) + 1 for p in parts]
        total, acc, start = sum(weights), 0, t.start_ms
        for p, w in zip(parts, weights):
            acc += w
            end = t.start_ms + (t.end_ms - t.start_ms) * acc // total
            out.append(TimedText(start, end, p.strip()))
            start = end
    return out


def _lines(text: str) -> list[str]:
    """Non-empty, whitespace-collapsed lines (a blank line would end an SRT/VTT cue)."""
    return [re.sub(r"[ \t\u3000]+", " ", ln).strip() for ln in re.split(r"\r\n|\r|\n", text)
            if ln.strip()] or ["…"]


def _clock(ms: int, sep: str) -> str:
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def srt(items: Sequence[TimedText]) -> str:
    blocks = []
    for i, t in enumerate(items, 1):
        blocks.append(f"{i}\n{_clock(t.start_ms, ',')} --> {_clock(t.end_ms, ',')}\n" + "\n".join(_lines(t.text)))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def vtt(items: Sequence[TimedText]) -> str:
    def esc(s: str) -> str:
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    blocks = ["WEBVTT"]
    for i, t in enumerate(items, 1):
        blocks.append(f"{i}\n{_clock(t.start_ms, '.')} --> {_clock(t.end_ms, '.')}\n"
                      + "\n".join(esc(ln) for ln in _lines(t.text)))
    return "\n\n".join(blocks) + "\n"


def lrc(items: Sequence[TimedText], title: str = "", artist: str = "", album: str = "") -> str:
    """LRC with millisecond stamps `[mm:ss.mmm]`; an empty stamped line marks the end of the last cue."""
    def stamp(ms: int) -> str:
        m, rem = divmod(ms, 60_000)
        s, ms = divmod(rem, 1000)
        return f"[{m:02d}:{s:02d}.{ms:03d}]"

    def tag(v: str) -> str:
        return " ".join(_lines(v)).replace("[", "(").replace("]", ")")

    head = []
    for key, value in (("ti", title), ("ar", artist), ("al", album)):
        if value:
            head.append(f"[{key}:{tag(value)}]")
    if items:
        total = items[-1].end_ms
        head.append(f"[length:{total // 60_000:02d}:{total % 60_000 // 1000:02d}]")
    body = []
    for i, t in enumerate(items):
        body.append(stamp(t.start_ms) + " ".join(_lines(t.text)))
        nxt = items[i + 1].start_ms if i + 1 < len(items) else None
        if nxt is None or nxt > t.end_ms:
            body.append(stamp(t.end_ms))               # the line ends before the next starts (a pause)
    return "\n".join(head + body) + "\n"


def render(fmt: str, items: Sequence[TimedText], title: str = "", artist: str = "", album: str = "") -> str:
    if fmt == "srt":
        return srt(items)
    if fmt == "vtt":
        return vtt(items)
    if fmt == "lrc":
        return lrc(items, title, artist, album)
    raise ValueError(f"unknown subtitle format {fmt!r}; choose from {', '.join(SUBTITLE_FORMATS)}")
