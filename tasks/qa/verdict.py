"""The QA verdicts: what a transcript and a speaker similarity mean for one recording, and which take is best.

    ASR    (n intended units, h heard, m heard as themselves: equal in the edit script; rules in this order)
           flag          nothing heard: no units
           flag          it stopped short: the units after the last one heard as itself are >= TAIL_SHARE * n
                         and either >= TAIL_UNITS or nothing was heard in their place and the recording holds
                         less than TAIL_SPEECH_S of voiced speech after the last word heard (TailSpeech: one
                         unit heard as another is a misheard last syllable), and the text before them was heard
                         (MIN_HEARD of it at least): a truncation, also where the rest matches
           inconclusive  the same but for voiced speech after the last word heard: a light last syllable Whisper
                         dropped, or a take that stopped short — which, the transcript cannot tell
           pass          cer <= max_cer (even when Whisper is unsure: the match itself is the evidence)
           flag          Whisper's own silence rule (no_speech_prob > NO_SPEECH_PROB and avg_logprob <
                         low_logprob) and none of the text heard (m = 0)
           flag          far more or far fewer units: |n - h| > max_cer * n and >= MIN_GAP_UNITS (the edit
                         distance is at least the gap, so no reading of unsure units could pass: babble, a dropped
                         clause)
           flag          less than MIN_HEARD of the text heard as itself (m < MIN_HEARD * n): another text
           inconclusive  a short text (fewer than min_units comparable units) in between: a few units differ
           inconclusive  avg_logprob < low_logprob (Whisper is unsure which words it heard)
           flag          cer > max_cer
    drift  inconclusive  no embedding (less than min_speech_s of speech)
           flag          similarity to the voice's reference < cutoff = max(drift_floor, the drift_percentile-th
                         percentile of the book's similarities, once there are DRIFT_MIN_VALUES of them)
           pass          otherwise
A flag is re-taken (up to max_takes); an inconclusive result is reported, never re-taken."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.qa.asr import TailSpeech, Transcript
from tasks.qa.compare import Comparison, compare
from tasks.qa.options import (
    DRIFT_MIN_VALUES,
    MIN_GAP_UNITS,
    MIN_HEARD,
    NO_SPEECH_PROB,
    TAIL_SHARE,
    TAIL_SPEECH_S,
    TAIL_UNITS,
    QAOptions,
)

PASS, FLAG, INCONCLUSIVE = "pass", "flag", "inconclusive"
VERDICTS = (PASS, INCONCLUSIVE, FLAG)          # best first: take_rank's order, combine's (worst wins)


@dataclass(frozen=True)
class AsrCheck:
    cer: float
    comparison: Comparison
    verdict: str
    reason: str                                 # one line; "" for a pass
    needs_tail: bool = False                    # flagged by the one-unit tail rule on the text alone: judge it again
                                                # with the recording's TailSpeech (Transcriber.tail_speech)


def comparable_count(comparison: Comparison, language: str) -> int:
    """How much the intended text gives to compare: syllables (and Latin words) for zh, letters for en."""
    return sum(len(u) for u in comparison.ref) if language == "en" else len(comparison.ref)


def asr_verdict(intended: str, transcript: Transcript, language: str, opts: QAOptions = QAOptions(),
                tail: TailSpeech | None = None) -> AsrCheck:
    """The ASR check's verdict of one transcript against its intended text (the module doc's rules, in order).
    tail: the recording's voiced speech around the end of the transcript's last word, the second signal of the
    one-unit tail rule; without it that rule flags on the text alone (needs_tail)."""
    c = compare(intended, transcript.text, language)
    n, h, m = len(c.ref), len(c.hyp), c.matched
    heard = _clip(transcript.text)
    if not h:
        return AsrCheck(c.cer, c, FLAG, f"nothing heard ({heard!r}) for {n} units")
    after = n - c.last_matched - 1                  # intended units after the last one heard as itself
    if m and m >= MIN_HEARD * (n - after) and after >= TAIL_SHARE * n:
        stopped = f"stopped short: the last {after} of {n} units not heard ({heard!r})"
        if after >= TAIL_UNITS:
            return AsrCheck(c.cer, c, FLAG, stopped)
        if not c.heard_after:                       # nothing heard in its place: gone, or dropped by Whisper
            if tail is None:
                return AsrCheck(c.cer, c, FLAG, stopped, needs_tail=True)
            if tail.after_s < TAIL_SPEECH_S:
                return AsrCheck(c.cer, c, FLAG, f"{stopped}, and no voiced speech after it ({tail.after_s:.2f} s)")
            return AsrCheck(c.cer, c, INCONCLUSIVE, f"the last {after} of {n} units not heard ({heard!r}) but the "
                                                    f"recording goes on: {tail.after_s:.2f} s of voiced speech "
                                                    "after it (a syllable Whisper dropped?)")
    if c.cer <= opts.max_cer:
        return AsrCheck(c.cer, c, PASS, "")
    unsure = transcript.avg_logprob < opts.low_logprob
    if unsure and transcript.no_speech_prob > NO_SPEECH_PROB and not m:
        return AsrCheck(c.cer, c, FLAG, f"no speech heard (no_speech_prob {transcript.no_speech_prob:.2f}, "
                                        f"avg_logprob {transcript.avg_logprob:.2f}): {heard!r} for {n} units")
    if abs(n - h) > opts.max_cer * n and abs(n - h) >= MIN_GAP_UNITS:
        return AsrCheck(c.cer, c, FLAG, f"cer {c.cer:.2f} > {opts.max_cer:g}: heard {h} units for {n} ({heard!r})")
    if m < MIN_HEARD * n:
        return AsrCheck(c.cer, c, FLAG, f"cer {c.cer:.2f}: {m} of {n} units heard ({heard!r})")
    if (k := comparable_count(c, language)) < opts.min_units:
        what = "letters" if language == "en" else "syllables"
        return AsrCheck(c.cer, c, INCONCLUSIVE, f"cer {c.cer:.2f} > {opts.max_cer:g} on a short text ({k} {what} "
                                                f"< {opts.min_units}): {m} of {n} units heard ({heard!r})")
    if unsure:
        return AsrCheck(c.cer, c, INCONCLUSIVE, f"cer {c.cer:.2f} > {opts.max_cer:g} but the transcript is unsure "
                                                f"(avg_logprob {transcript.avg_logprob:.2f} < {opts.low_logprob:g})")
    return AsrCheck(c.cer, c, FLAG, f"cer {c.cer:.2f} > {opts.max_cer:g}: heard {heard!r}")


def drift_cutoff(similarities: Sequence[float], opts: QAOptions = QAOptions()) -> float:
    """The similarity below which a recording has drifted from its voice."""
    values = [float(s) for s in similarities if s is not None and math.isfinite(s)]
    if len(values) < DRIFT_MIN_VALUES:
        return opts.drift_floor
    return max(opts.drift_floor, _percentile(values, opts.drift_percentile))


def drift_verdict(similarity: float | None, cutoff: float) -> str:
    if similarity is None or not math.isfinite(similarity):
        return INCONCLUSIVE
    return FLAG if similarity < cutoff else PASS


def combine(*verdicts: str | None) -> str:
    """One verdict of several checks' (None: a check that did not run): flag > inconclusive > pass."""
    for v in verdicts:
        if v is not None and v not in VERDICTS:
            raise ValueError(f"unknown verdict {v!r}")
    given = [v for v in verdicts if v is not None]
    return max(given, key=VERDICTS.index) if given else PASS


def take_rank(verdict: str, cer: float | None, similarity: float | None) -> tuple:
    """Sort key of a take, the best first: pass < inconclusive < flag, then lower cer, then higher similarity
    (a missing cer or similarity sorts after any value)."""
    return (VERDICTS.index(verdict),
            cer if cer is not None and math.isfinite(cer) else math.inf,
            -similarity if similarity is not None and math.isfinite(similarity) else math.inf)


def _percentile(values: list[float], p: float) -> float:
    """The p-th percentile, linear interpolation between order statistics (numpy's default method)."""
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def _clip(text: str, n: int = 60) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[:n - 1] + "…"
