"""Precision and recall of the QA flags on every (recording, text) pair the real-speech corpus gives, the ASR
check and the drift gate separately, and what the checks cost (ASR and speaker-embedding seconds per audio
second).

    python -m benchmarks.qa_precision                       # Whisper base, one thread
    python -m benchmarks.qa_precision --asr-model small --threads 2 --json out.json -v
    python -m benchmarks.qa_precision --span-clips 2 --spans 1   # short texts from the first 2 clips, one per
                                                                 # length
    python -m benchmarks.qa_precision --span-clips zh_thchs30_test_2.wav --spans 1   # tests/tasks/qa/
                                                                 # test_corpus.py's CI set

Pairs (built by asr_pairs / drift_pairs from ../shared/corpus/speech/transcripts.tsv and the file names), at
every length: the full clips, and short texts cut from them (cut_spans, LENGTHS: 2-4, 5-8 and 9-12 units, i.e.
syllables for Chinese, words for English):
    right       a clip (or a span of it) with its own transcript                    -> must not be flagged
    wrong       a clip with another clip's transcript, same language (not the same
                sentence: D4_751 and its noise copy share one); a span with another
                span's text of its length (not an overlapping part of one sentence)  -> must be flagged
    truncated   a clip or span cut at TRUNCATE_FRACTION of what it says (truncate_at: of the way from its
                start to where its last unit ends; it may end inside a syllable) with its full text
                                                                                     -> must be flagged
    stopped     a take that stopped early at a unit boundary: the clip or span cut at the cut nearest
                TRUNCATE_FRACTION of its units (stop_at; one unit kept at least, half of them at most)
                with its full text                                                   -> must be flagged
    noise       seeded noise (white, and brown: speech-band heavy; NOISE_S for the
                clips, a length's median span for its spans) with each text         -> must be flagged
A span's text is the clip's exact transcript, its units [i, j); its audio is the clip cut where the transcript's
unit i starts and unit j ends (clip_cuts), with FADE_S fades.  Those times come from Whisper's word timestamps
(faster-whisper, word_timestamps, on the whole clip), aligned unit by unit to the exact transcript
(tasks.qa.compare.align over toneless syllables or words): a cut is made only between two units both heard as
themselves and next to each other in what Whisper heard, at the middle of their boundary, moved to the quietest
10 ms within SNAP_S, and only where that 10 ms is CUT_MAX_DB below the clip's loudest (a syllable boundary is a dip
in energy; a boundary without one would cut a syllable) and is not the gap between a syllable's consonant and its
vowel (inside_syllable: unvoiced sound up to the cut, voicing right after it — the aspiration of 出 "chu" fades to
-20 dB before its vowel, and Whisper's boundary 40-90 ms late put a cut there that kept "ch" and dropped "u"); a
clip's start and end are cuts too.  Per clip and
length: a span from the clip's start, one to its end and one in its middle (SPANS_PER_LENGTH), those that do not
overlap, each of a length in the range (which one varies by clip and place).  Where a clip's last unit ends is
Whisper's end of its last word: a clip's trailing silence or room noise (up to 0.8 s here) is not part of what it
says, and a truncation by samples kept all of a span's words where the span ends a clip (docs/qa.md).  The 0 dB-noise
copy of D4_751 gives no spans and no stopped take (NOISY: its text is D4_751's, and 0 dB noise cut into syllables is
not a take).
    same        two clips of one speaker (AISHELL-1 S0764 W0121/W0122; THCHS-30 D4_751 and its 0 dB-noise copy)
                                                                                     -> must pass the drift gate
    other       two clips of different speakers; the THCHS-30 test_* clips, whose speaker is unknown, are left
                out of both sets with each other and with D4 (MANIFEST.md)          -> must be flagged
The ASR check's verdicts count "flag" only: an inconclusive wrong pair is a miss (recall), an inconclusive right
pair is not a false flag (precision) but is printed too.  The drift gate here is a single pair, so its cutoff is
the floor alone (QAOptions.drift_floor), as `check --voice-ref` uses it."""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
SPEECH = CORPUS / "speech"
TRUNCATE_FRACTION = 0.45          # of what a clip (or span) says kept for a truncation: of the time from its start
                                  # to where its last unit ends (truncate_at)
NOISE_S = 5.0                     # s of noise per noise clip paired with the full clips' transcripts
LENGTHS = ((2, 4), (5, 8), (9, 12))   # units (zh syllables, en words) of the short texts cut from the clips
FULL = "full"                     # the length label of the whole clips
SPANS_PER_LENGTH = 3              # short texts per clip and length at most: from its start, to its end, its middle
SNAP_S = 0.06                     # s: a cut moves to the quietest ENERGY_FRAME_S this close to Whisper's boundary
ENERGY_FRAME_S = 0.01             # s: the frames whose energy places a cut
CUT_MAX_DB = -20.0                # dB re the clip's loudest frame: a cut only where the audio dips this low (a
                                  # boundary between two syllables, not the middle of one)
ONSET_S = 0.03                    # s: voicing this soon after a cut, with unvoiced sound up to it, is a vowel whose
                                  # consonant the cut kept on the other side (inside_syllable)
BEFORE_S = 0.05                   # s before a cut looked at for that consonant (its frication or aspiration)
FADE_S = 0.005                    # s: a span's ends fade in and out (no click where it is cut)
NOISY = ("_noise0dB",)            # clips that are another clip plus noise: no spans of their own (the same text)
NOISE_RATE = 16_000               # Hz
NOISE_SEED = 20240                # the noise clips' generator seed
NOISE_RMS = 0.05                  # linear RMS of the noise (about -26 dBFS)
UNKNOWN = None                    # a clip whose speaker the corpus does not name
KINDS = ("right", "wrong", "truncated", "stopped", "noise")

# file-name pattern -> speaker identity (MANIFEST.md's speaker groups); None: unknown, kept out of the drift sets
_SPEAKERS = ((re.compile(r"aishell1_(S\d{4})_"), r"aishell1:\1"),
             (re.compile(r"thchs30_(D4)_"), r"thchs30:\1"),
             (re.compile(r"thchs30_test_"), None),
             (re.compile(r"cosyvoice_zero_shot_prompt"), "cosyvoice:prompt"),
             (re.compile(r"librispeech_(\d+)-"), r"librispeech:\1"),
             (re.compile(r"whisper_jfk"), "jfk"))


@dataclass(frozen=True)
class Clip:
    name: str                     # the file name
    path: Path
    text: str                     # its exact transcript
    language: str                 # "zh" | "en" (the file name's prefix)
    speaker: str | None           # identity, None when unknown


@dataclass(frozen=True)
class Span:
    clip: str                     # the clip's file name
    first: int                    # its units [first, last) of the clip's transcript
    last: int
    text: str                     # the transcript's characters of those units (exact, not the ASR's)
    start_s: float                # where the clip is cut
    end_s: float
    language: str
    said_s: float                 # where its last unit ends in the clip: its end cut, or the clip's said_s at its end
    stop_s: float | None = None   # where a take of it that stopped early ends (stop_at), None: no cut there

    @property
    def key(self) -> str:
        return f"{self.clip}@{self.first}-{self.last}"

    @property
    def units(self) -> int:
        return self.last - self.first


@dataclass(frozen=True)
class Pair:
    kind: str                     # right | wrong | truncated | stopped | noise | same | other
    audio: str                    # the audio's key: a clip name or Span.key, "<key>#truncated", "<key>#stopped",
                                  # "noise:<colour>[:<s>]"
    text: str                     # the intended text (ASR pairs), "" for drift pairs
    language: str
    other: str = ""               # drift pairs: the second clip's name
    should_flag: bool = True
    length: str = FULL            # "full", or the span length's label ("2-4")


def speaker_of(name: str) -> str | None:
    for pattern, identity in _SPEAKERS:
        m = pattern.search(name)
        if m:
            return m.expand(identity) if identity else UNKNOWN
    raise ValueError(f"{name}: no speaker rule for this corpus file (add one to _SPEAKERS)")


def corpus_clips(speech_dir: Path = SPEECH) -> list[Clip]:
    """The corpus's clips, in transcripts.tsv order."""
    from tasks.qa.recordings import read_texts

    clips = []
    for path, text in read_texts(speech_dir / "transcripts.tsv"):
        lang = path.name.split("_", 1)[0]
        if lang not in ("zh", "en"):
            raise ValueError(f"{path.name}: the file name does not start with zh_ or en_")
        clips.append(Clip(path.name, path, text, lang, speaker_of(path.name)))
    return clips


def asr_pairs(clips: list[Clip], spans: Sequence[Span] = (), stops: dict[str, float] | None = None) -> list[Pair]:
    """right, wrong, truncated, stopped and noise pairs of the full clips, then of the spans per length (module
    doc); stops: the audio keys (clip names, Span.key) of the takes that stopped early, to where (s)."""
    stops = stops or {}
    out = [Pair("right", c.name, c.text, c.language, should_flag=False) for c in clips]
    out += [Pair("wrong", a.name, b.text, a.language) for a, b in itertools.permutations(clips, 2)
            if a.language == b.language and _plain(a.text) != _plain(b.text)]
    out += [Pair("truncated", f"{c.name}#truncated", c.text, c.language) for c in clips]
    out += [Pair("stopped", f"{c.name}#stopped", c.text, c.language) for c in clips if c.name in stops]
    out += [Pair("noise", f"noise:{colour}", c.text, c.language) for colour in ("white", "brown") for c in clips]
    sentence = {c.name: _plain(c.text) for c in clips}
    for label, group in _by_length(spans).items():
        out += [Pair("right", s.key, s.text, s.language, should_flag=False, length=label) for s in group]
        out += [Pair("wrong", a.key, b.text, a.language, length=label) for a, b in itertools.permutations(group, 2)
                if a.language == b.language and _plain(a.text) != _plain(b.text)
                and not (sentence[a.clip] == sentence[b.clip] and a.first < b.last and b.first < a.last)]
        out += [Pair("truncated", f"{s.key}#truncated", s.text, s.language, length=label) for s in group]
        out += [Pair("stopped", f"{s.key}#stopped", s.text, s.language, length=label) for s in group
                if s.key in stops]
        seconds = round(statistics.median(s.end_s - s.start_s for s in group), 1)
        out += [Pair("noise", f"noise:{colour}:{seconds}", s.text, s.language, length=label)
                for colour in ("white", "brown") for s in group]
    return out


def length_label(units: int) -> str:
    return next(f"{lo}-{hi}" for lo, hi in LENGTHS if lo <= units <= hi)


def _by_length(spans: list[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {f"{lo}-{hi}": [] for lo, hi in LENGTHS}
    for s in spans:
        out[length_label(s.units)].append(s)
    return {k: v for k, v in out.items() if v}


# ------------------------------------------------------------------------------------------ short texts: spans

@dataclass(frozen=True)
class Timeline:
    cuts: dict[int, float]        # {b: s} where the clip may be cut between its transcript's units b-1 and b, with
                                  # its start (0) and end (n); none for a noisy copy of another clip (NOISY)
    said_s: float                 # where its last unit ends: Whisper's end of its last word (s)


def clip_timeline(clip: Clip, audio, rate: int, transcriber) -> Timeline:
    """Where the clip may be cut (module doc) and where what it says ends, from Whisper's word timestamps."""
    from tasks.qa.compare import unit_spans
    from tasks.qa.voicing import frames

    heard = word_times(transcriber, audio, rate, clip.language)
    end = len(audio) / rate
    said = min(end, heard[-1][2]) if heard else end
    if any(m in clip.name for m in NOISY):
        return Timeline({}, said)
    voiced = frames(audio, rate)
    inner = {b: t for b, t in ((b, snap(audio, rate, t)) for b, t in
                               unit_boundaries(clip.text, heard, clip.language).items())
             if (db := level_db(audio, rate, t)) <= CUT_MAX_DB and not inside_syllable(voiced, t, db)}
    return Timeline({0: 0.0, **dict(sorted(inner.items())), len(unit_spans(clip.text, clip.language)): end}, said)


def truncate_at(start_s: float, said_s: float) -> float:
    """Where a truncated take of audio starting at start_s whose last unit ends at said_s ends (s from its start)."""
    return TRUNCATE_FRACTION * max(0.0, said_s - start_s)


def stop_at(first: int, last: int, cuts: dict[int, float]) -> int | None:
    """Where a take of units [first, last) that stopped early ends: the cut nearest TRUNCATE_FRACTION of its units
    that keeps one unit at least and half of them at most (the earlier of two as near); None without one."""
    aim = first + TRUNCATE_FRACTION * (last - first)
    return min((b for b in cuts if first < b <= first + (last - first) / 2), key=lambda b: (abs(b - aim), b),
               default=None)


def cut_spans(clip: Clip, timeline: Timeline, index: int, per_length: int = SPANS_PER_LENGTH) -> list[Span]:
    """Short texts cut from one clip at its cuts (module doc): per LENGTHS range, up to per_length spans that do not
    overlap, tried from the clip's start, to its end, in its middle; `index` (the clip's place in the corpus) varies
    the lengths tried first."""
    from tasks.qa.compare import unit_spans

    ref = unit_spans(clip.text, clip.language)
    n, cuts = len(ref), timeline.cuts
    spans: list[Span] = []
    for lo, hi in LENGTHS if cuts else ():
        kept: list[tuple[int, int]] = []
        for place in range(min(per_length, 3)):
            width = hi - lo + 1
            for length in (lo + (index + place + d) % width for d in range(width)):
                if length > n:
                    continue
                at = (0, n - length, (n - length) // 2)[place]
                tries = [at] if place < 2 else sorted(range(max(0, at - 2), min(n - length, at + 2) + 1),
                                                      key=lambda i: abs(i - at))
                found = next(((i, i + length) for i in tries if i in cuts and i + length in cuts
                              and all(i >= e or i + length <= s for s, e in kept)), None)
                if found:
                    kept.append(found)
                    break
        spans += [Span(clip.name, i, j, clip.text[ref[i][1]:ref[j - 1][2]], cuts[i], cuts[j], clip.language,
                       cuts[j] if j < n else timeline.said_s,
                       None if (k := stop_at(i, j, cuts)) is None else cuts[k]) for i, j in kept]
    return spans


def word_times(transcriber, audio, rate: int, language: str) -> list[tuple[str, float, float]]:
    """Whisper's words in the clip with their start and end (s): faster-whisper's word timestamps (greedy)."""
    from tasks.qa.asr import to_asr_rate

    segments, _ = transcriber.model.transcribe(to_asr_rate(audio, rate), language=language, beam_size=1,
                                               best_of=1, temperature=0.0, condition_on_previous_text=False,
                                               vad_filter=False, word_timestamps=True)
    return [(w.word, float(w.start), float(w.end)) for s in segments for w in s.words]


def unit_boundaries(text: str, words: list[tuple[str, float, float]], language: str) -> dict[int, float]:
    """{b: seconds} where the transcript's unit b-1 ends and unit b starts, for the b (0 < b < units) where both
    were heard as themselves (equal in the alignment), next to each other, each timed on its own: a unit of a
    Whisper word that holds k units gets a k-th of the word's time (a Chinese token of two characters), a unit that
    shares its characters with another (digits read aloud) or spans two words gets none."""
    from collections import Counter

    from tasks.qa.compare import align, unit_spans

    heard, owner = "", []                                   # owner[c]: the word the c-th character belongs to
    for k, (w, _, _) in enumerate(words):
        heard += w
        owner += [k] * len(w)
    hyp = unit_spans(heard, language)
    shared = Counter((s, e) for _, s, e in hyp)
    per_word = Counter(owner[s] for _, s, _ in hyp)
    seen: Counter = Counter()
    times: list[tuple[float, float] | None] = []
    for _, s, e in hyp:
        k = owner[s]
        part, seen[k] = seen[k], seen[k] + 1
        _, w0, w1 = words[k]
        one = owner[e - 1] == k and shared[s, e] == 1
        times.append((w0 + (w1 - w0) * part / per_word[k], w0 + (w1 - w0) * (part + 1) / per_word[k]) if one
                     else None)
    ref = unit_spans(text, language)
    at = {i: j for op, i, j in align([u for u, _, _ in ref], [u for u, _, _ in hyp]) if op == "equal"}
    out = {}
    for b in range(1, len(ref)):
        j0, j1 = at.get(b - 1), at.get(b)
        if j0 is not None and j1 == j0 + 1 and times[j0] and times[j1]:
            out[b] = (times[j0][1] + times[j1][0]) / 2
    return out


def snap(audio, rate: int, t: float) -> float:
    """t moved to the middle of the quietest ENERGY_FRAME_S frame within SNAP_S of it (half-frame steps)."""
    import numpy as np

    f = max(2, int(ENERGY_FRAME_S * rate))
    lo, hi = max(0, int((t - SNAP_S) * rate)), min(len(audio), int((t + SNAP_S) * rate))
    starts = range(lo, max(lo + 1, hi - f + 1), f // 2)
    quiet = min(starts, key=lambda s: (float(np.mean(np.square(audio[s:s + f], dtype=np.float64))), abs(s - t * rate)))
    return (quiet + f / 2) / rate


def level_db(audio, rate: int, t: float) -> float:
    """The power of the ENERGY_FRAME_S frame centred on t, in dB re the clip's loudest frame."""
    import numpy as np

    f = max(2, int(ENERGY_FRAME_S * rate))
    x = np.asarray(audio, dtype=np.float64)
    frames = np.mean(np.square(x[:len(x) // f * f].reshape(-1, f)), axis=1)
    at = max(0, int(t * rate) - f // 2)
    return float(10 * np.log10(max(np.mean(np.square(x[at:at + f])), 1e-20) / max(frames.max(), 1e-20)))


def inside_syllable(f, t: float, cut_db: float) -> bool:
    """Whether a cut at t (s) falls between a syllable's consonant and its vowel: a voiced frame within ONSET_S
    after it, and the frames of the BEFORE_S up to it all unvoiced (not periodic) but not quieter than the cut's
    own level cut_db (level_db) — the frication or aspiration of the consonant (f: tasks.qa.voicing.frames of the
    clip).  Mandarin closes a syllable only with a voiced n / ng / r, so unvoiced sound right before a vowel opens
    that vowel's syllable; an English word ending in a voiceless consonant before a vowel-initial word is rejected
    too (a cut lost, none wrong)."""
    from tasks.qa.voicing import VOICED_R

    after = (f.centre_s > t) & (f.centre_s <= t + ONSET_S)
    before = (f.centre_s >= t - BEFORE_S) & (f.centre_s < t)
    if not after.any() or not before.any():
        return False
    return bool(f.voiced[after].any() and (f.periodicity[before] < VOICED_R).all()
                and f.level_db[before].max() >= cut_db)


def faded(audio, rate: int):
    """audio with FADE_S linear fades at both ends."""
    import numpy as np

    a = np.array(audio, dtype=np.float32)
    f = min(int(FADE_S * rate), len(a) // 2)
    if f:
        ramp = np.linspace(0.0, 1.0, f, endpoint=False, dtype=np.float32)
        a[:f] *= ramp
        a[len(a) - f:] *= ramp[::-1]
    return a


def drift_pairs(clips: list[Clip]) -> list[Pair]:
    """same- and other-speaker pairs, unordered; pairs whose identity is uncertain are left out."""
    out = []
    for a, b in itertools.combinations(clips, 2):
        known = a.speaker is not UNKNOWN and b.speaker is not UNKNOWN
        if known and a.speaker == b.speaker:
            out.append(Pair("same", a.name, "", a.language, other=b.name, should_flag=False))
        elif known or _unknown_apart(a, b):
            out.append(Pair("other", a.name, "", a.language, other=b.name))
    return out


def _unknown_apart(a: Clip, b: Clip) -> bool:
    """An unknown THCHS-30 speaker is surely not a speaker of another corpus; it may be any THCHS-30 one."""
    corpus = lambda c: c.name.split("_")[1]                                     # noqa: E731
    return corpus(a) != corpus(b)


def _plain(text: str) -> str:
    return re.sub(r"\W+", "", text).lower()


def noise(colour: str, seconds: float = NOISE_S, rate: int = NOISE_RATE, seed: int = NOISE_SEED):
    """float32 [seconds*rate] seeded noise at NOISE_RMS: white, or brown (integrated, low-frequency heavy)."""
    import numpy as np

    x = np.random.default_rng([seed, ("white", "brown").index(colour)]).standard_normal(int(seconds * rate))
    if colour == "brown":
        x = np.cumsum(x)
        x -= np.convolve(x, np.ones(rate // 50) / (rate // 50), mode="same")   # no drift below ~50 Hz
    return (x * NOISE_RMS / np.sqrt(np.mean(x ** 2))).astype(np.float32)


def audio_of(key: str, clips: dict[str, Clip], cache: dict, spans: dict[str, Span] | None = None,
             stops: dict[str, float] | None = None, truncs: dict[str, float] | None = None):
    """(float32 mono, rate) of a pair's audio key (made once); stops, truncs: where a stopped or truncated take of
    an audio key ends (s from its start)."""
    from tasks.qa.recordings import read_recording

    if key not in cache:
        if key.startswith("noise:"):
            parts = key.split(":")                                             # noise:<colour>[:<seconds>]
            cache[key] = (noise(parts[1], float(parts[2]) if len(parts) > 2 else NOISE_S), NOISE_RATE)
        elif key.endswith("#truncated"):
            whole = key.removesuffix("#truncated")
            a, rate = audio_of(whole, clips, cache, spans)
            cache[key] = (a[:int(truncs[whole] * rate)], rate)
        elif key.endswith("#stopped"):
            whole = key.removesuffix("#stopped")
            a, rate = audio_of(whole, clips, cache, spans)
            cache[key] = (faded(a[:round(stops[whole] * rate)], rate), rate)
        elif spans and key in spans:
            s = spans[key]
            a, rate = audio_of(s.clip, clips, cache, spans)
            cache[key] = (faded(a[round(s.start_s * rate):round(s.end_s * rate)], rate), rate)
        else:
            cache[key] = read_recording(clips[key].path)
    return cache[key]


def rates(rows: list[dict]) -> dict:
    """precision, recall and counts of the flags over rows {should_flag, verdict}."""
    tp = sum(r["should_flag"] and r["verdict"] == "flag" for r in rows)
    fp = sum(not r["should_flag"] and r["verdict"] == "flag" for r in rows)
    pos = sum(r["should_flag"] for r in rows)
    return {"pairs": len(rows), "should_flag": pos, "flagged": tp + fp, "true_flags": tp, "false_flags": fp,
            "inconclusive": sum(r["verdict"] == "inconclusive" for r in rows),
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / pos if pos else None}


def run(asr_model: str = "base", threads: int = 1, speech_dir: Path = SPEECH, clips: int | None = None,
        per_length: int = SPANS_PER_LENGTH, span_clips: int | Collection[str] | None = None) -> dict:
    """Load Whisper (`asr_model`, int8 on `threads` CPU threads) and the speaker encoder, then `measure` (the first
    `clips` clips, all by default)."""
    from tasks.qa.asr import load_transcriber
    from tasks.qa.speaker import load_encoder

    t = time.perf_counter()
    transcriber = load_transcriber(asr_model, "cpu", threads)
    load_s = time.perf_counter() - t
    return {"asr_model": asr_model, "threads": threads, "load_s": round(load_s, 3),
            **measure(corpus_clips(speech_dir)[:clips], transcriber, load_encoder("cpu"), per_length, span_clips)}


def measure(clips: list[Clip], transcriber, encoder, per_length: int = SPANS_PER_LENGTH,
            span_clips: int | Collection[str] | None = None) -> dict:
    """Every pair's verdict (asr_rows, drift_rows), their precision and recall per kind (asr: every length;
    asr_by_length: per length), the spans, and the checks' seconds per audio second.  Each audio is heard twice,
    each time in one transcribe_many: alone, and packed into Whisper's windows in pair order; a pair's verdict is
    the one a render gives (tasks.qa.hearing.judged: the packed transcript where it passes, else the one heard
    alone), its `alone_verdict` the one hearing it alone gives; asr_alone: the rates of those, packed_differs: the
    pairs where the two differ.  Embedded once.  span_clips: short texts and stopped takes of the first N clips
    only, or of the clips of these names."""
    from tasks.qa.asr import pack_windows
    from tasks.qa.hearing import judged, tail_of
    from tasks.qa.options import QAOptions
    from tasks.qa.speaker import similarity
    from tasks.qa.verdict import comparable_count, drift_verdict

    opts = QAOptions()
    by_name, cache = {c.name: c for c in clips}, {}
    t = time.perf_counter()
    lines = {c.name: clip_timeline(c, *audio_of(c.name, by_name, cache), transcriber) for c in clips}
    cut = [(k, c) for k, c in enumerate(clips) if span_clips is None
           or (k < span_clips if isinstance(span_clips, int) else c.name in span_clips)]
    spans = [s for k, c in cut for s in cut_spans(c, lines[c.name], k, per_length)]
    cut_s = time.perf_counter() - t
    by_key = {s.key: s for s in spans}
    cuts = {c.name: lines[c.name].cuts for _, c in cut}
    stops = {**{c.name: cuts[c.name][k] for c in clips if cuts.get(c.name)
                and (k := stop_at(0, max(cuts[c.name]), cuts[c.name])) is not None},
             **{s.key: s.stop_s - s.start_s for s in spans if s.stop_s is not None}}
    truncs = {**{c.name: truncate_at(0.0, lines[c.name].said_s) for c in clips},
              **{s.key: truncate_at(s.start_s, s.said_s) for s in spans}}
    apairs = asr_pairs(clips, spans, stops)
    keys = list(dict.fromkeys((p.audio, p.language) for p in apairs))          # each audio heard once
    heard = [(*audio_of(key, by_name, cache, by_key, stops, truncs), lang) for key, lang in keys]
    audio_s = sum(len(a) / rate for a, rate, _ in heard)
    t = time.perf_counter()
    alone = dict(zip(keys, transcriber.transcribe_many(heard)))
    asr_s = time.perf_counter() - t
    t = time.perf_counter()
    packed = dict(zip(keys, transcriber.transcribe_many(heard, pack=True)))
    packed_s = time.perf_counter() - t
    tails = {key: tail_of(transcriber, a, rate) for key, (a, rate, _) in zip(keys, heard)}
    asr_rows = []
    for p in apairs:
        key = p.audio, p.language
        tr, check = judged(p.text, p.language, packed[key], alone[key], tails[key], opts)
        _, by_itself = judged(p.text, p.language, alone[key], alone[key], tails[key], opts)
        asr_rows.append({"kind": p.kind, "length": p.length, "audio": p.audio, "text": p.text,
                         "transcript": tr.text, "packed": tr.packed, "avg_logprob": round(tr.avg_logprob, 4),
                         "no_speech_prob": round(tr.no_speech_prob, 4), "cer": round(check.cer, 4),
                         "units": len(check.comparison.ref), "heard": len(check.comparison.hyp),
                         "comparable": comparable_count(check.comparison, p.language),
                         "verdict": check.verdict, "reason": check.reason, "should_flag": p.should_flag,
                         "alone_transcript": alone[key].text, "alone_verdict": by_itself.verdict,
                         "alone_reason": by_itself.reason})
    alone_rows = [{**r, "verdict": r["alone_verdict"]} for r in asr_rows]

    t = time.perf_counter()
    emb = {c.name: encoder.embed(*audio_of(c.name, by_name, cache), opts.min_speech_s) for c in clips}
    embed_s = time.perf_counter() - t
    drift_rows = []
    for p in drift_pairs(clips):
        a, b = emb[p.audio].vector, emb[p.other].vector
        sim = None if a is None or b is None else similarity(a, b)
        drift_rows.append({"kind": p.kind, "a": p.audio, "b": p.other, "similarity": sim and round(sim, 4),
                           "verdict": drift_verdict(sim, opts.drift_floor), "should_flag": p.should_flag})
    lengths = [*_by_length(spans), FULL]
    return {"asr_s_per_audio_s": round(asr_s / audio_s, 4), "packed_s_per_audio_s": round(packed_s / audio_s, 4),
            "asr_audio_s": round(audio_s, 2), "packed_windows": len(pack_windows(
                [len(a) / rate for a, rate, _ in heard], [lang for *_, lang in heard])),
            "asr_recordings": len(heard), "cut_s": round(cut_s, 2),
            "embed_s_per_audio_s": round(embed_s / sum(len(cache[c.name][0]) / cache[c.name][1] for c in clips), 4),
            "thresholds": {"max_cer": opts.max_cer, "min_units": opts.min_units, "low_logprob": opts.low_logprob,
                           "drift_floor": opts.drift_floor, "min_speech_s": opts.min_speech_s},
            "asr": {"all": rates(asr_rows), **{k: rates([r for r in asr_rows if r["kind"] == k]) for k in KINDS}},
            "asr_alone": {"all": rates(alone_rows),
                          **{k: rates([r for r in alone_rows if r["kind"] == k]) for k in KINDS}},
            "packed_differs": [r for r in asr_rows if r["verdict"] != r["alone_verdict"]],
            "asr_by_length": {n: {k: rates([r for r in asr_rows if r["kind"] == k and r["length"] == n])
                                  for k in KINDS} for n in lengths},
            "drift": {"all": rates(drift_rows), **{k: rates([r for r in drift_rows if r["kind"] == k])
                                                   for k in ("same", "other")}},
            "spans": [{**dataclasses.asdict(s), "key": s.key} for s in spans],
            "asr_rows": asr_rows, "drift_rows": drift_rows}


def _fmt(r: dict) -> str:
    p = "-" if r["precision"] is None else f"{r['precision']:.3f}"
    c = "-" if r["recall"] is None else f"{r['recall']:.3f}"
    return (f"{r['pairs']:4d} pairs  should flag {r['should_flag']:3d}  flagged {r['flagged']:3d} "
            f"(false {r['false_flags']})  inconclusive {r['inconclusive']:2d}  precision {p}  recall {c}")


def _span_clips(value: str) -> int | set[str]:
    return int(value) if value.isdigit() else {v.strip() for v in value.split(",") if v.strip()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asr-model", default="base")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--corpus", type=Path, default=SPEECH, help="the speech folder (transcripts.tsv + clips)")
    ap.add_argument("--clips", type=int, default=None, help="the first N clips of transcripts.tsv (default: all)")
    ap.add_argument("--span-clips", type=_span_clips, default=None,
                    help="short texts and stopped takes of the first N clips only, or of these clips (file names, "
                         "comma-separated; default: all)")
    ap.add_argument("--spans", type=int, default=SPANS_PER_LENGTH, choices=range(4),
                    help=f"short texts per clip and length, 0-3 (default {SPANS_PER_LENGTH})")
    ap.add_argument("--json", type=Path, default=None, help="write every number and row here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every pair's result")
    a = ap.parse_args(argv)
    if not (a.corpus / "transcripts.tsv").is_file():
        print(f"qa_precision: {a.corpus}: no transcripts.tsv (the speech corpus is not there)", file=sys.stderr)
        return 2
    r = run(a.asr_model, a.threads, a.corpus, a.clips, a.spans, a.span_clips)
    if a.verbose:
        for row in r["asr_rows"]:
            if row["kind"] != "wrong" or row["verdict"] != "flag":
                print(f"  asr {row['length']:4} {row['kind']:9} {row['verdict']:12} cer {row['cer']:5.2f} "
                      f"{row['heard']:2d}/{row['units']:2d} lp {row['avg_logprob']:6.2f} "
                      f"nsp {row['no_speech_prob']:.2f} {row['audio']} | {row['text'][:24]} | {row['transcript'][:30]}")
        for row in r["drift_rows"]:
            print(f"  drift {row['kind']:5} {row['verdict']:12} sim {row['similarity']} {row['a']} ~ {row['b']}")
    print(f"QA precision on {a.corpus} (Whisper {r['asr_model']}, {r['threads']} thread(s), thresholds "
          f"{r['thresholds']})")
    for k in ("all", *KINDS):
        print(f"  ASR   {k:9} {_fmt(r['asr'][k])}")
    for n, kinds in r["asr_by_length"].items():
        for k in KINDS:
            print(f"  ASR {n:>4} {k:9} {_fmt(kinds[k])}")
    for k in ("all", "same", "other"):
        print(f"  drift {k:9} {_fmt(r['drift'][k])}")
    lp = [x["avg_logprob"] for x in r["asr_rows"] if x["kind"] == "right"]
    sims = {k: [x["similarity"] for x in r["drift_rows"] if x["kind"] == k and x["similarity"] is not None]
            for k in ("same", "other")}
    print(f"  right pairs: cer max {max(x['cer'] for x in r['asr_rows'] if x['kind'] == 'right'):.3f}, "
          f"avg_logprob min {min(lp):.3f}; wrong pairs: cer min "
          f"{min(x['cer'] for x in r['asr_rows'] if x['kind'] == 'wrong'):.3f}")
    print(f"  similarity: same-speaker min {min(sims['same']):.3f}, other-speaker max {max(sims['other']):.3f}")
    print(f"  heard alone: ASR   all       {_fmt(r['asr_alone']['all'])}")
    print(f"  packed vs alone: {len(r['packed_differs'])} of {len(r['asr_rows'])} verdicts differ")
    for row in r["packed_differs"]:
        print(f"    {row['length']:4} {row['kind']:9} {row['audio']} | {row['text'][:24]} | packed "
              f"{row['transcript'][:30]!r} {row['verdict']} | alone {row['alone_transcript'][:30]!r} "
              f"{row['alone_verdict']}")
    print(f"  ASR alone {r['asr_s_per_audio_s']:.3f} s per audio s, packed {r['packed_s_per_audio_s']:.3f} "
          f"({r['packed_windows']} windows)")
    print(f"  ASR {r['asr_s_per_audio_s']:.3f} s per audio s ({r['asr_recordings']} recordings, "
          f"{r['asr_audio_s']:.0f} s of audio; model load {r['load_s']:.2f} s; the cuts' word timestamps "
          f"{r['cut_s']:.1f} s); speaker embedding {r['embed_s_per_audio_s']:.3f} s per audio s")
    if a.json:
        a.json.write_text(json.dumps(r, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
