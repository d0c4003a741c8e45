"""What not to read: front and back matter nobody listens to, set aside by default and brought back by name.

Ingest (tasks/ingest/epub, tasks/ingest/txt.py) marks text by its kind: an EPUB 3 `epub:type` or DPUB-ARIA role on
the element or document that holds it (innermost first), the EPUB 3 landmarks or the EPUB 2 guide naming its
document, a page of links (a table of contents without markup), Project Gutenberg's header and licence.  A run of
text of one kind that MatterOptions sets aside is left out of the chapters and kept as a `tasks.book.SetAside`
(numbered in reading order: `inspect` lists them with the reason, coverage.json records them); everything else is
read as before.  Kinds set aside by default: SET_ASIDE.  `--include KIND|N` brings a kind or one item back,
`--skip KIND|N` sets more aside (a kind of OTHER_KINDS, or chapter N as read).

Where a run was set aside (or brought back) the chapter gets a break (tasks.book.Chapter.breaks): no segment joins
the text on either side, so the body's segments, and their content keys, are the same whether it is read or not.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tasks.book import Book, Chapter, SetAside
from tasks.errors import BookError

# Kinds set aside unless brought back: what they are (inspect's reason starts with it).
SET_ASIDE: dict[str, str] = {
    "toc": "a table of contents",
    "landmarks": "the landmarks (a navigation list)",
    "page-list": "a list of page numbers",
    "loi": "a list of illustrations",
    "lot": "a list of tables",
    "index": "an index",
    "bibliography": "a bibliography",
    "copyright-page": "a copyright page",
    "colophon": "a colophon",
    "pg-license": "not the book: Project Gutenberg's boilerplate",
}
PG_TITLES = ("Project Gutenberg", "Project Gutenberg License")   # its header's and its footer's, as titles
# Kinds read by default that --skip may set aside.
OTHER_KINDS: dict[str, str] = {
    "titlepage": "a title page", "halftitlepage": "a half-title page", "dedication": "a dedication",
    "epigraph": "an epigraph", "foreword": "a foreword", "preface": "a preface", "introduction": "an introduction",
    "prologue": "a prologue", "epilogue": "an epilogue", "afterword": "an afterword", "conclusion": "a conclusion",
    "acknowledgments": "acknowledgments", "appendix": "an appendix", "glossary": "a glossary",
    "errata": "errata", "contributors": "a list of contributors", "credits": "credits",
    "other-credits": "other credits", "imprimatur": "an imprimatur", "imprint": "an imprint",
}
KINDS = {**SET_ASIDE, **OTHER_KINDS}
# EPUB 3 epub:type / DPUB-ARIA role tokens and EPUB 2 guide types -> kind.
TOKENS: dict[str, str] = {**{k: k for k in KINDS}, **{f"doc-{k}": k for k in KINDS},
                          "doc-toc": "toc", "doc-pagelist": "page-list", "acknowledgements": "acknowledgments",
                          "title-page": "titlepage", "copyright": "copyright-page"}
ALL = "all"                            # --include all: every kind


def kind_of(tokens: Iterable[str]) -> str:
    """The matter kind among an element's types (epub:type and role tokens, lower case), "" for none; a kind set
    aside by default wins over one that is read ("copyright-page acknowledgments" is a copyright page)."""
    kinds = sorted({TOKENS[t] for t in tokens if t in TOKENS}, key=lambda k: (k not in SET_ASIDE, k))
    return kinds[0] if kinds else ""


def reason(kind: str, how: str) -> str:
    """inspect's reason: what it is, and how it was recognized."""
    return f"{KINDS.get(kind, kind)} ({how})"


@dataclass(frozen=True)
class MatterOptions:
    """Which kinds and items are set aside: SET_ASIDE's kinds but those `include` names, and those `skip` names;
    numbers in `include` are set-aside items as `inspect` lists them, numbers in `skip` chapters as read."""
    include: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Raise ValueError naming the bad name: every instance is valid (numbers are checked against the book)."""
        for flag, names, allowed in (("--include", self.include, (*SET_ASIDE, ALL)), ("--skip", self.skip, KINDS)):
            for n in names:
                if not n.isdigit() and n not in allowed:
                    raise ValueError(f"{flag} {n!r}: not a number or one of {', '.join(allowed)}")
                if n.isdigit() and int(n) < 1:
                    raise ValueError(f"{flag} {n}: numbers count from 1")
        both = sorted(set(self.include) & set(self.skip) - {n for n in self.include if n.isdigit()})
        if both:
            raise ValueError(f"--include and --skip both name {', '.join(both)}")

    @classmethod
    def parse(cls, include: str | None, skip: str | None) -> MatterOptions:
        """From the options' comma-separated lists (spaces and case do not matter)."""
        def names(s: str | None) -> tuple[str, ...]:
            return tuple(n.strip().lower() for n in (s or "").split(",") if n.strip())
        return cls(names(include), names(skip))

    def sets_aside(self, kind: str) -> bool:
        """Whether text of this kind is left out (before any number in `include`)."""
        if kind in self.skip:
            return True
        return kind in SET_ASIDE and kind not in self.include and ALL not in self.include

    def brings_back(self, number: int) -> bool:
        return str(number) in self.include

    def chapters_skipped(self) -> list[int]:
        return sorted(int(n) for n in self.skip if n.isdigit())

    def as_json(self) -> dict:
        return {"include": list(self.include), "skip": list(self.skip)}


@dataclass
class Numbering:
    """Numbers the runs a book's ingest sets aside by kind, in reading order, and decides each one."""
    opts: MatterOptions
    count: int = 0

    def next(self) -> tuple[int, bool]:
        """(the run's number, whether it is set aside) for a run whose kind the options set aside."""
        self.count += 1
        return self.count, not self.opts.brings_back(self.count)

    def check(self, path: str) -> None:
        """BookError for an --include number past the runs set aside by kind."""
        wanted = [int(n) for n in self.opts.include if n.isdigit()]
        if wanted and max(wanted) > self.count:
            raise BookError(path, f"--include {max(wanted)}: the book sets aside {self.count} item(s) "
                                  "(`chattts-render inspect` lists them)")


def apply_skips(book: Book, opts: MatterOptions, path: str) -> Book:
    """The book with the chapters `--skip N` names set aside (BookError for a number past its chapters)."""
    skip = opts.chapters_skipped()
    if skip and max(skip) > len(book.chapters):
        raise BookError(path, f"--skip {max(skip)}: the book has {len(book.chapters)} chapters as read")
    return skip_chapters(book, skip, max([s.number for s in book.set_aside] + [0]) + 1)


def skip_chapters(book: Book, numbers: Sequence[int], first_number: int) -> Book:
    """The book without chapters `numbers` (1-based, as read): each becomes a SetAside of kind "chapter" (numbered
    from first_number on); the chapters renumbered, the others' positions moved."""
    if not numbers:
        return book
    gone = set(numbers)
    kept = [c for c in book.chapters if c.index + 1 not in gone]
    before = {c.index: sum(1 for k in kept if k.index < c.index) for c in book.chapters}
    moved = [replace(s, after=sum(1 for c in book.chapters[:s.after] if c.index + 1 not in gone))
             for s in book.set_aside]
    new = [SetAside(first_number + k, "chapter", c.title, c.paragraphs, before[c.index], f"--skip {c.index + 1}")
           for k, c in enumerate(c for c in book.chapters if c.index + 1 in gone)]
    items = sorted([*moved, *new], key=lambda s: (s.after, s.number))
    chapters = tuple(replace(c, index=i) for i, c in enumerate(kept))
    return replace(book, chapters=chapters, set_aside=tuple(items))


def with_breaks(chapter: Chapter, breaks: Iterable[int]) -> Chapter:
    """The chapter with these paragraph breaks added (indices into its paragraphs, 0 excluded)."""
    b = sorted(set(chapter.breaks) | {i for i in breaks if 0 < i < len(chapter.paragraphs)})
    return replace(chapter, breaks=tuple(b))
