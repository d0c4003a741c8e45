"""The comparison of intended text and transcript: toneless pinyin for Chinese (homophones and spellings of names
do not count, Traditional = Simplified, digits read aloud on both sides), words for English, the edit operations
shown in the original text."""
from __future__ import annotations

import pytest

pytest.importorskip("pypinyin")

from tasks.qa.compare import compare, detect_language, units


def test_chinese_units_are_toneless_syllables_one_per_character_and_latin_words():
    assert units("重庆银行，OK吗？", "zh") == ["chong", "qing", "yin", "hang", "ok", "ma"]
    assert units("行长", "zh") == ["hang", "zhang"]                     # a polyphone read in its context
    assert units("，。！ 、", "zh") == []


def test_homophones_and_proper_noun_spellings_do_not_count():
    c = compare("王英汉被枪毙后", "王应汉被枪避后", "zh")               # 英/应 and 毙/避: the same sound
    assert c.cer == 0.0 and c.ops == [("equal", "王英汉被枪毙后", "王应汉被枪避后")]


def test_traditional_and_punctuation_do_not_count():
    assert compare("飞机穿过云层，眼下一片云海", "飛機穿過雲層眼下一片雲海。", "zh").cer == 0.0


def test_digits_are_read_aloud_on_both_sides():
    c = compare("一九九三年二月二十三日上午", "1993年2月23日上午", "zh")
    assert c.cer == 0.0 and c.ref == c.hyp and "yi" in c.ref
    assert compare("我有3个苹果", "我有三个苹果", "zh").cer == 0.0
    assert compare("我有3个苹果", "我有4个苹果", "zh").cer == pytest.approx(1 / 6)      # san -> si


def test_a_different_sentence_scores_high():
    c = compare("甚至出现交易几乎停滞的情况", "一二线城市虽然也处于调整中", "zh")
    assert c.cer > 0.8


def test_ops_show_the_original_characters_of_each_run():
    c = compare("王英汉被枪毙后部分余孽深藏起来", "王英汉被槍避后,部分云烈生长起来", "zh")
    assert c.ops == [("equal", "王英汉被枪毙后部分", "王英汉被槍避后,部分"), ("sub", "余孽深藏", "云烈生长"),
                     ("equal", "起来", "起来")]
    assert c.cer == pytest.approx(4 / 15)
    d = compare("甚至出现交易", "甚至交易停滞", "zh")
    assert [op for op, _, _ in d.ops] == ["equal", "del", "equal", "ins"]
    assert d.ops[1] == ("del", "出现", "") and d.ops[3] == ("ins", "", "停滞")
    assert d.cer == pytest.approx(4 / 6)


def test_what_was_heard_after_the_last_unit_heard_as_itself():
    """matched, last_matched (in the text) and heard_after (transcript units after it): a tail gone, or heard as
    something else."""
    c = compare("甚至出现", "甚至", "zh")                                        # the tail gone: nothing after
    assert (c.matched, c.last_matched, c.heard_after) == (2, 1, 0)
    c = compare("回荡", "回到", "zh")                                            # the last unit heard as another
    assert (c.matched, c.last_matched, c.heard_after) == (1, 0, 1)
    c = compare("作用", "能够做", "zh")                                          # zuo heard last, yong not at all
    assert (c.matched, c.last_matched, c.heard_after) == (1, 0, 0)
    c = compare("你好", "今天", "zh")                                            # nothing heard as itself
    assert (c.matched, c.last_matched, c.heard_after) == (0, -1, 2)
    assert compare("SO MUCH", "So.", "en").heard_after == 0


def test_english_compares_lower_case_words_with_numbers_read_aloud():
    assert units("Ask not what your country can do, for 23 years!", "en") == \
        ["ask", "not", "what", "your", "country", "can", "do", "for", "twenty", "three", "years"]
    assert compare("IT WAS THE FIRST GREAT SORROW", "It was the first great sorrow.", "en").cer == 0.0
    c = compare("it was the first great sorrow of his life", "It was the first great sorrow of his wife.", "en")
    assert c.cer == pytest.approx(1 / 9) and c.ops[-1] == ("sub", "life", "wife.")
    assert compare("he paid 12 dollars", "he paid twelve dollars", "en").cer == 0.0
    assert compare("don’t stop", "don't stop", "en").cer == 0.0
    assert compare("DREAMS BUILT", "dream's built", "en").cer == 0.0        # an apostrophe is not heard


def test_cer_is_over_the_intended_units_and_can_exceed_one():
    c = compare("你好", "今天天气很好我们去公园", "zh")
    assert len(c.hyp) == 11 and c.cer == 10 / 2              # 好 = 好; 你 -> one syllable, 9 inserted: 10 edits
    assert compare("", "", "zh").cer == 0.0 and compare("", "多余", "zh").cer == 2.0


def test_detect_language():
    assert detect_language("And so my fellow Americans") == "en"
    assert detect_language("甚至出现交易几乎停滞的情况") == "zh"
    assert detect_language("我们用 Python 写代码") == "zh"
    assert detect_language("") == "zh"


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="language 'fr'"):
        units("bonjour", "fr")


def _levenshtein(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j - 1] + (x != y), prev[j] + 1, cur[j - 1] + 1))
        prev = cur
    return prev[-1]


def test_the_edit_script_is_minimal_and_rebuilds_both_sides():
    from hypothesis import given, settings, strategies as st

    from tasks.qa.compare import align

    syllables = st.lists(st.sampled_from(["ba", "ma", "pa", "da"]), max_size=12)

    @settings(max_examples=300, deadline=None)
    @given(syllables, syllables)
    def check(ref, hyp):
        steps = align(ref, hyp)
        assert sum(op != "equal" for op, _, _ in steps) == _levenshtein(ref, hyp)
        assert [ref[i] for _, i, _ in steps if i is not None] == ref
        assert [hyp[j] for _, _, j in steps if j is not None] == hyp
        assert all((ref[i] == hyp[j]) == (op == "equal") for op, i, j in steps if i is not None and j is not None)

    check()
