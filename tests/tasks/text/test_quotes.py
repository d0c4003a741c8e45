"""tasks/text/quotes.py: quotes of speech, their speakers, the runs a cast segments by.

The attribution is measured against quotes labelled by hand (tests/tasks/text/quote_labels.py): precision (a
named speaker is the labelled one) >= 95 % and recall (a labelled speaker is found) >= 70 %, on 紅樓夢 chapter 3
and on two stories of 吶喊 (modern “” quotes)."""
from __future__ import annotations

import pytest

from tasks.book import Book, BookMeta, Chapter, ROLE_DIALOGUE, ROLE_NARRATOR, Run
from tasks.text.quotes import attribute_book, find_quotes, fold, paragraph_runs, speaker_counts
from tests.conftest import corpus_path
from tests.tasks.text import quote_labels as labels

MIN_PRECISION = 0.95
MIN_RECALL = 0.70


def _key(s: str) -> str:
    return "".join(c for c in s if c.isalnum())


def _book(*paragraphs: str) -> Book:
    return Book(BookMeta("t"), (Chapter(0, "", tuple(paragraphs)),))


def _speakers(*paragraphs: str) -> list[tuple[str, str]]:
    return [(q.text, q.speaker) for q in attribute_book(_book(*paragraphs))[0]]


def score(quotes, labelled, terms) -> dict:
    """Match labelled quotes to found ones in order (same paragraph, text starting with the label's first
    characters); every found quote must be labelled and no term may be found.  Returns the counts."""
    found = list(quotes)
    unmatched = [(q.paragraph, q.text) for q in found]
    named = right = stated = hits = 0
    i = 0
    for para, first, speaker in labelled:
        while i < len(found) and not (found[i].paragraph == para and _key(found[i].text).startswith(_key(first))):
            i += 1
        assert i < len(found), f"labelled quote not found: paragraph {para} {first!r}"
        q = found[i]
        unmatched.remove((q.paragraph, q.text))
        i += 1
        if q.speaker:
            named += 1
            right += fold(q.speaker) == fold(speaker or "")
        if speaker:
            stated += 1
            hits += fold(q.speaker) == fold(speaker)
    assert not unmatched, f"quotes found but not labelled: {unmatched[:5]}"
    for para, word in terms:
        assert not any(q.paragraph == para and _key(q.text) == _key(word) for q in found), word
    return {"quotes": len(labelled), "named": named, "right": right, "stated": stated, "found": hits,
            "precision": right / named if named else 1.0, "recall": hits / stated}


@pytest.fixture(scope="module")
def hongloumeng():
    from tasks.ingest import load_book

    return attribute_book(load_book(corpus_path("txt", "gutenberg-zh", "24264-0.txt")))


@pytest.fixture(scope="module")
def nahan():
    from tasks.ingest import load_book

    return attribute_book(load_book(corpus_path("txt", "gutenberg-zh", "27166-0.txt")))


def test_hongloumeng_chapter_3_precision_and_recall(hongloumeng):
    assert len(labels.HONGLOUMENG_3) >= 40
    s = score(hongloumeng[2], labels.HONGLOUMENG_3, labels.HONGLOUMENG_3_TERMS)
    print(f"\n紅樓夢 chapter 3: {s}")
    assert s["precision"] >= MIN_PRECISION and s["recall"] >= MIN_RECALL, s


def test_nahan_modern_quotes_precision_and_recall(nahan):
    k = score(nahan[6], labels.KONGYIJI, labels.KONGYIJI_TERMS)
    g = score(nahan[5], labels.GUXIANG, labels.GUXIANG_TERMS)
    both = {x: k[x] + g[x] for x in ("quotes", "named", "right", "stated", "found")}
    both["precision"], both["recall"] = both["right"] / both["named"], both["found"] / both["stated"]
    print(f"\n吶喊 孔乙己: {k}\n吶喊 故鄉: {g}\n吶喊 both: {both}")
    assert both["quotes"] >= 40
    assert both["precision"] >= MIN_PRECISION and both["recall"] >= MIN_RECALL, both
