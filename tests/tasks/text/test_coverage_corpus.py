"""Coverage acceptance on the real corpus (through tasks.ingest.load_book): nothing unexplained, no segment
over the cap.  CI runs the first chapters of each Gutenberg text and the whole 山海經 EPUB; the whole books are
`@pytest.mark.slow` (~4 min on 2 cores):
    RUN_SLOW=1 python -m pytest tests/tasks/text/test_coverage_corpus.py -m slow -q"""
from __future__ import annotations

import pytest

from tasks.text.coverage import audit_chapter
from tasks.ingest import load_book
from tasks.text.segment import SegmentOptions, segment_chapter
from tests.conftest import corpus_path

BOOKS = ["23865-0.txt", "23950-0.txt", "23962-0.txt", "24264-0.txt", "25124-0.txt", "25271-0.txt",
         "27166-0.txt"]
OPTS = SegmentOptions()


def _check(chapters) -> dict[str, int]:
    removed: dict[str, int] = {}
    for ch in chapters:
        segs = segment_chapter(ch, opts=OPTS)
        assert all(0 < len(s.text) <= OPTS.max_chars for s in segs)
        rep = audit_chapter(ch, segs, opts=OPTS)
        assert rep.ok, (ch.index, rep.unexplained[:5])
        assert rep.coverage == 1.0
        for k, v in rep.removed_by_reason.items():
            removed[k] = removed.get(k, 0) + v
    return removed


@pytest.mark.parametrize("name", BOOKS)
def test_first_chapters_fully_covered(name):
    book = load_book(corpus_path("txt", "gutenberg-zh", name))
    assert book.chapters
    _check(book.chapters[:2])


def test_shanhaijing_epub_fully_covered():
    book = load_book(corpus_path("epub", "gutenberg", "pg25288-shanhaijing-zh.epub"))
    removed = _check(book.chapters)
    # the book's missing-glyph notation is found and listed, not read aloud
    assert removed.get("glyph-description", 0) > 1000
    assert removed.get("placeholder", 0) > 50


@pytest.mark.slow
@pytest.mark.parametrize("name", BOOKS)
def test_whole_book_fully_covered(name):
    _check(load_book(corpus_path("txt", "gutenberg-zh", name)).chapters)
