"""Subtitles: SRT / WebVTT / LRC text from cues, millisecond rounding, offsets on the book timeline."""
from __future__ import annotations

from fractions import Fraction

import pytest

from tasks.audio.assemble import Cue
from tasks.audio.subtitles import TimedText, lrc, render, srt, timed, to_ms, vtt

SR = 24_000


def cue(a: int, b: int, text: str, i: int) -> Cue:
    return Cue(a / SR, b / SR, text, i, a, b)


def test_millisecond_rounding_is_exact():
    assert to_ms(Fraction(12, SR)) == 1          # 0.5 ms rounds up
    assert to_ms(Fraction(11, SR)) == 0
    assert to_ms(Fraction(36_012, SR)) == 1501   # 1500.5 ms
    items = timed([cue(11_040, 35_999, "x", 0)], SR, Fraction(3_600_000 * 48, 48_000))
    assert items == [TimedText(3_600_460, 3_601_500, "x")]


def test_srt_and_vtt_text():
    items = [TimedText(460, 1_460, "第一句。\n\n  第二行  "), TimedText(3_723_004, 3_724_000, "a <b> & c --> d")]
    s = srt(items)
    assert s == ("1\n00:00:00,460 --> 00:00:01,460\n第一句。\n第二行\n\n"
                 "2\n01:02:03,004 --> 01:02:04,000\na <b> & c --> d\n")
    v = vtt(items)
    assert v.startswith("WEBVTT\n\n1\n00:00:00.460 --> 00:00:01.460\n第一句。\n第二行\n\n2\n")
    assert "a &lt;b&gt; &amp; c --&gt; d" in v


def test_lrc_marks_ends_before_pauses():
    items = [TimedText(460, 1_460, "一"), TimedText(1_460, 2_000, "二"), TimedText(2_500, 63_001, "三\n四")]
    text = lrc(items, "标题[1]", "作者", "书")
    assert text.splitlines() == ["[ti:标题(1)]", "[ar:作者]", "[al:书]", "[length:01:03]",
                                 "[00:00.460]一", "[00:01.460]二", "[00:02.000]", "[00:02.500]三 四",
                                 "[01:03.001]"]


def test_render_rejects_unknown():
    with pytest.raises(ValueError, match="ass"):
        render("ass", [])
    assert srt([]) == "" and vtt([]) == "WEBVTT\n"


def test_sentence_split_keeps_segment_boundaries_exact():
    from tasks.audio.subtitles import by_sentence, split_sentences

    assert split_sentences("他说：“走吧！”我们走了。然后呢") == ["他说：“走吧！”", "我们走了。", "然后呢"]
    assert split_sentences("没有标点") == ["没有标点"]
    items = [TimedText(1_000, 4_000, "一二三。四五六七八九！"), TimedText(4_500, 5_000, "单句。")]
    out = by_sentence(items)
    assert [t.text for t in out] == ["一二三。", "四五六七八九！", "单句。"]
    assert out[0].start_ms == 1_000 and out[1].end_ms == 4_000 and out[0].end_ms == out[1].start_ms
    assert out[0].end_ms == 1_000 + 3_000 * 4 // 11                   # weights: speakable chars + 1
    assert out[2] == items[1]
