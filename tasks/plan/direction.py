"""Direction: a book's per-line controls — pace, pauses, laughter and breaks, sampling — read from a direction file.

    direction = load_direction("novel.direction.txt")     # BookError "FILE:LINE: problem" for a bad entry
    lines = direct(segments, direction, base)             # tasks/plan/prepare.py: what each segment is given

A direction file is UTF-8 text, one entry a line: WHICH, then SETTINGS (`key=value`, any order); `#` starts a
comment (outside quotes), blank lines are skipped:

    # WHICH            SETTINGS
    1.3                speed=2 pause_after=1.5
    "他笑道"            laugh=end temperature=0.2
    2.14               uv_break=after:， top_p=0.5 top_k=10 pause_before=0.8

WHICH is a segment's `C.S` name (chapter and segment counted from 1, as `inspect --segments`, the player and `fix`
show them) or a text in double quotes (or one word without spaces): every segment whose book text or spoken
text holds it (Traditional and Simplified alike).  SETTINGS:

    speed=0..9                 ChatTTS's [speed_N] for this line (else: its voice's, the book's --speed, 5)
    temperature= top_p= top_k= the code pass's sampling (upstream's defaults 0.3, 0.7, 20)
    pause_before=S pause_after=S   seconds of silence before / after the line (0, or 0.08..30): replaces the
                               boundary's own pause (before a chapter's first line: its lead-in stays)
    laugh= uv_break= lbreak=   insert ChatTTS's [laugh], [uv_break], [lbreak]: `start`, `end`, or `after:TEXT`
                               (after the first TEXT of the spoken line); a key may repeat

A line named by more entries takes each setting from the last entry that sets it; insertions add up.  Every
setting but the pauses is part of the segment's content key (tasks/plan/rows.py): changing one line's direction
renders that line again and re-packages its chapter, and nothing else; the pauses only re-package.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.api import DEFAULT_SPEED, Controls
from tasks.book import CROSSFADE_S, Segment, directed_pause, segment_name
from tasks.errors import BookError
from tasks.plan.fixes import NAME_RE
from tasks.text.quotes import fold

DIRECTION_SUFFIX = ".direction.txt"     # the book's own: <book stem>.direction.txt beside the book
INSERTS = {"laugh": "[laugh]", "uv_break": "[uv_break]", "lbreak": "[lbreak]"}   # key -> ChatTTS's token
SAMPLING_KEYS = ("temperature", "top_p", "top_k")
PAUSE_KEYS = ("pause_before", "pause_after")
MAX_PAUSE_S = 30.0                      # s, the longest pause a line may ask for
KEYS = ("speed", *SAMPLING_KEYS, *PAUSE_KEYS, *INSERTS)


@dataclass(frozen=True)
class Entry:
    """One line of a direction file: where it is, which segments it names, what it sets."""
    where: str                          # "FILE:LINE", for messages
    name: tuple[int, int] | None        # 0-based (chapter, segment), or None: a text
    text: str                           # the text a segment must hold (name is None)
    settings: tuple[tuple[str, object], ...]       # (key, value), in the line's order
    inserts: tuple[tuple[str, str], ...] = ()      # (token, position): "start" | "end" | "after:TEXT"

    def matches(self, s: Segment) -> bool:
        if self.name is not None:
            return (s.chapter, s.index) == self.name
        needle = fold(self.text)
        return needle in fold(" ".join(s.source_text.split())) or needle in fold(s.text)


@dataclass(frozen=True)
class Direction:
    """A book's direction: its files' entries, in order (later ones win)."""
    entries: tuple[Entry, ...] = ()
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Line:
    """What a segment is given once directed: its text (insertions made), its controls, and the silences a
    direction asked for before and after it (None: the boundary's own)."""
    text: str
    controls: Controls
    pause_before: float | None = None
    pause_after: float | None = None
    entries: tuple[str, ...] = field(default_factory=tuple)     # "FILE:LINE" of the entries that named it


def direction_paths(book: Path, explicit: str | None = None) -> list[Path]:
    """The direction files that apply, in order (later entries win): the book's `<stem>.direction.txt` beside it,
    then an explicit --direction file."""
    paths = [p for p in (book.with_name(book.stem + DIRECTION_SUFFIX),) if p.is_file()]
    if explicit:
        paths.append(Path(explicit).expanduser())      # must exist: load_direction names it when it does not
    return paths


def load_direction(*paths: str | Path) -> Direction:
    """Read direction files (see the module docstring); BookError naming FILE:LINE and the problem."""
    entries: list[Entry] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise BookError(str(path), "no such direction file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BookError(str(path), f"cannot read the direction file ({type(e).__name__}: it must be UTF-8 "
                                       "text)") from None
        for n, line in enumerate(text.splitlines(), 1):
            entry = parse_line(line, f"{path}:{n}")
            if entry is not None:
                entries.append(entry)
    return Direction(tuple(entries), tuple(str(p) for p in paths))


def parse_line(line: str, where: str) -> Entry | None:
    """One line's entry (None for a blank or comment line); BookError(where, problem) for a bad one."""
    try:
        lex = shlex.shlex(line, posix=True)
        lex.whitespace_split, lex.commenters = True, "#"
        words = list(lex)
    except ValueError as e:
        raise BookError(where, f"{e} (a text is quoted: \"他笑道\" laugh=end)") from None
    if not words:
        return None
    which, rest = words[0], words[1:]
    quoted = line.lstrip().startswith('"')
    if "=" in which and not quoted:
        raise BookError(where, f"the line starts with a setting ({which!r}): first name the segment (C.S) or "
                               "quote a text")
    if not rest:
        raise BookError(where, f"{which!r} sets nothing (WHICH then key=value settings: {', '.join(KEYS)})")
    name = None
    if NAME_RE.match(which) and not quoted:
        c, s = (int(x) for x in which.split("."))
        if c < 1 or s < 1:
            raise BookError(where, f"segment {which!r}: chapter and segment count from 1 (e.g. 2.14)")
        name = (c - 1, s - 1)
    elif not which.strip():
        raise BookError(where, "an empty text names every segment: quote a word of the line")
    settings: list[tuple[str, object]] = []
    inserts: list[tuple[str, str]] = []
    for word in rest:
        key, eq, value = word.partition("=")
        if not eq or key not in KEYS:
            raise BookError(where, f"{word!r} is not a setting (key=value; keys: {', '.join(KEYS)})")
        if key in INSERTS:
            inserts.append((INSERTS[key], _position(key, value, where)))
        else:
            settings.append((key, _value(key, value, where)))
    entry = Entry(where, name, which if name is None else "", tuple(settings), tuple(inserts))
    try:
        _controls(Controls(), dict(settings))                # the sampling values' own ranges (Controls')
    except ValueError as e:
        raise BookError(where, str(e)) from None
    return entry


def _value(key: str, value: str, where: str) -> object:
    try:
        v: object = int(value) if key in ("speed", "top_k") else float(value)
    except ValueError:
        raise BookError(where, f"{key}={value!r}: expected {'an integer' if key in ('speed', 'top_k') else 'a number'}"
                        ) from None
    if key == "speed" and not 0 <= int(v) <= 9:   # type: ignore[call-overload]
        raise BookError(where, f"speed={value}: must be 0..9 (ChatTTS's [speed_N]; 5 is its default)")
    if key in PAUSE_KEYS:
        s = float(v)  # type: ignore[arg-type]
        if not (s == 0 or 2 * CROSSFADE_S <= s <= MAX_PAUSE_S):
            raise BookError(where, f"{key}={value}: seconds of silence, 0 or {2 * CROSSFADE_S:g}..{MAX_PAUSE_S:g}")
    return v


def _position(key: str, value: str, where: str) -> str:
    if value in ("start", "end") or (value.startswith("after:") and value[len("after:"):]):
        return value
    raise BookError(where, f"{key}={value!r}: where to insert {INSERTS[key]}: start, end or after:TEXT")


def _controls(base: Controls, settings: dict) -> Controls:
    """`base` with a direction's speed and sampling settings."""
    return replace(base, **{k: v for k, v in settings.items() if k not in PAUSE_KEYS})


def direct(segments: Sequence[Segment], direction: Direction | None, base: Controls | None = None,
           base_of=None, check_names: bool = True) -> list[Line]:
    """Each segment's Line: its text with the insertions its entries ask for, its controls (`base`, or
    base_of(segment): the book's and its voice's, with its entries' settings), the pauses they set.  BookError
    naming FILE:LINE for an entry that names a segment the book does not have, a text no segment holds, or an
    `after:TEXT` its segment does not hold (`check_names` False: a preview of some chapters, where names of the
    other chapters are not errors)."""
    entries = direction.entries if direction is not None else ()
    used: set[str] = set()
    out = []
    for s in segments:
        mine = [e for e in entries if e.matches(s)]
        settings: dict = {}
        inserts: list[tuple[str, str]] = []
        for e in mine:
            settings.update(e.settings)
            inserts += [i for i in e.inserts if i not in inserts]
            used.add(e.where)
        ctl = base_of(s) if base_of is not None else (base or Controls())
        out.append(Line(_insert(s.text, inserts, mine), _controls(ctl, settings), settings.get("pause_before"),
                        settings.get("pause_after"), tuple(e.where for e in mine)))
    if check_names:
        for e in entries:
            if e.where not in used:
                what = f"segment {e.name[0] + 1}.{e.name[1] + 1}" if e.name else f"text {e.text!r}"
                raise BookError(e.where, f"{what}: no segment of the book is that (inspect BOOK --segments lists "
                                         "them, C.S and text)")
    return out


def _insert(text: str, inserts: Iterable[tuple[str, str]], entries: Sequence[Entry]) -> str:
    """`text` with each (token, position) inserted: after:TEXT at the first TEXT, then start and end."""
    for token, pos in inserts:
        if pos.startswith("after:"):
            after = pos[len("after:"):]
            i = text.find(after)
            if i < 0:
                where = next(e.where for e in entries if (token, pos) in e.inserts)
                raise BookError(where, f"after:{after}: the line does not hold it (it reads {text!r})")
            text = text[:i + len(after)] + token + text[i + len(after):]
    for token, pos in inserts:
        if pos == "start":
            text = token + text
        elif pos == "end":
            text = text + token
    return text


def directed_segments(segments: Sequence[Segment], lines: Sequence[Line]) -> tuple[list[Segment], dict, list[str]]:
    """(the segments with their directed text, {(chapter, segment): (Controls, pause_after value)} for the plan's
    rows, notes).  A pause before a line is the pause after the one before it in its chapter (the longer one, when
    both are directed); before a chapter's first line the lead-in stays, with a note."""
    out, extra, notes = [], {}, []
    pauses: dict[tuple[int, int], float] = {}
    for i, (s, line) in enumerate(zip(segments, lines)):
        if line.pause_after is not None:
            pos = (s.chapter, s.index)
            pauses[pos] = max(pauses.get(pos, 0.0), line.pause_after)
        if line.pause_before is not None:
            prev = segments[i - 1] if i else None
            if prev is None or prev.chapter != s.chapter:
                notes.append(f"{line.entries[-1]}: pause_before of {segment_name(s.chapter, s.index)}, the first "
                             "line of its chapter: the chapter's lead-in stays")
            else:
                pos = (prev.chapter, prev.index)
                pauses[pos] = max(pauses.get(pos, 0.0), line.pause_before)
    for s, line in zip(segments, lines):
        pos = (s.chapter, s.index)
        pause = directed_pause(s.pause_after, pauses[pos]) if pos in pauses else s.pause_after
        out.append(replace(s, text=line.text))
        extra[pos] = (line.controls, pause)
    return out, extra, notes


def book_controls(speed: int | None, refine=None) -> Controls:
    """The book's controls from its options: --speed (None: the default) and --refine's levels."""
    return Controls(speed=DEFAULT_SPEED if speed is None else speed, refine=refine)
