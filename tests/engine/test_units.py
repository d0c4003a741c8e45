"""engine/units.py's speaking-rate estimate: Han characters at CHARS_PER_SECOND, English words at WORDS_PER_SECOND."""
from __future__ import annotations

import pytest

from engine.units import CHARS_PER_SECOND, MIN_SECONDS, WORDS_PER_SECOND, estimate_seconds, latin_words, speakable_chars


def _by_characters(text: str) -> float:
    """The estimate before English had a rate of its own: every speakable character at CHARS_PER_SECOND."""
    pauses = sum(1 for c in text if c in "，、；：,;:") * 0.15 + sum(1 for c in text if c in "。！？!?.…") * 0.3
    return max(MIN_SECONDS, speakable_chars(text) / CHARS_PER_SECOND + pauses)


@pytest.mark.parametrize("text", [
    "一九九三年二月二十三日上午，四川省安岳县岳源乡五村彭家姑嫂五人进城购置衣服。",
    "好。", "", "他说：“你来了吗？”……",
    "阿Q便全疤通红的发起怒来，小D本来是不足齿数的，被石头绊了一下，Y了腿。",   # single letters: a syllable each
    "第2位在2023年。",                                                          # digits left as they are
])
def test_chinese_is_estimated_exactly_as_by_characters(text):
    assert estimate_seconds(text) == _by_characters(text)


def test_english_words_at_the_english_rate():
    words = " ".join(["narration"] * 155)                 # a minute of narration at 155 words per minute
    assert estimate_seconds(words) == pytest.approx(60.0)
    assert pytest.approx(155 / 60) == WORDS_PER_SECOND
    sentence = "I was born in the year sixteen thirty-two, in the city of York."
    # 13 words (thirty-two is two) and the letter I (a syllable), one comma, one full stop
    assert estimate_seconds(sentence) == pytest.approx(13 / WORDS_PER_SECOND + 1 / CHARS_PER_SECOND + 0.15 + 0.3)


def test_a_word_is_one_word_however_long_an_acronym_is_spelled():
    assert estimate_seconds("psychoanalysis") == estimate_seconds("mind") == pytest.approx(max(MIN_SECONDS,
                                                                                                1 / WORDS_PER_SECOND))
    assert latin_words("the BBC and NASA said I don't know") == (6, 4, 26)   # BBC, I spelled; NASA, don't words
    assert estimate_seconds("BBC") == pytest.approx(3 / CHARS_PER_SECOND)


def test_mixed_text_counts_each_script_at_its_rate():
    text = "他用iPhone拍照"                                   # 4 Han characters and one English word
    assert estimate_seconds(text) == pytest.approx(4 / CHARS_PER_SECOND + 1 / WORDS_PER_SECOND)
    assert estimate_seconds(text) < _by_characters(text)  # not six characters' time for one word
