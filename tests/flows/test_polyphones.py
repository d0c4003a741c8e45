"""Issue 25, acceptance 3: `inspect --polyphones` on 紅樓夢 lists its polyphonic words with counts; a pinyin lexicon
entry re-renders exactly the segments that hold the word, which ChatTTS is given in the asked reading's spelling
while the subtitles' text (source_text) keeps the book's."""
from __future__ import annotations

import json
import re

import manifests
from flows.cli import main
from tests.conftest import corpus_path

COUNTS_RE = re.compile(r"\((\d+) rendered, (\d+) reused\)")
BOOK = ("第一章　银行\n　　他一早就去银行排队，银行的门还没有开。\n　　街上行人很少，风很大。\n\n"
        "第二章　回家\n　　回到家里，他想起银行的事情，长叹一声。\n　　窗外的树又长高了。\n")


def test_polyphones_of_hongloumeng_with_counts(capsys):
    book = corpus_path("txt", "gutenberg-zh", "24264-0.txt")
    assert main(["inspect", str(book), "--polyphones", "--chapters", "1-3", "--json"]) == 0
    words = json.loads(capsys.readouterr().out)["polyphones"]
    assert len(words) > 100 and [w["count"] for w in words] == sorted((w["count"] for w in words), reverse=True)
    by = {w["word"]: w for w in words}
    assert by["只见"]["count"] >= 3 and by["只见"]["lexicon"] == "zhi3 jian4" and by["只见"]["phrase"]
    assert all(w["polyphones"] and re.fullmatch(r"\d+\.\d+", w["sample"]["name"]) for w in words)
    assert all(w["word"] in w["sample"]["text"] for w in words)


def test_a_reading_entry_rerenders_exactly_the_segments_with_the_word(tmp_path, capsys):
    book = tmp_path / "bank.txt"
    book.write_text(BOOK, encoding="utf-8")
    args = [str(book), "--model", "random-tiny", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    capsys.readouterr()
    rows = manifests.load(tmp_path / "out" / "bank").to_pylist()
    holding = [r for r in rows if "银行" in r["source_text"]]
    assert 0 < len(holding) < len(rows)

    book.with_name("bank.lexicon.tsv").write_text("银行\tyin2 hang2\n", encoding="utf-8")
    assert main(args) == 0
    rendered, reused = map(int, COUNTS_RE.search(capsys.readouterr().out).groups())
    assert (rendered, reused) == (len(holding), len(rows) - len(holding))
    after = manifests.load(tmp_path / "out" / "bank").to_pylist()
    changed = [r for r in after if "银航" in r["text"]]
    assert sorted(r["source_text"] for r in changed) == sorted(r["source_text"] for r in holding)
    assert all("银行" in r["source_text"] and "银行" not in r["text"] for r in changed)


def test_a_bad_reading_is_one_line_naming_the_lexicon_and_line(tmp_path, capsys):
    book = tmp_path / "bank.txt"
    book.write_text(BOOK, encoding="utf-8")
    lex = tmp_path / "mine.tsv"
    lex.write_text("# mine\n银行\tyin2 hangg2\n", encoding="utf-8")
    assert main(["inspect", str(book), "--lexicon", str(lex)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(lex) in err and "line 2: bad pinyin 'hangg2'" in err, err
