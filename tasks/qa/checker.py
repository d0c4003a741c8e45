"""Hear takes: the checks a segment's audio gets, as the record kept beside that audio.

    checker = Checker(QAOptions(mode="full"))
    record = checker.hear(text, audio, SAMPLE_RATE, asr=True, embed=True)
    # {"checks": ["asr", "drift"], "transcript": …, "cer": 0.08, "asr": "pass", "speech_s": 4.1,
    #  "embedding": <base64 float16 [256]>, "language": "zh", "reason": ""}
    records = checker.hear_many([ToHear(text, audio, SAMPLE_RATE, asr=True), …])   # packed (tasks.qa.hearing)

The drift gate needs the voice's reference, which only the book's own takes give: `voice_reference` (the
centroid of the book's first accepted takes in reading order: 3 s of speech or more, not flagged by the ASR or
the duration guard) and the cutoff relative to the book's spread
(tasks.qa.verdict.drift_cutoff) are computed once per voice and kept in the book's qa.json, so a resumed or
edited render judges every take against the same reference.  The models load on first use, once per Checker.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from tasks.errors import QAUnavailable
from tasks.qa.asr import load_transcriber
from tasks.qa.compare import detect_language
from tasks.qa.hearing import hear_texts
from tasks.qa.options import QAOptions
from tasks.qa.speaker import decode_vector, encode_vector, load_encoder, similarity
from tasks.qa.verdict import FLAG, drift_cutoff, drift_verdict

MIN_REFERENCE_TAKES = 3       # accepted takes in the whole book below which a voice gets no drift gate
CHECK_ORDER = ["duration", "asr", "drift"]   # a record's `checks`, in this order


@functools.lru_cache(maxsize=2)
def checker_for(opts: QAOptions) -> Checker:
    """The process's checker for these options: its models load once, whichever stage asks first."""
    return Checker(opts)


class Checker:
    """The ASR model and the speaker encoder of one render, loaded on first use (from the checker thread)."""

    def __init__(self, opts: QAOptions, transcriber=None, encoder=None):
        self.opts = opts
        self._transcriber, self._encoder = transcriber, encoder
        self._lock = threading.Lock()

    @property
    def transcriber(self):
        with self._lock:
            if self._transcriber is None:
                self._transcriber = load_transcriber(self.opts.asr_model, self.opts.device)
            return self._transcriber

    @property
    def encoder(self):
        with self._lock:
            if self._encoder is None:
                self._encoder = load_encoder(self.opts.device)
            return self._encoder

    def load(self, asr: bool = True) -> None:
        """Load the models now (a missing extra or model: QAUnavailable before anything renders)."""
        if asr:
            _ = self.transcriber                        # each property loads its model on first use
        _ = self.encoder

    def available(self) -> bool:
        """Whether the models load (the default proof of a real model needs the QA extra and its ASR model)."""
        try:
            self.load()
        except QAUnavailable:
            return False
        return True

    @property
    def batch(self) -> int:
        """Takes heard in one call at most (the transcriber's windows per model call)."""
        return self.transcriber.batch

    def hear(self, text: str, audio: np.ndarray, sample_rate: int, *, asr: bool, embed: bool = True) -> dict:
        """The checks of one take that need no other take: the transcript and its verdict (asr), the speaker
        embedding (embed; judged later against the voice's reference)."""
        return self.hear_many([ToHear(text, audio, sample_rate, asr, embed)])[0]

    def hear_many(self, takes: Sequence[ToHear]) -> list[dict]:
        """hear() of each take, the transcripts in a few calls (hear_texts: packed into Whisper's windows, what
        does not pass heard again alone)."""
        langs = [detect_language(t.text) for t in takes]
        recs: list[dict[str, Any]] = [
            {"checks": [], "language": lang, "transcript": "", "cer": None, "asr": "", "reason": "", "speech_s": None,
             "embedding": "", "similarity": None, "drift": ""} for lang in langs]
        asked = [i for i, t in enumerate(takes) if t.asr]
        heard = hear_texts(self.transcriber, [(takes[i].text, np.asarray(takes[i].audio, dtype=np.float32),
                                               takes[i].sample_rate, langs[i]) for i in asked], self.opts) \
            if asked else []
        for i, (tr, check) in zip(asked, heard):
            recs[i].update(transcript=tr.text, cer=_round(check.cer), asr=check.verdict,
                           reason=f"asr: {check.reason}" if check.verdict != "pass" else "")
            recs[i]["checks"].append("asr")
        for t, rec in zip(takes, recs):
            if t.embed:
                emb = self.encoder.embed(np.asarray(t.audio, dtype=np.float32), t.sample_rate)
                rec["speech_s"] = round(float(emb.speech_s), 3)
                if emb.vector is not None:
                    rec["embedding"] = encode_vector(emb.vector)
        return recs


class ToHear(NamedTuple):
    """One take for Checker.hear_many."""
    text: str                     # what it should say
    audio: np.ndarray             # float32 mono [samples]
    sample_rate: int              # Hz
    asr: bool                     # transcribe it and judge the transcript
    embed: bool = True            # its speaker embedding


def accepted(record: dict | None) -> bool:
    """A take that may stand for its voice: heard, 3 s of speech or more, not flagged by the duration or the ASR."""
    return bool(record and record.get("embedding") and record.get("asr") != FLAG and not record.get("duration"))


def voice_reference(records: Sequence[dict], opts: QAOptions) -> np.ndarray | None:
    """A voice's reference embedding: the unit centroid of its first opts.reference_takes accepted takes, in
    reading order.  None with fewer than min(MIN_REFERENCE_TAKES, reference_takes)."""
    vecs = [decode_vector(r["embedding"]) for r in records if accepted(r)][:opts.reference_takes]
    if len(vecs) < min(MIN_REFERENCE_TAKES, opts.reference_takes):
        return None
    c = np.mean(np.stack(vecs).astype(np.float64), axis=0)
    return (c / np.linalg.norm(c)).astype(np.float32)


def reference_cutoff(records: Sequence[dict], reference: np.ndarray, opts: QAOptions) -> float:
    """The drift cutoff for a voice: relative to the similarities of its own reference takes, with the floor."""
    return drift_cutoff([similarity_to(r, reference) for r in records if r.get("embedding")], opts)


def similarity_to(record: dict, reference: np.ndarray) -> float:
    return float(similarity(decode_vector(record["embedding"]), reference))


def judge_drift(record: dict, reference: np.ndarray | None, cutoff: float | None) -> dict:
    """The record with its similarity to the voice's reference and the drift verdict (unchanged when the take has
    no embedding — under 3 s of speech — or the voice no reference)."""
    if reference is None or cutoff is None or not record.get("embedding"):
        return record
    sim = similarity_to(record, reference)
    verdict = drift_verdict(sim, cutoff)
    out = {**record, "similarity": _round(sim), "drift": verdict,
           "checks": sorted(set(record.get("checks", [])) | {"drift"}, key=CHECK_ORDER.index)}
    if verdict == FLAG and not out.get("reason"):
        out["reason"] = f"drift: speaker similarity {sim:.3f} below this voice's cutoff {cutoff:.3f}"
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)
