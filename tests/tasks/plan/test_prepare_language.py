"""prepare's reading language: an undetermined tag takes it, book.json keeps it (tasks.bookdir.reading_language)."""
from __future__ import annotations

import json

import pytest

from tasks.book import Book, BookMeta, Chapter
from tasks.bookdir import BOOK_JSON, READING_LANGUAGE, reading_language
from tasks.plan.prepare import tagged


def _book(language: str) -> Book:
    return Book(BookMeta(title="t", language=language), (Chapter(0, "", ("I was born in the year 1632.",)),))


@pytest.mark.parametrize("declared, tag", [("und", "en"), ("", "en"), (" UND ", "en"), ("en-GB", "en-GB"),
                                           ("fr", "fr"), ("zh", "zh")])
def test_an_undetermined_tag_takes_the_reading_language(declared, tag):
    assert tagged(_book(declared), "en").meta.language == tag


def test_book_json_keeps_the_reading_language(tmp_path):
    assert reading_language(tmp_path) == "zh"                      # planned before it was kept: Chinese
    (tmp_path / BOOK_JSON).write_text(json.dumps({READING_LANGUAGE: "en"}), encoding="utf-8")
    assert reading_language(tmp_path) == "en"
    (tmp_path / BOOK_JSON).write_text(json.dumps({READING_LANGUAGE: "xx"}), encoding="utf-8")
    assert reading_language(tmp_path) == "zh"
