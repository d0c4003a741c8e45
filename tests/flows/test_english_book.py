"""End to end, an English book (issue 25, acceptance 1): Robinson Crusoe's EPUB read as English — `inspect
--segments` of chapters 1-2 (CHAPTER I and CHAPTER II are the EPUB's chapters 1 and 2), their render with
random-tiny (the first paragraphs of each by default; the whole chapters with RUN_SLOW=1, ~4 min), and a change of
--language that re-renders exactly the segments whose text changed."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

import manifests
from flows.cli import main
from tasks.bookdir import READING_LANGUAGE, read_book_json
from tasks.text.segment import MAX_SECONDS, MAX_WORDS, words
from tests.conftest import corpus_path
from tests.flows.helpers import chapter_files

HAN = re.compile(r"[\u3400-\u9fff]")
PARAGRAPHS = 2          # paragraphs of each chapter the fast render keeps (the whole chapters: the slow test)


def _crusoe():
    return corpus_path("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub")


def _inspect(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["inspect", str(_crusoe()), "--segments", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_chapters_1_2_read_as_english(capsys):
    d = _inspect(capsys, "--chapters", "1-2")
    assert (d["language"], d["reading_language"]) == ("en", "en")
    assert [c["title"][:12] for c in d["chapters"]] == ["CHAPTER I. S", "CHAPTER II. "]
    assert d["coverage"]["ok"] and all(c["coverage_ok"] for c in d["chapters"])
    segs = d["segments"]
    assert {s["chapter"] for s in segs} == {0, 1} and len(segs) == d["totals"]["segments"]
    assert segs[0]["source_text"].startswith("CHAPTER I.")
    born = next(s for s in segs if "I was born in the year 1632" in s["source_text"])
    assert born["text"].startswith("I was born in the year")
    # the caps: 50 words, 20 s (marks that end a paragraph after the last word ride along: their pause, ~0.3 s)
    assert all(words(s["text"]) <= MAX_WORDS and s["estimated_seconds"] <= MAX_SECONDS + 0.5 for s in segs)
    assert sum(s["estimated_seconds"] for s in segs) / len(segs) > 10                       # packed, not cut short


def test_inspect_chapters_1_2_read_numbers_and_abbreviations_the_english_way(capsys):
    segs = _inspect(capsys, "--chapters", "1-2")["segments"]
    assert not [s["name"] for s in segs if HAN.search(s["text"])]
    born = next(s for s in segs if "I was born in the year 1632" in s["source_text"])
    assert "sixteen thirty two" in born["text"]                          # no hyphen: ChatTTS's English alphabet
    assert all(not re.search(r"[。，！？]", s["text"]) for s in segs)       # English punctuation stays ASCII


@pytest.fixture
def short_crusoe(monkeypatch):
    """Robinson Crusoe as its EPUB reads, each chapter cut to its first PARAGRAPHS paragraphs (a few seconds of
    rendering instead of minutes)."""
    import tasks.plan.prepare as prepare

    load = prepare.load_book

    def first_paragraphs(path, **kw):
        book = load(path, **kw)
        return replace(book, chapters=tuple(replace(c, paragraphs=c.paragraphs[:PARAGRAPHS]) for c in book.chapters))

    monkeypatch.setattr(prepare, "load_book", first_paragraphs)
    return _crusoe()


def _render(book, out, *args, chapters: str = "1-2") -> list[dict]:
    assert main([str(book), "--model", "random-tiny", "--threads", "1", "--out", str(out), "--chapters", chapters,
                 *args]) == 0
    return manifests.load(out / book.stem).to_pylist()


def _check_english_render(book_dir, rows, chapters=(0, 1)) -> None:
    assert rows and all(r["status"] == "done" for r in rows)
    assert {r["chapter"] for r in rows} == set(chapters) and len(chapter_files(book_dir)) == len(chapters)
    info = read_book_json(book_dir)
    assert info[READING_LANGUAGE] == "en" and info["language"] == "en"
    coverage = json.loads((book_dir / "coverage.json").read_text(encoding="utf-8"))["chapters"]
    assert [c["chapter"] for c in coverage] == list(chapters) and all(not c["unexplained"] for c in coverage)


def test_render_chapters_1_2_as_english(short_crusoe, tmp_path):
    rows = _render(short_crusoe, tmp_path)
    _check_english_render(tmp_path / short_crusoe.stem, rows)
    assert rows[0]["text"].startswith("CHAPTER one.") and rows[0]["text"][-1] == "."   # CHAPTER I. read aloud


def test_a_new_language_re_renders_the_segments_whose_text_changed(short_crusoe, tmp_path, capsys):
    before = _render(short_crusoe, tmp_path, "--language", "zh", chapters="1")
    assert read_book_json(tmp_path / short_crusoe.stem)[READING_LANGUAGE] == "zh"
    capsys.readouterr()
    after = _render(short_crusoe, tmp_path, "--language", "en", chapters="1")
    old, new = {r["content_key"] for r in before}, {r["content_key"] for r in after}
    assert {r["text"] for r in before} != {r["text"] for r in after}
    assert new - old                                             # English packing and closing marks: new texts
    line = capsys.readouterr().out
    assert f"({len(new - old)} rendered, {len(new & old)} reused)" in line, line
    _check_english_render(tmp_path / short_crusoe.stem, after, chapters=(0,))


@pytest.mark.slow
def test_render_whole_chapters_1_2(tmp_path):
    """Acceptance 1 as the issue states it: chapters 1-2 whole (298 segments, ~70 min of audio, ~4 min here)."""
    book = _crusoe()
    rows = _render(book, tmp_path)
    _check_english_render(tmp_path / book.stem, rows)
    assert len(rows) > 250
