"""Helpers shared by the EPUB and TXT readers (and the text front-end): whitespace collapsing, control characters,
Gutenberg boilerplate markers, title cleanup, Roman numerals.  Plain functions, no I/O."""
from __future__ import annotations

import re
import unicodedata

# A title or paragraph longer than this is still kept, but titles are cut here (they are labels).
MAX_TITLE_CHARS = 200  # characters

# Control characters (C0, C1, DEL) except the whitespace ones; stripped from titles and paragraphs.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u200b\u2060\u2028\u2029\ufeff]")
# Any run of whitespace (ASCII, ideographic space, NBSP, ...).
_WS_RE = re.compile(r"\s+")
# Gutenberg markers: the header ends at "*** START OF ..." and the footer starts at "*** END OF ...".
PG_START_RE = re.compile(r"\*{3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG", re.I)
# Older files (1990s-2000s) end their header with the licence: "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*...".
PG_SMALL_PRINT_END_RE = re.compile(r"^\s*\*+\s*END\s*\*?\s*THE SMALL PRINT!", re.I)
PG_END_RE = re.compile(r"\*{3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG", re.I)
PG_END_LINE_RE = re.compile(r"^\s*(?:\*{3}\s*)?END OF (?:THE |THIS )?PROJECT GUTENBERG|^\s*End of (?:the )?Project "
                            r"Gutenberg(?:'s)?\b", re.I)
PG_LICENSE_TITLE_RE = re.compile(r"PROJECT GUTENBERG.{0,5}LICEN[CS]E|^\s*(?:The )?Project Gutenberg eBook of\b", re.I)


ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_sum(s: str) -> int:
    """The value of Roman digits (upper case) by the subtractive rule: a digit before a larger one subtracts
    (IV 4, XC 90).  Whether `s` is a well-formed numeral is the caller's to check."""
    total = 0
    for a, b in zip(s, s[1:] + " "):
        v = ROMAN_VALUES[a]
        total += -v if b != " " and ROMAN_VALUES[b] > v else v
    return total


def is_wide(ch: str) -> bool:
    """East Asian wide/fullwidth characters (CJK ideographs, kana, fullwidth punctuation)."""
    return unicodedata.east_asian_width(ch) in "WF"


def collapse_ws(text: str) -> str:
    """Collapse whitespace runs to one space; a run that holds a line break between two wide (CJK) characters
    is source wrapping and disappears; a run of only ideographic spaces stays one ideographic space."""
    text = _CONTROL_RE.sub("", text)
    if not text:
        return ""
    out: list[str] = []
    pos = 0
    for m in _WS_RE.finditer(text):
        out.append(text[pos:m.start()])
        run = m.group()
        before = text[m.start() - 1] if m.start() > 0 else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if not before or not after:
            rep = ""
        elif ("\n" in run or "\r" in run) and is_wide(before) and is_wide(after):
            rep = ""
        elif set(run) == {"\u3000"}:
            rep = "\u3000"
        else:
            rep = " "
        out.append(rep)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def clean_title(title: str) -> str:
    """Titles are data: control characters removed, whitespace collapsed, length capped."""
    t = collapse_ws(title).strip()
    return t[:MAX_TITLE_CHARS]


def is_pg_boilerplate_title(title: str) -> bool:
    return bool(PG_LICENSE_TITLE_RE.search(title or ""))
