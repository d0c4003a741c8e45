"""Coverage acceptance on the real corpus (through tasks.ingest.load_book): nothing unexplained, no segment
over the cap.  CI runs the first chapters of each Gutenberg text, the whole 山海經 EPUB, and the English books
(their reading language resolved as prepare does: --language auto) - chapters of each, the small ones whole;
the whole Chinese books are `@pytest.mark.slow` (~4 min on 2 cores):
    RUN_SLOW=1 python -m pytest tests/tasks/text/test_coverage_corpus.py -m slow -q"""
from __future__ import annotations

import pytest

from engine.units import estimate_seconds
from tasks.ingest import load_book
from tasks.text.coverage import audit_chapter
from tasks.text.segment import SegmentOptions, book_options, segment_chapter, words
from tests.conftest import ROOT, corpus_path

BOOKS = ["23865-0.txt", "23950-0.txt", "23962-0.txt", "24264-0.txt", "25124-0.txt", "25271-0.txt",
         "27166-0.txt"]
OPTS = SegmentOptions()


def _check(chapters, opts: SegmentOptions = OPTS) -> dict[str, int]:
    removed: dict[str, int] = {}
    for ch in chapters:
        segs = segment_chapter(ch, opts=opts)
        if opts.lang == "en":
            assert all(0 < words(s.text) <= opts.max_words for s in segs), (ch.index, max(segs, key=_words).text)
        else:
            assert all(0 < len(s.text) <= opts.max_chars for s in segs)
        assert all(estimate_seconds(s.text) <= opts.max_seconds for s in segs)
        rep = audit_chapter(ch, segs, opts=opts)
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


def _words(segment) -> int:
    return words(segment.text)


# English books: (path under the corpus, the chapters checked - positions in book.chapters, None for all) and what
# each once failed on.
ENGLISH = [
    (("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub"), range(2)),
    (("epub", "idpf-epub3-samples", "moby-dick.epub"), range(5)),
    # `$16,716,594`; the governors list (a segment over short paragraphs, `I.` opening one); a comma at the cap
    (("epub", "idpf-epub3-samples", "georgia-cfi.epub"), None),
    # web addresses cut inside (chapter 55); name lists at the 20 s cap (117)
    (("epub", "idpf-epub3-samples", "epub30-spec.epub"), (*range(6), *range(50, 60), 117)),
    (("epub", "idpf-epub3-samples", "childrens-literature.epub"), range(4)),
    (("epub", "idpf-epub3-samples", "wasteland.epub"), None),
    (("epub", "idpf-epub3-samples", "trees.epub"), None),
    (("epub", "idpf-epub3-samples", "hefty-water.epub"), None),
    (("epub", "misc", "abogen_debug_tts_samples.epub"), None),
]
ENGLISH_TXT = sorted((ROOT / "tests" / "data" / "txt").glob("*.txt"))    # vendored (tests/data/txt/README.md)


def _check_english(path, chapters=None) -> None:
    book = load_book(path)
    opts = book_options(book, OPTS, "auto")
    assert opts.lang == "en", path
    picked = book.chapters if chapters is None else [book.chapters[i] for i in chapters if i < len(book.chapters)]
    assert picked, path
    _check(picked, opts)


@pytest.mark.parametrize("parts, chapters", ENGLISH, ids=[p[-1] for p, _ in ENGLISH])
def test_english_epub_fully_covered(parts, chapters):
    _check_english(corpus_path(*parts), chapters)


def test_w3c_english_epubs_fully_covered():
    epubs = sorted(corpus_path("epub", "w3c-epub-tests").glob("*.epub"))
    assert len(epubs) > 20
    for path in epubs:
        _check_english(path)


@pytest.mark.parametrize("path", ENGLISH_TXT, ids=[p.name for p in ENGLISH_TXT])
def test_english_txt_fully_covered(path):
    _check_english(path, range(3))
