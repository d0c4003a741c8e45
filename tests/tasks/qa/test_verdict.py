"""The verdicts: the ASR check's rules in order, the drift cutoff and gate, combining, ranking takes; and the
options' validation."""
from __future__ import annotations

import dataclasses

import pytest

from tasks.qa.asr import TailSpeech, Transcript
from tasks.qa.options import (
    DRIFT_FLOOR,
    DRIFT_MIN_VALUES,
    MAX_CER,
    MAX_TAKES,
    MIN_SPEECH_S,
    MIN_UNITS,
    QA_MODES,
    TAIL_SPEECH_S,
    QAOptions,
)
from tasks.qa.verdict import FLAG, INCONCLUSIVE, PASS, asr_verdict, combine, drift_cutoff, drift_verdict, take_rank

TEXT = "甚至出现交易几乎停滞的情况"                       # 13 syllables >= MIN_UNITS


def heard(text: str, logprob: float = -0.2, no_speech: float = 0.02) -> Transcript:
    return Transcript(text=text, avg_logprob=logprob, no_speech_prob=no_speech, language="zh")


def test_a_right_transcript_passes_with_homophones():
    check = asr_verdict(TEXT, heard("甚至出现交易几乎停制的情况"), "zh")
    assert (check.verdict, check.cer, check.reason) == (PASS, 0.0, "")


def test_a_wrong_sentence_is_flagged_with_a_one_line_reason():
    check = asr_verdict(TEXT, heard("一二线城市虽然也处于调整中"), "zh")
    assert check.verdict == FLAG and check.cer > MAX_CER
    assert "1 of 13 units heard" in check.reason          # 线 is 现 (xian) and "\n" not in check.reason


def test_a_short_text_is_judged_by_what_was_heard():
    """Under MIN_UNITS: exact or near-exact passes, another text, far more or far fewer units, a take that stopped
    short are flagged; only a transcript in between (a few units differ) is inconclusive."""
    assert asr_verdict("他笑了。", heard("他笑了"), "zh").verdict == PASS
    assert asr_verdict("我们走吧", heard("我门走了"), "zh").verdict == PASS                  # 1 of 4 differs
    assert asr_verdict("他笑了。", heard("飞机穿过云层眼下一片云海有时透过稀薄的云雾"), "zh").verdict == FLAG
    assert asr_verdict("走吧。", heard("今天"), "zh").verdict == FLAG                       # nothing of it heard
    check = asr_verdict("我们走吧", heard("我们"), "zh")                                     # stopped after 2 of 4
    assert check.verdict == FLAG and "stopped short: the last 2 of 4" in check.reason
    assert asr_verdict("走吧走吧", heard("走吧走吧走吧走吧走吧走吧"), "zh").verdict == FLAG     # babble: 12 for 4
    check = asr_verdict("回荡", heard("回到"), "zh")                                         # 1 of 2 heard
    assert check.verdict == INCONCLUSIVE and "short text (2 syllables < 12)" in check.reason
    assert asr_verdict("作用", heard("直徒用"), "zh").verdict == INCONCLUSIVE               # 3 for 2: not far
    assert asr_verdict("ask not", heard("and so"), "en").verdict == FLAG                    # 6 letters
    assert asr_verdict("your country", heard("your cut"), "en").verdict == INCONCLUSIVE       # 11 letters
    assert asr_verdict("your country", heard("your cut"), "en", QAOptions(min_units=6)).verdict == FLAG


def test_an_unsure_transcript_with_half_the_text_heard_is_inconclusive():
    mid = "甚至一二线城市虽停滞的情况"                        # the 6 units in the middle misheard, 7 of 13 heard
    check = asr_verdict(TEXT, heard(mid, logprob=-1.4), "zh")
    assert check.verdict == INCONCLUSIVE and "unsure" in check.reason
    assert asr_verdict(TEXT, heard(mid), "zh").verdict == FLAG


def test_an_unsure_transcript_that_matches_still_passes():
    assert asr_verdict(TEXT, heard(TEXT, logprob=-1.4), "zh").verdict == PASS


def test_too_little_heard_is_flagged_however_unsure_whisper_is():
    check = asr_verdict(TEXT, heard("甚至出现交", logprob=-1.6), "zh")          # a truncation: 5 of 13
    assert check.verdict == FLAG and "stopped short: the last 8 of 13" in check.reason
    check = asr_verdict(TEXT, heard(TEXT + "一二线城市虽然也处于调整中", logprob=-1.6), "zh")   # babble
    assert check.verdict == FLAG and "heard 26 units for 13" in check.reason


def test_a_take_that_stopped_short_is_flagged_where_the_rest_would_pass():
    """9 of 13 heard (cer 0.31 would pass): the text's last 4 units (>= TAIL_SHARE of them) never came."""
    check = asr_verdict(TEXT, heard("甚至出现交易几乎停"), "zh")
    assert check.cer <= MAX_CER and check.verdict == FLAG and "stopped short" in check.reason
    assert asr_verdict(TEXT, heard("甚至出现交易几乎停滞"), "zh").verdict == PASS          # the last 3 only


def test_one_unit_gone_from_a_short_text_with_nothing_in_its_place_is_a_take_that_stopped():
    """Under TAIL_UNITS: a tail of TAIL_SHARE of the text or more with nothing heard for it is flagged (so much
    cut inside "much" heard "So."); one heard as another syllable is a mishearing (回荡 heard 回到), and a smaller
    share than TAIL_SHARE is the last syllable Whisper let go (1 of 4)."""
    check = asr_verdict("SO MUCH", Transcript("So.", -0.62, 0.33, "en"), "en")
    assert check.verdict == FLAG and "stopped short: the last 1 of 2 units" in check.reason
    assert asr_verdict("他笑了。", heard("他笑"), "zh").verdict == FLAG                     # 1 of 3 gone
    assert asr_verdict("回荡", heard("回到"), "zh").verdict == INCONCLUSIVE                # heard as 到
    assert asr_verdict("我们走吧", heard("我们走"), "zh").verdict == PASS                   # 1 of 4 < TAIL_SHARE
    assert asr_verdict(TEXT, heard(TEXT[:-1]), "zh").verdict == PASS                      # 1 of 13


def test_a_missing_last_unit_is_judged_by_the_voiced_speech_after_the_last_heard_word():
    """The one-unit tail on the text alone flags and asks for the recording's tail speech (needs_tail); with it,
    voiced speech after the last heard word makes it inconclusive (a light syllable Whisper dropped, or not: the
    transcript cannot tell; never a pass), none flags it.  A tail of TAIL_UNITS asks for nothing."""
    check = asr_verdict("甚至出", heard("甚至"), "zh")
    assert check.verdict == FLAG and check.needs_tail
    said = TailSpeech(said_s=0.9, voiced_s=0.5, after_s=TAIL_SPEECH_S)
    check = asr_verdict("甚至出", heard("甚至"), "zh", tail=said)
    assert check.verdict == INCONCLUSIVE and not check.needs_tail and "0.05 s of voiced speech" in check.reason
    assert asr_verdict("好吧", heard("好"), "zh", tail=said).verdict == INCONCLUSIVE
    gone = TailSpeech(said_s=0.9, voiced_s=0.5, after_s=TAIL_SPEECH_S - 0.01)
    check = asr_verdict("SO MUCH", Transcript("So.", -0.62, 0.33, "en"), "en", tail=gone)
    assert check.verdict == FLAG and not check.needs_tail and "no voiced speech after it (0.04 s)" in check.reason
    for text, got in (("我们走吧", "我们"), ("回荡", "回到"), (TEXT, TEXT)):   # 2 gone; heard as another; whole
        assert not asr_verdict(text, heard(got), "zh").needs_tail
    assert asr_verdict("我们走吧", heard("我们"), "zh", tail=said).verdict == FLAG


def test_no_speech_is_flagged():
    assert asr_verdict(TEXT, heard(""), "zh").verdict == FLAG
    assert asr_verdict(TEXT, heard("。"), "zh").verdict == FLAG
    check = asr_verdict(TEXT, heard("字幕由社区提供一二线城市", logprob=-2.0, no_speech=0.8), "zh")
    assert check.verdict == FLAG and "no speech" in check.reason
    check = asr_verdict("水", heard("水", logprob=-2.0, no_speech=0.8), "zh")   # Whisper's "silence" says the text
    assert check.verdict == PASS


def test_the_drift_cutoff_is_the_floor_until_there_are_enough_values():
    opts = QAOptions(drift_floor=0.5)
    few = [0.9] * (DRIFT_MIN_VALUES - 1)
    assert drift_cutoff(few, opts) == 0.5
    many = [0.6 + 0.3 * i / 99 for i in range(100)]             # 0.600 … 0.900, evenly
    assert drift_cutoff(many, opts) == pytest.approx(0.6 + 0.3 * 0.075)
    assert drift_cutoff(many, QAOptions(drift_floor=0.7)) == 0.7   # the floor wins over a low percentile
    assert drift_cutoff([*few, None, float("nan")], opts) == 0.5   # missing values do not count


def test_drift_verdict():
    assert drift_verdict(0.9, 0.78) == PASS and drift_verdict(0.78, 0.78) == PASS
    assert drift_verdict(0.77, 0.78) == FLAG
    assert drift_verdict(None, 0.78) == INCONCLUSIVE


def test_combine_flag_wins_over_inconclusive_over_pass():
    assert combine(PASS, INCONCLUSIVE, FLAG) == FLAG
    assert combine(INCONCLUSIVE, PASS) == INCONCLUSIVE
    assert combine(PASS, None) == PASS and combine() == PASS
    with pytest.raises(ValueError):
        combine("maybe")


def test_the_best_take_sorts_first():
    takes = [(FLAG, 0.1, 0.95), (PASS, 0.2, 0.8), (INCONCLUSIVE, 0.0, 0.99), (PASS, 0.2, 0.9), (PASS, 0.1, None),
             (PASS, None, 0.99)]
    ranked = sorted(takes, key=lambda t: take_rank(*t))
    assert ranked == [(PASS, 0.1, None), (PASS, 0.2, 0.9), (PASS, 0.2, 0.8), (PASS, None, 0.99),
                      (INCONCLUSIVE, 0.0, 0.99), (FLAG, 0.1, 0.95)]


def test_options_defaults_and_validation():
    d = QAOptions()
    assert (d.mode, d.asr_model, d.device, d.max_cer, d.min_units, d.drift_floor, d.min_speech_s, d.max_takes) == \
        ("off", "base", "cpu", MAX_CER, MIN_UNITS, DRIFT_FLOOR, MIN_SPEECH_S, MAX_TAKES)
    assert QA_MODES == ("off", "suspect", "full", "auto")
    bad = {"mode": "all", "device": "tpu", "asr_model": " ", "max_cer": 0, "min_units": 0, "low_logprob": 0.5,
           "drift_percentile": 60, "drift_floor": 1.5, "min_speech_s": 0, "max_takes": 0}
    for field, value in bad.items():
        with pytest.raises(ValueError, match=field.replace("_", " ").split()[0] if field == "mode" else field):
            QAOptions(**{field: value})
        with pytest.raises(ValueError):                                  # replace() is checked too
            dataclasses.replace(d, **{field: value})
    with pytest.raises(ValueError, match="max_takes"):
        QAOptions(max_takes=True)


def test_what_hearing_costs_against_base(tmp_path):
    from tasks.qa.options import ASR_COST, BASE_MODEL_BYTES, asr_cost

    assert asr_cost("base") == asr_cost("base.en") == 1.0 and asr_cost("tiny.en") == 0.53
    assert asr_cost("Systran/faster-whisper-small") == 3.3 and asr_cost("distil-large-v3") == 20.9
    assert asr_cost("large-v3-turbo") == asr_cost("turbo") == 10.9
    assert asr_cost("someone/whisper-ft") == max(c for _, c in ASR_COST)        # unknown: the most
    (tmp_path / "model.bin").write_bytes(b"0" * (BASE_MODEL_BYTES // 1000))
    assert asr_cost(str(tmp_path)) == pytest.approx(1e-3, rel=1e-3)             # a directory: its size


def test_auto_picks_full_where_the_estimated_share_fits(monkeypatch):
    from tasks.qa import options

    monkeypatch.setattr(options, "BASE_SHARE", {"cpu": 0.2, "cuda": 0.01})
    assert options.auto_mode("cpu", "base") == ("full", 0.2)
    assert options.auto_mode("cpu", "tiny")[0] == "full"
    mode, share = options.auto_mode("cpu", "small")
    assert mode == "suspect" and share == pytest.approx(0.66)
    assert options.auto_mode("cuda", "medium")[0] == "full"                   # 0.104 <= 0.15
    assert options.auto_mode("cuda", "large-v3")[0] == "suspect"              # 0.209 > 0.15
