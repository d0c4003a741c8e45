"""Issue 13 section 1 end to end: `--format epub` through the real CLI (random-tiny, CPU) on an EPUB and a TXT
book — epubcheck 0 errors / 0 warnings, SMIL clips on the SRT cues, the XHTML holding the source chapters'
original text, the cover kept; `chattts-render package --format epub` rebuilding it from stored segments without
the engine, and leaving it alone when nothing changed.  The corpus books of the issue's acceptance are the
slow test at the end."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from flows.cli import main
from tasks.bookdir import TEXT_JSON
from tasks.ingest import load_book
from tasks.text.segment import chapter_units
from tests.conftest import ROOT, corpus_path
from tests.flows.helpers import SAMPLE, write_txt_book
from tests.tasks.audio.epub_helpers import assert_read_along

ENGINE_MODULES = ("engine.engine", "engine.loader", "ChatTTS", "torch")


def _units(book_path, chapters=None) -> dict[int, list[str]]:
    """The source chapters' original text (title and paragraphs), as ingest reads the book."""
    return {c.index: chapter_units(c) for c in load_book(book_path).chapters
            if chapters is None or c.index + 1 in chapters}


def _package_without_engine(book, out, formats: str) -> str:
    """`chattts-render package` in a fresh process; its stdout, which names engine modules it imported."""
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            f"print('LOADED', [m for m in {ENGINE_MODULES!r} if m in sys.modules]); sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code, "package", str(book), "--out", str(out), "--format", formats],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow      # read-along in CI: the TXT book below and tests/tasks/audio/test_epub3.py
def test_epub_book_to_read_along_epub_and_package_without_the_engine(tmp_path):
    assert main([str(SAMPLE), "--model", "random-tiny", "--out", str(tmp_path), "--format", "epub,m4b"]) == 0
    book_dir = tmp_path / "daodejing"
    assert (book_dir / TEXT_JSON).is_file()
    (epub_path,) = book_dir.glob("*.epub")
    epub = assert_read_along(epub_path, book_dir, _units(SAMPLE))
    cover = epub.items()["cover-image"]
    assert epub.read(cover.get("href")) == load_book(SAMPLE).meta.cover          # the source's cover, kept
    first = epub_path.read_bytes()

    before = epub_path.stat()
    assert "LOADED []" in _package_without_engine(SAMPLE, tmp_path, "epub,m4b")
    after = epub_path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)   # nothing changed: untouched

    epub_path.unlink()
    assert "LOADED []" in _package_without_engine(SAMPLE, tmp_path, "epub,m4b")
    assert epub_path.read_bytes() == first                                        # rebuilt from stored segments


def test_txt_book_to_read_along_epub(tmp_path):
    book = write_txt_book(tmp_path / "小说.txt", chapters=3, sentences=8)
    assert main([str(book), "--model", "random-tiny", "--out", str(tmp_path / "out"), "--format", "epub",
                 "--chapters", "1-2"]) == 0
    book_dir = tmp_path / "out" / "小说"
    (epub_path,) = book_dir.glob("*.epub")
    epub = assert_read_along(epub_path, book_dir, _units(book, chapters={1, 2}))
    assert "cover-image" not in epub.items()
    assert not list(book_dir.glob("0*.flac"))                    # --format epub: no chapter files


@pytest.mark.slow
@pytest.mark.parametrize("parts", [("epub", "gutenberg", "pg25288-shanhaijing-zh.epub"),
                                   ("txt", "gutenberg-zh", "23865-0.txt")], ids=["shanhaijing", "henhai"])
def test_acceptance_corpus_books(tmp_path, parts, capsys):
    """Issue 13 acceptance 1 as written: chapters 1-2, --format epub,m4b, random-tiny (RUN_SLOW=1; ~4 min
    each on 2 cores).  Prints epubcheck's report."""
    from tests.epubcheck import epubcheck

    book = corpus_path(*parts)
    assert main([str(book), "--model", "random-tiny", "--out", str(tmp_path), "--chapters", "1-2",
                 "--format", "epub,m4b"]) == 0
    book_dir = tmp_path / book.stem
    (epub_path,) = book_dir.glob("*.epub")
    epub = assert_read_along(epub_path, book_dir, _units(book, chapters={1, 2}))
    assert len(list(book_dir.glob("*.m4b"))) == 1 and len(epub.chapters()) == 2
    with capsys.disabled():
        print(f"\n{book.name}: {epub_path.name}, {epub_path.stat().st_size} bytes\n{epubcheck(epub_path).output}")
