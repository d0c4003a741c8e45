"""RenderOptions' parts that need no parameters: chapter lists, book slugs, the lexicons that apply to a book."""
from pathlib import Path

import pytest

from tasks.bookdir import book_slug
from tasks.options import lexicon_paths, parse_chapters


def test_parse_chapters():
    assert parse_chapters("1-3,7, 2") == (1, 2, 3, 7)
    for bad in ("0", "3-1", "a", "1-"):
        with pytest.raises(ValueError, match="--chapters"):
            parse_chapters(bad)


def test_slug_is_safe():
    assert book_slug(Path("../../etc/passwd")) == "passwd"
    assert book_slug(Path("...")) == "book"


def test_lexicons_global_then_book_then_explicit(tmp_path, monkeypatch):
    glob = tmp_path / "global.tsv"
    glob.write_text("x\ty\n", encoding="utf-8")
    book = tmp_path / "novel.txt"
    (tmp_path / "novel.lexicon.tsv").write_text("x\tz\n", encoding="utf-8")
    extra = tmp_path / "extra.tsv"
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(glob))
    assert lexicon_paths(book, str(extra)) == [glob, tmp_path / "novel.lexicon.tsv", extra]
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(tmp_path / "none.tsv"))
    (tmp_path / "novel.lexicon.tsv").unlink()
    assert lexicon_paths(book) == []
