"""The data model shared by the pipeline stages: a book as ingest produces it, a segment as the segmenter
produces it.  Plain frozen dataclasses: stages pass these (or paths and ids), never models or arrays."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The boundary that follows a segment; assembly chooses the pause from it.
PauseKind = Literal["clause", "sentence", "paragraph", "chapter"]
PAUSE_KINDS: tuple[str, ...] = ("clause", "sentence", "paragraph", "chapter")
# Who speaks a segment (a cast, --cast): the narrator, or quoted speech with the speaker the text names.
ROLE_NARRATOR, ROLE_DIALOGUE = "narrator", "dialogue"


@dataclass(frozen=True)
class BookMeta:
    title: str
    author: str = ""
    language: str = "zh"
    source_path: str = ""
    source_format: Literal["epub", "txt"] = "txt"
    encoding: str = "utf-8"          # TXT: the encoding detected and used; EPUB: "utf-8"
    cover: bytes | None = None       # image bytes, for packaging
    cover_mime: str = ""             # e.g. "image/jpeg"


@dataclass(frozen=True)
class Chapter:
    index: int                       # 0-based position in reading order
    title: str                       # original (unnormalized) title text
    paragraphs: tuple[str, ...]      # original text, one entry per paragraph, never empty strings


@dataclass(frozen=True)
class Book:
    meta: BookMeta
    chapters: tuple[Chapter, ...]


@dataclass(frozen=True)
class Segment:
    chapter: int                     # Chapter.index
    index: int                       # 0-based position within the chapter
    text: str                        # normalized text, what the engine speaks
    source_text: str                 # the original text it came from (subtitles show this)
    pause_after: PauseKind = "sentence"
    notes: tuple[str, ...] = field(default_factory=tuple)  # e.g. removed characters, for the audit
    role: str = ROLE_NARRATOR        # narrator | dialogue (only a cast splits quotes into dialogue)
    speaker: str = ""                # dialogue: the speaker as the text names it, "" when it names none


def segment_name(chapter: int, segment: int) -> str:
    """A segment's name wherever a user sees it (the player, the QA page, `inspect --segments`, `fix`): 0-based
    (chapter, segment) -> "C.S", both counted from 1."""
    return f"{chapter + 1}.{segment + 1}"


@dataclass(frozen=True)
class Run:
    """A stretch [start, end) of one paragraph and who speaks it (tasks/text/quotes.py finds them)."""
    start: int
    end: int
    role: str = ROLE_NARRATOR
    speaker: str = ""
