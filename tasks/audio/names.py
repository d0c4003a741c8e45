"""Output file names: any title made into a name valid on every common filesystem, the chapter and book stems
built from it, and the check that a name stays a direct child of the book directory."""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from tasks.errors import OutputError

MAX_NAME_BYTES = 200          # UTF-8 bytes per file name, prefix and extension included
FORMATS = ("flac", "wav", "mp3", "opus", "m4a")   # chapter-file formats; BOOK_FORMATS (m4b, epub): the whole book
BOOK_FORMATS = ("m4b", "epub")   # one file for the whole book (named by book_stem), not one per chapter
WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"COM{i}" for i in range(1, 10)] + [f"LPT{i}" for i in range(1, 10)]
    + ["COM¹", "COM²", "COM³", "LPT¹", "LPT²", "LPT³"])
_FORBIDDEN = re.compile(r'[/\\:*?"<>|]')
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def _cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within max_bytes of UTF-8, never ending in a joiner or combining mark."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    cut = text.encode("utf-8")[:max(0, max_bytes)].decode("utf-8", errors="ignore")
    while cut and (unicodedata.combining(cut[-1]) or cut[-1] in "\u200d\ufe0e\ufe0f"
                   or unicodedata.category(cut[-1]) == "Mn"):
        cut = cut[:-1]
    return cut


def safe_name(text: str, max_bytes: int = MAX_NAME_BYTES, reserved: bool = True) -> str:
    """`text` made into a file-name stem valid on every common filesystem (may be empty).

    NFC; no control/bidi characters; `/ \\ : * ? " < > |` -> `_`; runs of dots -> `…` (no `..`);
    whitespace collapsed; no leading/trailing dots or spaces; Windows reserved names get a `_` suffix;
    at most max_bytes of UTF-8.
    """
    s = unicodedata.normalize("NFC", text)
    s = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in "\t\r\n" else c
                for c in s if c not in _BIDI)
    s = "".join(c for c in s if unicodedata.category(c) not in ("Cs", "Co", "Cn"))
    s = _FORBIDDEN.sub("_", s)
    s = re.sub(r"\.{2,}", "…", s)
    s = re.sub(r"\s+", " ", s).strip(" .")
    s = _cut_utf8(s, max_bytes).rstrip(" .")
    base, dot, rest = s.partition(".")
    if reserved and base.rstrip().upper() in WINDOWS_RESERVED:      # CON, con.txt, "COM1 " -> CON_, con_.txt, COM1_
        s = _cut_utf8(base.rstrip() + "_" + dot + rest, max_bytes).rstrip(" .")
    return s


def chapter_stem(chapter_index: int, n_chapters: int, title: str, ext: str = "flac") -> str:
    """`NNN - <safe title>` (1-based, zero-padded to the chapter count), within MAX_NAME_BYTES with `.ext`."""
    width = max(3, len(str(n_chapters)))
    prefix = f"{chapter_index + 1:0{width}d}"
    budget = MAX_NAME_BYTES - len(prefix) - len(" - ") - len(ext) - 1
    t = safe_name(title, budget, reserved=False)       # "NNN - CON" is not a reserved name
    return f"{prefix} - {t}" if t else prefix


def chapter_file_names(chapter_index: int, n_chapters: int, title: str, formats: Iterable[str],
                       subtitles: Iterable[str]) -> list[str]:
    """The names of one chapter's files: one per chapter format (the book-wide m4b and epub are not), then
    one per subtitle format (their stem is the srt one, so every subtitle of a chapter shares it)."""
    names = [f"{chapter_stem(chapter_index, n_chapters, title, f)}.{f}" for f in formats if f not in BOOK_FORMATS]
    return names + [f"{chapter_stem(chapter_index, n_chapters, title, 'srt')}.{f}" for f in subtitles]


def book_stem(title: str, ext: str = "m4b") -> str:
    """The M4B's (and the book-wide subtitles') or the EPUB's stem: the safe book title, or `book`."""
    return safe_name(title, MAX_NAME_BYTES - len(ext) - 1) or "book"


def inside(book_dir: Path, name: str) -> Path:
    """book_dir/name, resolved; OutputError unless that is a direct child of book_dir."""
    root = Path(book_dir).resolve()
    path = (root / name).resolve()
    if path.parent != root or name in ("", ".", ".."):
        raise OutputError(str(book_dir), f"output name {name!r} would leave the book directory")
    return path
