"""normalize / normalize_with_map: t2s, punctuation table, TN windows, removals with reasons, lexicon."""
from __future__ import annotations

import pytest

from tasks.errors import BookError
from tasks.text.lexicon import Lexicon
from tasks.text.normalize import PUNCT_TABLE, NormalizeOptions, normalize, normalize_with_map, removals

# The output alphabet: CJK, 〇, ASCII letters, space, and the marks ChatTTS's normalizer keeps.
ALLOWED_MARKS = set("，。、. ")


def _alphabet_ok(s: str) -> bool:
    return all(("\u4e00" <= c <= "\u9fff") or c == "〇" or (c.isascii() and c.isalpha()) or c in ALLOWED_MARKS
               for c in s)


def test_t2s_default_on_and_optional():
    assert normalize("紅樓夢") == "红楼梦"
    assert normalize("紅樓夢", NormalizeOptions(t2s=False)) == "紅樓夢"


@pytest.mark.parametrize("src, out", [
    ("他說：「我們已經吃過了！」", "他说，我们已经吃过了。"),
    ("真的嗎？", "真的吗。"),
    ("好．", "好。"),                           # full-width period of 紅樓夢
    ("奇特︰冬天的蘆根", "奇特，冬天的芦根"),       # U+FE30 colon of 吶喊
    ("他來了——又走了……", "他来了，又走了。"),
    ("讀《紅樓夢》", "读红楼梦"),
    ("約翰·史密斯", "约翰史密斯"),
    ("甲；乙", "甲，乙"),
    ("菱角、羅漢豆", "菱角、罗汉豆"),
    ("「好。」", "好。"),                        # run of marks collapses to the strongest
    ("第一回　甄士隱", "第一回，甄士隐"),            # ideographic space between CJK: a pause
])
def test_punctuation_map(src, out):
    assert normalize(src) == out


def test_every_table_entry_maps_into_the_alphabet():
    for mark, (out, boundary) in PUNCT_TABLE.items():
        assert out in ("", "，", "。", "、"), mark
        assert boundary in (0, 1, 2)
        assert _alphabet_ok(normalize("甲" + mark + "乙")), mark


@pytest.mark.parametrize("src, out", [
    ("今天是2024年3月5日", "今天是二零二四年三月五日"),
    ("5月2日", "五月二日"),                       # wetext alone says 两日
    ("共有1,000,000人", "共有一百万人"),
    ("50%", "百分之五十"),
    ("电话13812345678", "电话幺三八幺二三四五六七八"),   # mobile numbers: wetext reads 1 as 幺
    ("投诉电话10015", "投诉电话一零零一五"),
    ("１２３", "一百二十三"),                      # full-width digits
])
def test_numbers(src, out):
    assert normalize(src) == out


def test_removals_are_listed_with_positions_and_reasons():
    src = "其上多?囗，多【上丞下□】木😀。<br>"
    out, spans = normalize_with_map(src)
    assert out == "其上多，多木。"
    got = [(r.start, r.text, r.reason) for r in removals(spans, src)]
    assert got == [(3, "?囗", "placeholder"), (7, "【上丞下□】", "glyph-description"),
                   (14, "😀", "emoji"), (16, "<br>", "markup")]


def test_question_mark_after_latin_is_not_a_placeholder():
    assert normalize("他问Is it OK?") == "他问Is it OK."       # an English sentence: its own full stop


def test_spans_tile_the_source():
    src = "第3回：他說「2人」來了。\u200b多?囗 ABC def！"
    _, spans = normalize_with_map(src)
    pos = 0
    for s in spans:
        assert s.start == pos or (s.start == s.end == pos)
        pos = s.end
    assert pos == len(src)


def test_private_use_control_and_kana_removed():
    out, spans = normalize_with_map("甲\ue000乙\x07丙ヾ丁")
    assert out == "甲乙丙丁"
    assert [r.reason for r in removals(spans, "甲\ue000乙\x07丙ヾ丁")] == [
        "private-use", "control", "unsupported-script"]


def test_lexicon_applies_before_tn_and_matches_traditional(tmp_path):
    g = tmp_path / "global.tsv"
    g.write_text("# polyphones\n银行\t银杭\n", encoding="utf-8")
    b = tmp_path / "book.tsv"
    b.write_text("甄士隐\t真是隐\nV2\t第二版\n", encoding="utf-8")
    lex = Lexicon.load(g, b)
    assert normalize("去銀行找甄士隱，買V2", NormalizeOptions(lexicon=lex)) == "去银杭找真是隐，买第二版"


def test_lexicon_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(BookError, match=r"bad\.tsv: line 1"):
        Lexicon.load(bad)
    with pytest.raises(BookError, match="not found"):
        Lexicon.load(tmp_path / "missing.tsv")


# Language runs (issue 25): a Latin-script phrase inside Chinese is read the English way, with English marks;
# numbers take the reading of the language around them; Chinese-only text is untouched.
@pytest.mark.parametrize("src, out", [
    ("他说他有3 hours的时间。", "他说他有three hours的时间。"),
    ("我买了iPhone 15 Pro。", "我买了iPhone fifteen Pro。"),
    ("见chapter 2。", "见chapter two。"),
    ("他说：\"I am fine, thank you.\"然后走了。", "他说，I am fine, thank you.然后走了。"),
    ("第3章", "第三章"),                          # digits between Han characters: Chinese
    ("Xbox360很好玩", "Xbox三六零很好玩"),            # one word and a number: the Chinese reading as before
    ("共3 km", "共三公里"),                         # a unit wetext's Chinese grammar knows
    ("下午3 pm到", "下午三pm到"),                     # am/pm after a number stay with the Chinese reading
    ("10 GB的硬盘", "十GB的硬盘"),
])
def test_latin_runs_inside_chinese(src, out):
    assert normalize(src) == out


@pytest.mark.parametrize("src, out", [
    ("用了3Hours", "用了三Hours"),                    # wetext alone: 三小时ours
    ("6Sheep", "六Sheep"),                          # wetext alone: 六秒heep
    ("2Men", "二Men"),                              # wetext alone: 两米en; the number alone is 二
    ("3km", "三公里"),                               # a whole unit is still read
])
def test_a_unit_ends_at_a_word_boundary(src, out):
    assert normalize(src) == out


def test_mixed_spans_tile_the_source():
    src = "他说：“I paid $3.50 on 5/12/2023.”第2回，共3 hours。"
    out, spans = normalize_with_map(src)
    pos = 0
    for s in spans:
        assert s.start == pos or s.start == s.end == pos
        pos = s.end
    assert pos == len(src)
    assert "three dollars and fifty cents" in out and "三 hours" not in out


def test_lang_en_book_reads_latin_english_and_chinese_only_text_the_same():
    assert normalize("In 1719, 40 horses.", NormalizeOptions(lang="en")) == "In seventeen nineteen, forty horses."
    for text in ("今天是2024年3月5日，第3回。", "他說：「我們已經吃過了！」"):
        assert normalize(text, NormalizeOptions(lang="en")) == normalize(text)


@pytest.mark.parametrize("src, out", [
    ("身高2米29", "身高两米二九"),                                  # metres and centimetres
    ("使用CDMA2000。", "使用CDMA两千。"),                          # a round number after letters is the number
    ("GSM 900频段", "GSM九百频段"),
    ("IBM 7094电脑", "IBM七零九四电脑"),                            # a model number after a name: digit by digit
    ("生成3-MCPD，", "生成三MCPD，"),                              # the hyphen of a chemical name is silent
    ('如2001年的"Band of Brothers"等。', "如二零零一年的Band of Brothers等。"),   # wetext's escaped quote
    ("见Egi and Smith, 2001.类", "见Egi and Smith, two thousand one.类"),   # a year inside the English run
    ("随项目以AGPL-3.0-or-later发布。", "随项目以AGPL three point zero or later发布。"),
])
def test_mixed_numbers(src, out):
    assert normalize(src) == out
