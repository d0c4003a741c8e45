"""tasks/text/polyphones.py: readings in use, lexicon readings -> single-reading spellings, the committed table,
a book's polyphonic words."""
from __future__ import annotations

from importlib.metadata import version

import pytest
from pypinyin import Style, lazy_pinyin

from tasks.errors import BookError
from tasks.text import polyphones as P
from tasks.text.lexicon import Lexicon
from tasks.text.normalize import NormalizeOptions, normalize

# Common polyphone words, each with a reading that is not (always) the one a guess would give; no neutral tones
# (those stay the context's, see spell).  Every one must come out with only the asked reading.
COMMON = {
    "银行": "yin2 hang2", "行走": "xing2 zou3", "长城": "chang2 cheng2", "长大": "zhang3 da4",
    "重要": "zhong4 yao4", "重新": "chong2 xin1", "爱好": "ai4 hao4", "好人": "hao3 ren2", "还是": "hai2 shi4",
    "还钱": "huan2 qian2", "音乐": "yin1 yue4", "睡觉": "shui4 jiao4", "觉悟": "jue2 wu4",
    "朝阳": "zhao1 yang2", "朝代": "chao2 dai4", "调查": "diao4 cha2", "调皮": "tiao2 pi2", "传记": "zhuan4 ji4",
    "传说": "chuan2 shuo1", "处理": "chu3 li3", "处长": "chu4 zhang3", "应该": "ying1 gai1", "数学": "shu4 xue2",
    "数数": "shu3 shu4", "种地": "zhong4 di4", "相信": "xiang1 xin4", "方便": "fang1 bian4", "中奖": "zhong4 jiang3",
    "只有": "zhi3 you3", "一只": "yi4 zhi1", "干净": "gan1 jing4", "干活": "gan4 huo2", "少年": "shao4 nian2",
    "当然": "dang1 ran2", "上当": "shang4 dang4", "作为": "zuo4 wei2", "看守": "kan1 shou3", "会计": "kuai4 ji4",
    "差不多": "cha4 bu4 duo1", "率领": "shuai4 ling3", "效率": "xiao4 lv4", "曾经": "ceng2 jing1",
    "姓曾": "xing4 zeng1", "贾府": "jia3 fu3", "商贾": "shang1 gu3",
}


def _lexicon(tmp_path, text: str, name: str = "lex.tsv") -> Lexicon:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return Lexicon.load(p)


def _tone3(text: str) -> tuple[str, ...]:
    return tuple(s.replace("ü", "v") for s in lazy_pinyin(text, style=Style.TONE3, neutral_tone_with_five=True))


def test_readings_in_use_skip_archaic_and_neutral_variants():
    assert P.readings_in_use("行") == ("xing2", "hang2") and P.is_polyphone("行") and P.is_polyphone("长")
    assert P.readings_in_use("说") == ("shuo1",) and "yue4" in P.readings("说")       # 不亦说乎: 2 of 266 phrases
    assert P.readings_in_use("浩") == ("hao4",) and not P.is_polyphone("浩")
    assert P.readings_in_use("子") == ("zi3",)                                          # zi5 is its neutral tone
    assert not P.is_polyphone("一") and len(P.readings_in_use("一")) > 1                # tone sandhi


def test_every_common_polyphone_reading_makes_a_spelling_with_only_that_reading(tmp_path):
    lex = _lexicon(tmp_path, "".join(f"{w}\t{r}\n" for w, r in COMMON.items()))
    spelled = dict(lex.entries)
    for word, reading in COMMON.items():
        asked = tuple(reading.split())
        spelling = spelled[word]
        assert len(spelling) == len(word) and spelling != word, word
        assert all(P.readings_in_use(c) == (s,) for c, s in zip(spelling, asked)), (word, spelling)
        assert _tone3(spelling) == asked, (word, spelling)
        for c, w in zip(spelling, word):                  # polyphones replaced, plain characters kept
            assert (c != w) == (P.readings_in_use(w) != (asked[word.index(w)],)), (word, spelling)
        said = normalize(f"他们说{word}了", NormalizeOptions(lexicon=lex))   # in a sentence: what ChatTTS is given
        assert said == f"他们说{spelling}了" and _tone3(said)[3:3 + len(word)] == asked, (word, said)


def test_tone_marks_in_brackets_equal_tone_numbers_and_traditional_text_matches(tmp_path):
    lex = _lexicon(tmp_path, "银行\t[yín háng]\n效率\t[xiào lǜ]\n重新\t[chong2 xin1]\n")
    assert dict(lex.entries) == {"银行": "银航", "效率": "效律", "重新": "崇新"}
    assert normalize("去銀行，重新算效率", NormalizeOptions(lexicon=lex)) == "去银航，崇新算效律"


def test_a_traditional_key_is_spelled_from_its_simplified_form_under_t2s(tmp_path):
    lex = _lexicon(tmp_path, "船隻\tchuan2 zhi1\n")
    assert dict(lex.entries) == {"船隻": "船隻"}               # 隻 reads only zhi1; its Simplified 只 does not
    assert normalize("兩艘船隻", NormalizeOptions(lexicon=lex)) == "两艘船" + P.single_readings()["zhi1"] != "两艘船只"
    assert normalize("兩艘船隻", NormalizeOptions(lexicon=lex, t2s=False)) == "兩艘船隻"


def test_plain_replacements_stay_plain(tmp_path):
    lex = _lexicon(tmp_path, "长大\t掌大\nAI\tai\nV2\t第二版\n")
    assert dict(lex.entries) == {"长大": "掌大", "AI": "ai", "V2": "第二版"}


def test_no_single_reading_character_keeps_a_default_reading_else_names_file_and_line(tmp_path):
    assert dict(_lexicon(tmp_path, "快乐\tkuai4 le4\n").entries) == {"快乐": "快乐"}   # lè: 乐's default
    with pytest.raises(BookError, match=r"lex\.tsv: line 2: no common character reads only liao3 \(liǎo\)"):
        _lexicon(tmp_path, "银行\tyin2 hang2\n了解\tliao3 jie3\n")


@pytest.mark.parametrize("line, problem", [
    ("银行\tyin2 hangg2", "bad pinyin 'hangg2': no such syllable"),
    ("银行\t[yín hángx]", "bad pinyin 'hángx'"),
    ("银行\tyin2", None),                                   # one tone-numbered token for two characters: plain?
    ("银行\t[yin2]", "1 syllables for the 2 characters of '银行'"),
    ("银行\tyin2 hang2 zi5", "3 syllables for the 2 characters"),
    ("V银行\t[wei1 yin2 hang2]", "a reading needs a word of Chinese characters only"),
    ("银行\t[]", "an empty reading"),
])
def test_bad_readings_one_line_naming_file_and_line(tmp_path, line, problem):
    if problem is None:
        with pytest.raises(BookError, match=r"lex\.tsv: line 1: 1 syllables for the 2 characters"):
            _lexicon(tmp_path, line + "\n")
        return
    with pytest.raises(BookError, match=r"lex\.tsv: line 1: " + problem.replace("(", r"\(").replace(")", r"\)")):
        _lexicon(tmp_path, line + "\n")


def test_committed_table_reads_one_way_and_is_what_build_table_makes():
    table = P.single_readings()
    assert len(table) > 900 and table["hang2"] == "航"
    for s, c in table.items():
        assert P.readings_in_use(c) == (s,) and _tone3(c) == (s,), (s, c)
    head = P.SINGLE_READINGS.read_text(encoding="utf-8").splitlines()[1]
    built = f"pypinyin {version('pypinyin')} (pinyin_dict, phrases_dict), jieba {version('jieba')}"
    if built not in head:
        pytest.skip(f"the table was built with other dictionaries ({head}); rebuild: scripts/single_readings.py")
    assert {s: c for s, c, _ in P.build_table()} == table


def test_polyphone_words_most_frequent_first_with_a_sample():
    texts = [("1.1", "他去银行取钱，银行关门了。"), ("1.2", "他长大了，还去银行。"), ("2.1", "天很长。")]
    words = P.polyphone_words(texts)
    by = {w["word"]: w for w in words}
    assert words[0]["word"] == "银行" and by["银行"]["count"] == 3
    assert by["银行"]["lexicon"] == "yin2 hang2" and by["银行"]["reading"] == "yín háng" and by["银行"]["phrase"]
    assert by["银行"]["polyphones"] == {"行": ["xíng", "háng"]} and by["银行"]["sample"]["name"] == "1.1"
    assert "银行" in by["银行"]["sample"]["text"]
    assert by["长"]["count"] == 1 and by["长"]["sample"]["name"] == "2.1"           # 长大 is a word of its own
    assert "取钱" not in by and "天" not in by                                       # no polyphone in them
    counts = [w["count"] for w in words]
    assert counts == sorted(counts, reverse=True)
