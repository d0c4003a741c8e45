"""How a take's ASR verdict is reached (tasks.qa.hearing.judged / hear_texts): the packed transcript where it passes,
else the one heard alone; the recording's tail speech asked only where the one-unit tail rule needs it."""
from __future__ import annotations

from tasks.qa.asr import TailSpeech, Transcript
from tasks.qa.hearing import hear_texts, judged
from tasks.qa.options import QAOptions
from tasks.qa.verdict import FLAG, INCONCLUSIVE, PASS

OPTS = QAOptions()


def said(text: str, packed: bool = True) -> Transcript:
    return Transcript(text, -0.2, 0.02, "zh", packed=packed)


def test_a_packed_pass_stands_and_anything_else_is_judged_as_heard_alone():
    asked: list[str] = []

    def tail(tr):
        asked.append(tr.text)
        return TailSpeech(0.9, 0.5, 0.2)

    tr, check = judged("甚至出现交易", "zh", said("甚至出现交易"), said("一二线城市", packed=False), tail, OPTS)
    assert (tr.text, check.verdict) == ("甚至出现交易", PASS)                   # alone not looked at
    tr, check = judged("甚至出现交易", "zh", said("一二线城市"), said("甚至出现交易", packed=False), tail, OPTS)
    assert (tr.text, tr.packed, check.verdict) == ("甚至出现交易", False, PASS)
    long = "甚至出现交易几乎停滞的情况"                                               # 13 units: not short
    tr, check = judged(long, "zh", said(long[:-1]), said("一二线城市", packed=False), tail, OPTS)
    assert (tr.packed, check.verdict) == (True, PASS)                            # near-exact packed: a pass
    tr, check = judged("甚至出现交易", "zh", said("甚至出现交易停"), said("一二线城市", packed=False), tail, OPTS)
    assert (tr.packed, check.verdict) == (False, FLAG)           # a short text's near-exact packed pass: alone
    assert asked == []
    tr, check = judged("甚至出", "zh", said("一二线城市"), said("甚至", packed=False), tail, OPTS)
    assert (tr.text, check.verdict) == ("甚至", INCONCLUSIVE) and asked == ["甚至"]
    tr, check = judged("甚至出", "zh", said("甚至", packed=False), said("甚至", packed=False), lambda tr: None, OPTS)
    assert check.verdict == FLAG and check.needs_tail                           # no tail speech to be had


class _Script:
    """A stand-in transcriber: packed it hears `packed`, alone `alone` (by the audio's length); counts its calls."""

    batch = 4

    def __init__(self, packed: dict[int, str], alone: dict[int, str]):
        self.packed, self.alone, self.calls, self.tails = packed, alone, [], 0

    def transcribe_many(self, items, pack=False):
        self.calls.append((len(items), pack))
        heard = self.packed if pack else self.alone
        return [Transcript(heard[len(a)], -0.2, 0.02, lang, packed=pack) for a, _, lang in items]

    def tail_speech(self, audio, rate, transcript):
        self.tails += 1
        return TailSpeech(0.5, 0.4, 0.0)


def test_what_does_not_pass_packed_is_heard_again_alone_in_one_call():
    import numpy as np

    audio = {n: np.zeros(n, np.float32) for n in (100, 200, 300, 400)}
    asr = _Script(packed={100: "甚至出现交易", 200: "乱七八糟的", 300: "甚至", 400: "你好吗"},
                  alone={100: "不该听到", 200: "一二线城市", 300: "甚至", 400: "你好"})
    got = hear_texts(asr, [("甚至出现交易", audio[100], 16_000, "zh"), ("一二线城市", audio[200], 16_000, "zh"),
                           ("甚至出", audio[300], 16_000, "zh"), ("你好", audio[400], 16_000, "zh")], OPTS)
    assert [(tr.text, c.verdict) for tr, c in got] == [("甚至出现交易", PASS), ("一二线城市", PASS),
                                                        ("甚至", FLAG), ("你好", PASS)]
    assert asr.calls == [(4, True), (3, False)] and asr.tails == 1             # 你好吗 for 你好: not exact
    assert "no voiced speech after it" in got[2][1].reason
    assert hear_texts(asr, [], OPTS) == [] and asr.calls[-1] == (0, True)
