"""Fixes: per-segment overrides made by `chattts-render fix`, kept in OUT/<book>/fixes.json and applied at every plan.

    fixes = load_fixes(book_dir)                      # {"2.3": Fix(source_text, text=…, seed=…, voice=…)}
    overrides, dropped = match_fixes(fixes, segments) # {(chapter, segment): Fix}, names no longer matching

A segment is named as the player and the QA page show it: "C.S", chapter and segment counted from 1 (the row's
chapter + 1 and segment + 1).  A fix is keyed by that name *and* the segment's original text (source_text): when an
edit of the book moves another sentence to that place, the fix no longer matches and is dropped (with a note)
rather than applied to the wrong sentence.  A fix's `text` replaces what ChatTTS is given (the subtitles keep the
original); `seed` replaces the derived seed; `voice` (a voice string, resolved once with the model) replaces the
book's voice for that segment (tasks/plan/rows.plan_rows).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.atomic import read_json, write_bytes
from tasks.bookdir import FIXES_JSON, json_bytes
from tasks.errors import BookError

FIXES_VERSION = 1                               # of fixes.json
NAME_RE = re.compile(r"^(\d+)\.(\d+)$")         # C.S, both 1-based
MAX_SEED = 2 ** 63                              # seeds are 63-bit (tasks/plan/rows.derive_seed)


@dataclass(frozen=True)
class Fix:
    source_text: str                 # the segment's original text when the fix was made: it must still match
    text: str | None = None          # what ChatTTS is given instead of the segment's normalized text
    seed: int | None = None          # replaces the derived seed
    voice: str | None = None         # a voice string (engine.voice), replaces the book's voice for this segment

    def __post_init__(self) -> None:
        """Raise ValueError naming the problem: every instance is valid."""
        if self.text is None and self.seed is None and self.voice is None:
            raise ValueError("a fix changes the text, the seed or the voice")
        if self.text is not None and not self.text.strip("，。、！？ "):
            raise ValueError("the fix's text has nothing to speak")
        if self.seed is not None and not 0 <= self.seed < MAX_SEED:
            raise ValueError(f"seed {self.seed} is outside 0..2^63-1")
        if self.voice is not None and not self.voice:
            raise ValueError("the fix's voice is empty")

    def merged(self, newer: Fix) -> Fix:
        """This fix with what `newer` sets replacing it (a second fix of the same segment adds to the first)."""
        return Fix(newer.source_text, newer.text if newer.text is not None else self.text,
                   newer.seed if newer.seed is not None else self.seed,
                   newer.voice if newer.voice is not None else self.voice)


def parse_name(name: str) -> tuple[int, int]:
    """"C.S" (1-based) -> 0-based (chapter, segment); ValueError naming it otherwise."""
    m = NAME_RE.match(name.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ValueError(f"segment {name!r} is not CHAPTER.SEGMENT (both counted from 1, e.g. 2.14)")
    return int(m.group(1)) - 1, int(m.group(2)) - 1


def read_names(path: Path) -> list[str]:
    """The segment names of a --from file: one C.S a line; blank lines and `# comments` are skipped.  A missing
    file or a bad line: BookError naming the file (and the line)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BookError(str(path), f"cannot read the segment list: {getattr(e, 'strerror', None) or e}") from None
    names = []
    for n, line in enumerate(lines, 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        try:
            parse_name(name)
        except ValueError as e:
            raise BookError(str(path), f"line {n}: {e}") from None
        names.append(name)
    if not names:
        raise BookError(str(path), "names no segment (one CHAPTER.SEGMENT a line)")
    return names


def load_fixes(book_dir: Path) -> dict[str, Fix]:
    """The book's fixes by segment name; {} without fixes.json.  An entry that is not a valid fix is skipped."""
    data = read_json(Path(book_dir) / FIXES_JSON) or {}
    if data.get("version") != FIXES_VERSION:
        return {}
    out = {}
    for name, entry in sorted((data.get("fixes") or {}).items()):
        try:
            parse_name(name)
            out[name] = Fix(**entry)
        except (TypeError, ValueError):
            continue
    return out


def save_fixes(book_dir: Path, fixes: Mapping[str, Fix]) -> None:
    """fixes.json, atomically and fsynced (a plan applies it: it is as durable as the manifest)."""
    data = {"version": FIXES_VERSION,
            "fixes": {n: {k: v for k, v in asdict(f).items() if v is not None} for n, f in sorted(fixes.items())}}
    write_bytes(Path(book_dir) / FIXES_JSON, json_bytes(data), durable=True, keep_same=True)


def match_fixes(fixes: Mapping[str, Fix], segments: Iterable) -> tuple[dict[tuple[int, int], Fix], list[str]]:
    """(overrides by 0-based (chapter, segment), the names of the fixes that no longer match their segment).  A fix
    of a chapter not in `segments` (a --chapters preview) is neither applied nor dropped."""
    by_pos = {(s.chapter, s.index): s for s in segments}
    chapters = {c for c, _ in by_pos}
    overrides, dropped = {}, []
    for name, fix in fixes.items():
        pos = parse_name(name)
        seg = by_pos.get(pos)
        if seg is not None and seg.source_text == fix.source_text:
            overrides[pos] = fix
        elif pos[0] in chapters:
            dropped.append(name)
    return overrides, dropped
