"""inspect_book / format_inspect."""
from __future__ import annotations

import json

from tasks.book import Book, BookMeta, Chapter
from tasks.text.inspect import format_inspect, inspect_book

SENT = "士隱於書房閒坐，至手倦拋書，伏几少憩，不覺朦朧睡去。"


def _book():
    return Book(BookMeta(title="紅樓夢", author="曹雪芹", source_path="/x/hlm.txt", encoding="gb18030"),
                (Chapter(0, "第一回　甄士隱夢幻識通靈", (SENT * 3, "其上多?囗，多【上丞下□】木。")),
                 Chapter(1, "第二回", (SENT, "2024年3月5日"))))


def test_inspect_dict():
    d = inspect_book(_book())
    assert d["title"] == "紅樓夢" and d["author"] == "曹雪芹" and d["encoding"] == "gb18030"
    assert [c["title"] for c in d["chapters"]] == ["第一回　甄士隱夢幻識通靈", "第二回"]
    c0 = d["chapters"][0]
    assert c0["characters"] == len("第一回　甄士隱夢幻識通靈") + len(SENT) * 3 + len("其上多?囗，多【上丞下□】木。")
    assert c0["segments"] >= 2 and c0["estimated_seconds"] > 10
    assert d["totals"]["segments"] == sum(c["segments"] for c in d["chapters"])
    assert d["coverage"]["ok"] and d["coverage"]["removed_by_reason"] == {"glyph-description": 6, "placeholder": 2}
    assert len(d["coverage_reports"]) == 2
    json.dumps(d, ensure_ascii=False)          # JSON-ready


def test_format_inspect():
    text = format_inspect(inspect_book(_book()))
    assert "紅樓夢" in text and "曹雪芹" in text and "gb18030" in text
    assert "第二回" in text and "Coverage:  100%" in text
    assert "chapter 0 paragraph 1 char 7: '【上丞下□】' (glyph-description)" in text


def test_format_shows_unexplained():
    d = inspect_book(_book())
    d["coverage"] = {**d["coverage"], "ok": False,
                     "unexplained": [{"chapter": 1, "pos": 3, "text": "abc",
                                      "problem": "speakable text in no segment"}]}
    assert "UNEXPLAINED" in format_inspect(d) and "speakable text in no segment" in format_inspect(d)


def test_segments_list_what_chattts_is_given_beside_the_books_text():
    d = inspect_book(_book(), segments=True)
    segs = d["segments"]
    assert len(segs) == d["totals"]["segments"]
    assert [(s["chapter"], s["segment"]) for s in segs] == sorted((s["chapter"], s["segment"]) for s in segs)
    date = next(s for s in segs if "2024年" in s["source_text"])
    assert date["name"] == f"2.{date['segment'] + 1}" and "二零二四年三月五日" in date["text"]
    assert all(set(s) >= {"chapter", "segment", "name", "text", "source_text"} for s in segs)
    assert "segments" not in inspect_book(_book())               # only when asked
    text = format_inspect(d)
    assert f"{date['name']}  {date['text']}\n  <  {' '.join(date['source_text'].split())}" in text


def test_polyphones_list_the_words_of_what_chattts_is_given():
    book = Book(BookMeta(title="行", author="", source_path="/x/b.txt"),
                (Chapter(0, "第一回", ("他去银行取钱。银行关门了，他只好回家。",)),))
    d = inspect_book(book, polyphones=True)
    words = {w["word"]: w for w in d["polyphones"]}
    assert words["银行"]["count"] == 2 and words["银行"]["sample"]["name"] == "1.2"   # 1.1 is the title
    assert "polyphones" not in inspect_book(book)                                    # only when asked
    text = format_inspect(d)
    assert "Polyphones: " in text and "银行\tyin2 hang2" in text and "(phrase; 行 xíng/háng)" in text


def test_segments_show_a_readings_spelling_beside_the_books_text(tmp_path):
    from tasks.text.lexicon import Lexicon
    from tasks.text.normalize import NormalizeOptions
    from tasks.text.segment import SegmentOptions

    (tmp_path / "lex.tsv").write_text("银行\tyin2 hang2\n", encoding="utf-8")
    book = Book(BookMeta(title="行", author="", source_path="/x/b.txt"),
                (Chapter(0, "第一回", ("他去銀行取钱，走了很久很久。",)),))
    lex = NormalizeOptions(lexicon=Lexicon.load(tmp_path / "lex.tsv"))
    d = inspect_book(book, SegmentOptions(normalize=lex), segments=True,
                     polyphones=True)
    seg = next(s for s in d["segments"] if "銀行" in s["source_text"])
    assert "银航" in seg["text"] and "银行" not in seg["text"]
    assert "银行" not in {w["word"] for w in d["polyphones"]}          # steered: no longer a polyphone word


def test_the_reading_language_beside_the_declared_one():
    from tasks.text.normalize import NormalizeOptions
    from tasks.text.segment import SegmentOptions

    d = inspect_book(_book())
    assert (d["language"], d["reading_language"]) == ("zh", "zh")
    assert "Language:  read as Chinese (zh; the book declares zh)" in format_inspect(d)
    en = Book(BookMeta(title="Crusoe", language=""), (Chapter(0, "CHAPTER I.", ("I was born in the year 1632.",)),))
    d = inspect_book(en, SegmentOptions(normalize=NormalizeOptions(lang="en")))
    assert (d["language"], d["reading_language"]) == ("", "en") and d["options"]["max_words"] == 50
    assert "Language:  read as English (en; the book declares none)" in format_inspect(d)
