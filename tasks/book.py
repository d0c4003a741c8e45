"""The data model shared by the pipeline stages: a book as ingest produces it, a segment as the segmenter
produces it.  Plain frozen dataclasses: stages pass these (or paths and ids), never models or arrays."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

# The boundary that follows a segment; assembly chooses the pause from it.
PauseKind = Literal["clause", "sentence", "paragraph", "chapter"]
PAUSE_KINDS: tuple[str, ...] = get_args(PauseKind)
# A manifest row's pause_after may carry the silence a direction set after it: "sentence@1.2" (seconds).
PAUSE_SECONDS_SEP = "@"
CROSSFADE_S = 0.040          # s, equal-power cross-fade at every join (tasks/audio/assemble.py): a pause is >= 2x


def directed_pause(kind: str, seconds: float) -> str:
    """A row's pause_after for a boundary of `kind` followed by `seconds` of silence (tasks/plan/direction.py)."""
    return f"{pause_kind(kind)}{PAUSE_SECONDS_SEP}{seconds:g}"


def pause_kind(value: str) -> str:
    """The boundary kind of a row's pause_after ("sentence@1.2" -> "sentence")."""
    return value.split(PAUSE_SECONDS_SEP, 1)[0]


def pause_seconds(value: str) -> float | None:
    """The silence a direction set in a row's pause_after, in seconds; None: the kind's own."""
    _, sep, secs = value.partition(PAUSE_SECONDS_SEP)
    return float(secs) if sep else None
# Who speaks a segment (a cast, --cast): the narrator, or quoted speech with the speaker the text names.
ROLE_NARRATOR, ROLE_DIALOGUE = "narrator", "dialogue"
# The languages ChatTTS speaks: a book's reading language, and a run of text inside a sentence.
Language = Literal["zh", "en"]
LANGUAGES: tuple[str, ...] = get_args(Language)
LanguageChoice = Literal["auto", Language]                     # --language
LANGUAGE_CHOICES: tuple[str, ...] = get_args(LanguageChoice)
GUESS_SAMPLE_CHARS = 20_000      # characters of a book's text read by guess_language


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
    breaks: tuple[int, ...] = ()     # paragraphs no segment reaches back across: where matter was set aside or
                                     # brought back (tasks/ingest/matter.py), so the body's segments stay the same


@dataclass(frozen=True)
class SetAside:
    """Front or back matter nobody listens to, left out of the book read aloud (tasks/ingest/matter.py)."""
    number: int                      # 1-based, as `inspect` lists it: `--include N` brings it back
    kind: str                        # index, bibliography, copyright-page, toc, …, pg-license; "chapter" (--skip N)
    title: str
    paragraphs: tuple[str, ...]      # its text, as it would have been read
    after: int                       # chapters (as read) before it: 0, before the first
    reason: str                      # how it was recognized: "epub:type bibliography", "the guide's index", …

    @property
    def characters(self) -> int:
        return sum(len(p) for p in self.paragraphs)


@dataclass(frozen=True)
class Book:
    meta: BookMeta
    chapters: tuple[Chapter, ...]
    set_aside: tuple[SetAside, ...] = ()   # what is not read aloud, in reading order


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


def speech_language(tag: str) -> Language | None:
    """The language ChatTTS would read a BCP 47 / dc:language tag in: "zh-Hant", "zh_CN", "chi" -> "zh";
    "en-GB", "eng" -> "en"; any other language, "und" or "" -> None."""
    primary = tag.strip().replace("_", "-").split("-")[0].lower()
    if primary in ("zh", "zho", "chi", "cmn", "yue", "wuu", "lzh"):
        return "zh"
    if primary in ("en", "eng"):
        return "en"
    return None


def _letters(book: Book) -> tuple[int, int]:
    """(Han characters, ASCII letters) in the first GUESS_SAMPLE_CHARS characters of a book's text."""
    han = latin = seen = 0
    for text in (t for c in book.chapters for t in (c.title, *c.paragraphs)):
        for c in text[:GUESS_SAMPLE_CHARS - seen]:
            if "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf":
                han += 1
            elif c.isascii() and c.isalpha():
                latin += 1
        seen += len(text)
        if seen >= GUESS_SAMPLE_CHARS:
            break
    return han, latin


def guess_language(han: int, latin: int) -> Language:
    """The language of running text from its letter counts: "zh" when Han characters are at least a fifth of
    the letters (a Chinese book quoting English stays Chinese) or there are no Latin letters, else "en"."""
    return "zh" if han * 5 >= han + latin or not latin else "en"


def book_language(book: Book, requested: str = "auto") -> Language:
    """The language a book is read in: `requested` when it is "zh" or "en"; for "auto", the book's declared
    language (EPUB dc:language / xml:lang) when ChatTTS speaks it and the text does not contradict it (a
    Chinese EPUB tagged "en" by its tool is still Chinese), else the guess from the text."""
    if requested in LANGUAGES:
        return requested  # type: ignore[return-value]
    if requested != "auto":
        raise ValueError(f"language must be one of {', '.join(LANGUAGE_CHOICES)}, not {requested!r}")
    han, latin = _letters(book)
    guess = guess_language(han, latin)
    declared = speech_language(book.meta.language)
    if declared == "zh" and latin >= 200 and han * 100 < han + latin:
        return guess                     # "zh" on a book with almost no Han characters
    if declared == "en" and guess == "zh" and han:
        return guess                     # "en" on a book in Chinese
    return declared or guess


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
