"""Hear takes and judge what they say: the ASR check as the render, `fix` and `check` run it.

    heard = hear_texts(transcriber, [(text, audio, sample_rate, language), …], opts)   # [(Transcript, AsrCheck)]

The takes are packed into Whisper's windows (tasks.qa.asr.Transcriber.transcribe_many, pack: several takes per
30-s window, most of the ASR's cost saved on a CPU); a packed transcript is kept where it stands (a pass, and for a
short text an exact one), every other take is heard again alone and judged on that, so a flag or an inconclusive
verdict is always the one hearing the take alone gives.  Where the one-unit tail rule flags on the text alone, the
recording is asked how much voiced speech follows its last heard word (Transcriber.tail_speech).  docs/qa.md."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tasks.qa.asr import TailSpeech, Transcript
from tasks.qa.options import QAOptions
from tasks.qa.verdict import PASS, AsrCheck, asr_verdict, comparable_count

if TYPE_CHECKING:
    import numpy as np


def hear_texts(transcriber, takes: Sequence[tuple[str, np.ndarray, int, str]],
               opts: QAOptions) -> list[tuple[Transcript, AsrCheck]]:
    """Each (intended text, audio float32 mono [samples], sample rate Hz, language) heard and judged, the way every
    take is (judged): packed into Whisper's windows (Transcriber.transcribe_many, pack), heard again alone where a
    packed transcript does not stand (one more call for all of them)."""
    items = [(audio, rate, lang) for _, audio, rate, lang in takes]
    packed = transcriber.transcribe_many(items, pack=True)
    again = [i for i, ((text, _, _, lang), tr) in enumerate(zip(takes, packed))
             if tr.packed and not stands(asr_verdict(text, tr, lang, opts), lang, opts)]
    alone = dict(zip(again, transcriber.transcribe_many([items[i] for i in again]) if again else []))
    return [judged(text, lang, packed[i], alone.get(i, packed[i]), tail_of(transcriber, audio, rate), opts)
            for i, (text, audio, rate, lang) in enumerate(takes)]


def stands(check: AsrCheck, language: str, opts: QAOptions) -> bool:
    """Whether a packed transcript's verdict is kept: a pass, and for a short text (fewer than opts.min_units
    comparable units) an exact one — its neighbours are context, and one unit more or less heard decides a short
    text (a take cut to 45 % of 王英汉 heard 英汉 packed, 请注意 alone; docs/qa.md)."""
    return check.verdict == PASS and (check.cer == 0 or comparable_count(check.comparison, language) >= opts.min_units)


def tail_of(transcriber, audio: np.ndarray, rate: int) -> Callable[[Transcript], TailSpeech | None]:
    """The recording's TailSpeech after a transcript's last word, asked only where a verdict needs it."""
    return lambda tr: transcriber.tail_speech(audio, rate, tr)


def judged(text: str, language: str, packed: Transcript, alone: Transcript,
           tail: Callable[[Transcript], TailSpeech | None], opts: QAOptions) -> tuple[Transcript, AsrCheck]:
    """One take's transcript and ASR verdict from what it was heard as packed and alone (the same transcript where
    it was alone in its window): the packed one where it stands (stands), else the one heard alone (so a flag or an
    inconclusive verdict is always the one hearing it alone gives); a one-unit tail flagged on the text alone judged
    again with the recording's voiced speech after its last heard word (tail; docs/qa.md)."""
    tr, check = packed, asr_verdict(text, packed, language, opts)
    if packed.packed and not stands(check, language, opts):
        tr, check = alone, asr_verdict(text, alone, language, opts)
    if check.needs_tail and (speech := tail(tr)) is not None:
        check = asr_verdict(text, tr, language, opts, speech)
    return tr, check
