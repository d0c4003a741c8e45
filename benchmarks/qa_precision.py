"""Precision and recall of the QA flags on every (recording, text) pair the real-speech corpus gives, the ASR
check and the drift gate separately, and what the checks cost (ASR and speaker-embedding seconds per audio
second).

    python -m benchmarks.qa_precision                       # Whisper base, one thread
    python -m benchmarks.qa_precision --asr-model small --threads 2 --json out.json -v

Pairs (built by asr_pairs / drift_pairs from ../shared/corpus/speech/transcripts.tsv and the file names):
    right       each clip with its own transcript                                   -> must pass
    wrong       each clip with another clip's transcript, same language (not the
                same sentence: D4_751 and its noise copy share one)                  -> must be flagged
    truncated   the first TRUNCATE_FRACTION of each clip with its full transcript   -> must be flagged
    noise       NOISE_S of seeded noise (white, and brown: speech-band heavy) with
                each transcript of a language                                        -> must be flagged
    same        two clips of one speaker (AISHELL-1 S0764 W0121/W0122; THCHS-30 D4_751 and its 0 dB-noise copy)
                                                                                     -> must pass the drift gate
    other       two clips of different speakers; the THCHS-30 test_* clips, whose speaker is unknown, are left
                out of both sets with each other and with D4 (MANIFEST.md)          -> must be flagged
The ASR check's verdicts count "flag" only: an inconclusive wrong pair is a miss (recall), an inconclusive right
pair is not a false flag (precision) but is printed too.  The drift gate here is a single pair, so its cutoff is
the floor alone (QAOptions.drift_floor), as `check --voice-ref` uses it."""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
SPEECH = CORPUS / "speech"
TRUNCATE_FRACTION = 0.45          # of a clip's samples kept for a truncation
NOISE_S = 5.0                     # s of noise per noise clip
NOISE_RATE = 16_000               # Hz
NOISE_SEED = 20240                # the noise clips' generator seed
NOISE_RMS = 0.05                  # linear RMS of the noise (about -26 dBFS)
UNKNOWN = None                    # a clip whose speaker the corpus does not name

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
class Pair:
    kind: str                     # right | wrong | truncated | noise | same | other
    audio: str                    # the audio's key: a clip name, "<name>#truncated", "noise:<colour>"
    text: str                     # the intended text (ASR pairs), "" for drift pairs
    language: str
    other: str = ""               # drift pairs: the second clip's name
    should_flag: bool = True


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


def asr_pairs(clips: list[Clip]) -> list[Pair]:
    """right, wrong, truncated and noise pairs (see the module doc)."""
    out = [Pair("right", c.name, c.text, c.language, should_flag=False) for c in clips]
    out += [Pair("wrong", a.name, b.text, a.language) for a, b in itertools.permutations(clips, 2)
            if a.language == b.language and _plain(a.text) != _plain(b.text)]
    out += [Pair("truncated", f"{c.name}#truncated", c.text, c.language) for c in clips]
    out += [Pair("noise", f"noise:{colour}", c.text, c.language) for colour in ("white", "brown") for c in clips]
    return out


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


def audio_of(key: str, clips: dict[str, Clip], cache: dict):
    """(float32 mono, rate) of a pair's audio key (read once)."""
    from tasks.qa.recordings import read_recording

    if key not in cache:
        if key.startswith("noise:"):
            cache[key] = (noise(key.split(":", 1)[1]), NOISE_RATE)
        elif key.endswith("#truncated"):
            a, rate = audio_of(key.removesuffix("#truncated"), clips, cache)
            cache[key] = (a[:int(len(a) * TRUNCATE_FRACTION)], rate)
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


def run(asr_model: str = "base", threads: int = 1, speech_dir: Path = SPEECH) -> dict:
    """Load Whisper (`asr_model`, int8 on `threads` CPU threads) and the speaker encoder, then `measure`."""
    from tasks.qa.asr import load_transcriber
    from tasks.qa.speaker import load_encoder

    t = time.perf_counter()
    transcriber = load_transcriber(asr_model, "cpu", threads)
    load_s = time.perf_counter() - t
    return {"asr_model": asr_model, "threads": threads, "load_s": round(load_s, 3),
            **measure(corpus_clips(speech_dir), transcriber, load_encoder("cpu"))}


def measure(clips: list[Clip], transcriber, encoder) -> dict:
    """Every pair's verdict (asr_rows, drift_rows), their precision and recall per kind, and the checks' seconds
    per audio second; each audio is heard and embedded once."""
    from tasks.qa.options import QAOptions
    from tasks.qa.speaker import similarity
    from tasks.qa.verdict import asr_verdict, drift_verdict

    opts = QAOptions()
    by_name, cache = {c.name: c for c in clips}, {}
    apairs = asr_pairs(clips)
    keys = list(dict.fromkeys((p.audio, p.language) for p in apairs))          # each audio heard once
    transcripts, asr_s, audio_s = {}, 0.0, 0.0
    for key, lang in keys:
        a, rate = audio_of(key, by_name, cache)
        t = time.perf_counter()
        transcripts[key, lang] = transcriber.transcribe(a, rate, lang)
        asr_s += time.perf_counter() - t
        audio_s += len(a) / rate
    asr_rows = []
    for p in apairs:
        tr = transcripts[p.audio, p.language]
        check = asr_verdict(p.text, tr, p.language, opts)
        asr_rows.append({"kind": p.kind, "audio": p.audio, "text": p.text, "transcript": tr.text,
                         "avg_logprob": round(tr.avg_logprob, 4), "no_speech_prob": round(tr.no_speech_prob, 4),
                         "cer": round(check.cer, 4), "verdict": check.verdict, "reason": check.reason,
                         "should_flag": p.should_flag})

    t = time.perf_counter()
    emb = {c.name: encoder.embed(*audio_of(c.name, by_name, cache), opts.min_speech_s) for c in clips}
    embed_s = time.perf_counter() - t
    drift_rows = []
    for p in drift_pairs(clips):
        a, b = emb[p.audio].vector, emb[p.other].vector
        sim = None if a is None or b is None else similarity(a, b)
        drift_rows.append({"kind": p.kind, "a": p.audio, "b": p.other, "similarity": sim and round(sim, 4),
                           "verdict": drift_verdict(sim, opts.drift_floor), "should_flag": p.should_flag})
    return {"asr_s_per_audio_s": round(asr_s / audio_s, 4), "asr_audio_s": round(audio_s, 2),
            "embed_s_per_audio_s": round(embed_s / sum(len(cache[c.name][0]) / cache[c.name][1] for c in clips), 4),
            "thresholds": {"max_cer": opts.max_cer, "min_units": opts.min_units, "low_logprob": opts.low_logprob,
                           "drift_floor": opts.drift_floor, "min_speech_s": opts.min_speech_s},
            "asr": {"all": rates(asr_rows), **{k: rates([r for r in asr_rows if r["kind"] == k])
                                               for k in ("right", "wrong", "truncated", "noise")}},
            "drift": {"all": rates(drift_rows), **{k: rates([r for r in drift_rows if r["kind"] == k])
                                                   for k in ("same", "other")}},
            "asr_rows": asr_rows, "drift_rows": drift_rows}


def _fmt(r: dict) -> str:
    p = "-" if r["precision"] is None else f"{r['precision']:.3f}"
    c = "-" if r["recall"] is None else f"{r['recall']:.3f}"
    return (f"{r['pairs']:4d} pairs  should flag {r['should_flag']:3d}  flagged {r['flagged']:3d} "
            f"(false {r['false_flags']})  inconclusive {r['inconclusive']:2d}  precision {p}  recall {c}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asr-model", default="base")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--corpus", type=Path, default=SPEECH, help="the speech folder (transcripts.tsv + clips)")
    ap.add_argument("--json", type=Path, default=None, help="write every number and row here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every pair's result")
    a = ap.parse_args(argv)
    if not (a.corpus / "transcripts.tsv").is_file():
        print(f"qa_precision: {a.corpus}: no transcripts.tsv (the speech corpus is not there)", file=sys.stderr)
        return 2
    r = run(a.asr_model, a.threads, a.corpus)
    if a.verbose:
        for row in r["asr_rows"]:
            print(f"  asr {row['kind']:9} {row['verdict']:12} cer {row['cer']:5.2f} lp {row['avg_logprob']:6.2f} "
                  f"nsp {row['no_speech_prob']:.2f} {row['audio']} | {row['transcript'][:40]}")
        for row in r["drift_rows"]:
            print(f"  drift {row['kind']:5} {row['verdict']:12} sim {row['similarity']} {row['a']} ~ {row['b']}")
    print(f"QA precision on {a.corpus} (Whisper {r['asr_model']}, {r['threads']} thread(s), thresholds "
          f"{r['thresholds']})")
    for k in ("all", "right", "wrong", "truncated", "noise"):
        print(f"  ASR   {k:9} {_fmt(r['asr'][k])}")
    for k in ("all", "same", "other"):
        print(f"  drift {k:9} {_fmt(r['drift'][k])}")
    lp = [x["avg_logprob"] for x in r["asr_rows"] if x["kind"] == "right"]
    sims = {k: [x["similarity"] for x in r["drift_rows"] if x["kind"] == k and x["similarity"] is not None]
            for k in ("same", "other")}
    print(f"  right pairs: cer max {max(x['cer'] for x in r['asr_rows'] if x['kind'] == 'right'):.3f}, "
          f"avg_logprob min {min(lp):.3f}; wrong pairs: cer min "
          f"{min(x['cer'] for x in r['asr_rows'] if x['kind'] == 'wrong'):.3f}")
    print(f"  similarity: same-speaker min {min(sims['same']):.3f}, other-speaker max {max(sims['other']):.3f}")
    print(f"  ASR {r['asr_s_per_audio_s']:.3f} s per audio s ({r['asr_audio_s']:.0f} s of audio; model load "
          f"{r['load_s']:.2f} s); speaker embedding {r['embed_s_per_audio_s']:.3f} s per audio s")
    if a.json:
        a.json.write_text(json.dumps(r, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
