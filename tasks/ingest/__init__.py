"""Ingest: an EPUB or TXT file to a `tasks.book.Book` (chapters of original paragraphs, in reading order).

`load_book(path, notes="end")` dispatches on content (ZIP magic -> EPUB, else TXT), never on the extension
alone; a ZIP holding a single .txt is read as that text.  Every problem with the input file raises
`BookError(path, problem)`; no other exception escapes for any input file (unexpected parser errors are
converted at this boundary as "unreadable book (...)"; the fuzz tests treat those as bugs).

What not to read (tasks/ingest/matter.py): front and back matter — tables of contents, indexes, bibliographies,
copyright pages, colophons, Gutenberg's header and licence — set aside by default and listed in Book.set_aside.

EPUB (tasks/ingest/epub/): spine order, TOC titles (nav, else NCX), continuation chunks merged, notes at
chapter end or skipped, ruby base text only, Gutenberg boilerplate set aside; hardened against XXE, entity
bombs, zip bombs, path traversal, duplicate entries and DRM.  TXT (tasks/ingest/txt.py; txt_decode.py: BOM/UTF-8/
charset-normalizer detection recorded in meta.encoding, Gutenberg header/footer and HTML leftovers removed;
Chinese text (txt_zh.py): 第X回/章 and named headings or essay title lines, hard-wrap unwrapping; English text
(txt_en.py): CHAPTER I / Chapter 1 / roman headings, contents lists and title pages skipped, blank-line paragraphs
unwrapped; meta.language from Gutenberg's Language line or the text.  Paragraphs are original text with whitespace
collapsed (a line break between two CJK characters disappears); titles have control characters stripped."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

from tasks.book import Book
from tasks.errors import BookError
from tasks.ingest.epub import read_epub
from tasks.ingest.matter import MatterOptions, apply_skips
from tasks.ingest.txt import read_txt

MAX_FILE_BYTES = 512 * 1024 * 1024  # bytes; input files larger than this are refused before reading
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")  # local header, empty archive, spanned marker

NotesMode = Literal["end", "skip"]


def load_book(path: str | Path, *, notes: NotesMode = "end", matter: MatterOptions = MatterOptions()) -> Book:
    """Read an EPUB or UTF-8/UTF-16/GB18030/Big5 TXT book.  notes="end": EPUB foot/endnotes are read at the end of
    their chapter; "skip": dropped.  `matter`: what is set aside (tasks/ingest/matter.py; Book.set_aside lists it)."""
    if notes not in ("end", "skip"):
        raise ValueError(f"notes must be 'end' or 'skip', not {notes!r}")
    p = str(path)
    data = _read_bytes(p)
    try:
        if data.startswith(ZIP_MAGICS):
            book = read_epub(data, p, notes=notes, matter=matter)
        else:
            book = read_txt(data, p, matter=matter)
        return apply_skips(book, matter, p)
    except BookError:
        raise
    except RecursionError:
        raise BookError(p, "document nesting too deep") from None
    except MemoryError:
        raise BookError(p, "book too large to read in memory") from None
    except Exception as e:                  # the boundary: any parser failure on a bad file is a BookError
        raise BookError(p, f"unreadable book ({type(e).__name__}: {_one_line(str(e))})") from e


def _read_bytes(p: str) -> bytes:
    try:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            raise BookError(p, "is a directory, not a book file")
        if not stat.S_ISREG(st.st_mode):  # a FIFO or /dev/zero would never end
            raise BookError(p, "not a regular file")
        size = st.st_size
        if size > MAX_FILE_BYTES:
            raise BookError(p, f"file too large ({size} bytes, limit {MAX_FILE_BYTES})")
        with open(p, "rb") as f:
            data = f.read()  # not read(n): that preallocates n bytes
    except FileNotFoundError:
        raise BookError(p, "file not found") from None
    except PermissionError:
        raise BookError(p, "permission denied") from None
    except IsADirectoryError:
        raise BookError(p, "is a directory, not a book file") from None
    except OSError as e:  # includes FileNotFoundError raced after stat
        raise BookError(p, f"cannot read file ({_one_line(e.strerror or str(e))})") from None
    if not data:
        raise BookError(p, "empty file")
    return data


def _one_line(s: str, limit: int = 160) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
