"""What the proof costs: render wall time of one book with `--qa off`, `suspect` and `full`, as ratios, in one run.

    python -m benchmarks.qa_bench --json F               # random-full, 13 segments (~105 s of speech), 2 threads
    python -m benchmarks.qa_bench --repeat 2 --json F    # each mode twice, the rounds in rotated order; medians
    python -m benchmarks.qa_bench --copies 2             # 7 segments
    python -m benchmarks.qa_bench --bad 3 --json F       # 3 sentences' first takes wrong: re-takes, in the running
                                                         # pass (full) against the next pass (full-next)

One process, one model load and one load of the QA models (Whisper base, the speaker encoder) before any timing.
The book is one reader's sentences from the speech corpus (../shared/corpus/speech: THCHS-30's three test clips,
one voice, so the drift gate sees a book's one voice), `--copies` rounds of them, each round's copies another
text (a comma at another place: the same words, so the same recording says them, but another segment text,
rendered and heard on its own), after the title (TITLE: the reader's first words of test_3, up to its longest
pause; the book file is named after it, so the ingest reads it as the chapter's title).  An untimed render (off)
warms the process up; then each
mode renders the book into a fresh output through `flows.pipeline.render` — what `chattts-render render BOOK
--qa MODE` runs: prepare, synthesize (with QA every take is kept and heard beside
synthesis, flagged takes re-taken), package (flac) — with the random-full engine wrapped so that the checks hear
real speech of each segment's duration:

- each request is forced to the length of the recording that says its text (Request.forced_tokens: the fewest GPT
  steps that hold it), so the engine does a real render's work for that much audio; the title gets test_3 cut in
  its longest pause (title_clip);
- each Result's audio is replaced by that recording, padded with silence to the Result's (2T-1)*256 samples,
  before the guard and the checks see it.

So the ASR and the encoder do their real work on real speech that says the segment's text, and a re-take happens
only where the checks would ask for one on a right recording.  With `--bad K`, the first take of K copies (from the
second round on: the first round gives the drift reference) says another of the reader's sentences, which the ASR
flags, and take 2 the right one; a fourth mode, `full-next`, renders with the engine ignoring `more`, so its
re-takes wait for the next pass over the engine (as before re-takes joined the running pass): `full` against it is
what re-taking in the running pass saves.  Printed per mode: wall seconds and the ratio to
off, CPU seconds (the process's user + system: the neighbours on a shared machine do not count) and its ratio,
seconds inside the engine (with proof this includes the engine's wait, once it has run dry, for the takes still
being heard: they may ask for re-takes), inside the ASR (transcribe_many calls) and inside the encoder (embed
calls) — the checks run on the checker thread beside the engine, so they overlap it —, takes rendered, verdicts.
Then ASR and encoder seconds per audio second: during the renders (beside the engine) and alone (each recording
once, after the renders, nothing else running in the process; the ASR also with the recordings packed into
Whisper's windows in one call, as full QA hears them).
"""
from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.clock import EngineClock  # noqa: E402
from benchmarks.engine_vs_upstream import finish  # noqa: E402

MODES = ("off", "suspect", "full")
SPEECH_DIR = ROOT.parent / "shared" / "corpus" / "speech"
FORMATS = ("flac",)
VOICE = "seed:2222"                # the book's voice (the render's default)
# One reader (THCHS-30's test clips: speaker similarity 0.92-0.94 between them, another reader's <= 0.76), so the
# drift gate sees one voice, as in a real book: a corpus of several readers would be re-taken for its voices.
READER = ("zh_thchs30_test_1.wav", "zh_thchs30_test_2.wav", "zh_thchs30_test_3.wav")
COPIES = 4                         # copies of the reader's sentences (default book: 12 of them + the title)
TITLE = "飞机穿过云层眼下一片云海"   # the book's title (its file name: the TXT ingest reads it first) and the reader's
TITLE_CLIP = "zh_thchs30_test_3.wav"  # words in TITLE_CLIP up to its longest pause (0.36 s), so the title is said too
PAUSE_DB = -30.0                   # dB re the loudest 10 ms frame: a frame this quiet is a pause
ALONE_REPS = 3                     # passes over the recordings when the checks are timed alone (the best counts)


def variant(text: str, k: int, copies: int) -> str:
    """Copy k of a sentence: the first as it is, the others with a comma at their own place (the same words, so
    the same recording says them, but another segment text: rendered, and heard, on its own)."""
    if k == 0:
        return text
    at = max(1, min(len(text) - 1, k * len(text) // copies))
    return f"{text[:at]}，{text[at:]}"


def write_reader_book(folder: Path, clips: dict, copies: int) -> Path:
    """A one-chapter TXT book, FOLDER/TITLE.txt (the ingest takes its title from the file's name and reads it as the
    first segment): `copies` rounds of the reader's sentences, one paragraph each (variant: each round's copy
    another text)."""
    lines = []
    for k in range(copies):
        for name in READER:                        # a blank line after each: every paragraph is its own segment
            lines += [f"\u3000\u3000{variant(clips[name].text, k, copies)}。", ""]
    path = Path(folder) / f"{TITLE}.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def reader_script(book_dir: Path, clips: dict) -> dict:
    """The manifest's texts -> the recording that says each (tests/speech_engine.book_script); the title gets
    TITLE_CLIP's words before its longest pause (title_clip)."""
    from tests.speech_engine import book_script

    def title(row: dict):
        if row["source_text"].strip() != TITLE:
            raise ValueError(f"{book_dir}: segment {row['chapter']}.{row['segment']} ({row['source_text']!r}) is "
                             "neither the title nor one of the reader's sentences")
        return title_clip(clips[TITLE_CLIP])

    return book_script(book_dir, {name: clips[name] for name in READER}, fill=title)


def title_clip(clip):
    """The clip up to the middle of its longest pause (a run of 10 ms frames PAUSE_DB below its loudest, not at
    either end): TITLE, as the reader says it."""
    import numpy as np

    from engine.units import SAMPLE_RATE
    from tests.speech_engine import Clip

    f = SAMPLE_RATE // 100
    frames = np.mean(np.square(clip.audio[:len(clip.audio) // f * f].reshape(-1, f), dtype=np.float64), axis=1)
    quiet = 10 * np.log10(np.maximum(frames, 1e-20) / frames.max()) < PAUSE_DB
    runs, start = [], None                      # (length, first frame) of each quiet run inside the speech
    speech = np.flatnonzero(~quiet)
    for i in range(speech[0], speech[-1] + 1):
        if quiet[i] and start is None:
            start = i
        elif not quiet[i] and start is not None:
            runs.append((i - start, start))
            start = None
    length, first = max(runs)
    return Clip(f"{clip.name}[:pause]", clip.audio[:(first + length // 2) * f].copy(), TITLE, clip.speaker)


def with_bad_takes(script: dict, clips: dict, bad: int) -> dict:
    """The script with `bad` sentences' first take saying another of the reader's sentences (take 2: the right
    one): the first `bad` after the first round in reading order (the first round gives the drift reference)."""
    reader = [clips[name] for name in READER]
    chosen = [t for t, c in script.items() if c.name in READER][len(READER):][:bad]   # the manifest's order
    if len(chosen) < bad:
        raise ValueError(f"--bad {bad}: the book has {len(chosen)} sentences after the first round (raise --copies)")
    out = dict(script)
    for text in chosen:
        right = script[text]
        out[text] = [next(c for c in reader if c.name != right.name), right]
    return out


class Speaking:
    """An engine whose results say the script's recordings: forced to each recording's length, its audio replaced
    by it (see the module docstring).  Everything else is the wrapped engine's."""

    def __init__(self, engine, script: dict):
        self._engine, self.script = engine, script
        self.takes = 0                                   # requests rendered

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def clip(self, req):
        """The recording of this request: its text's, or its take's where the script lists one per take."""
        from tests.speech_engine import SpeechEngine

        got = self.script[req.text]
        if not isinstance(got, list):
            return got
        return got[min(SpeechEngine.take_of(req) or len(got), len(got)) - 1]

    def synthesize(self, requests, progress=None, more=None):
        from engine.api import Result
        from tests.speech_engine import padded

        speech: dict[str, tuple] = {}                    # key -> (audio, T)

        def forced(reqs) -> list:
            reqs = list(reqs)
            missing = [r for r in reqs if r.text not in self.script]
            if missing:
                raise ValueError(f"request {missing[0].key}: no recording for {missing[0].text!r}")
            speech.update({r.key: padded(self.clip(r).audio) for r in reqs})
            self.takes += len(reqs)
            return [dataclasses.replace(r, forced_tokens=speech[r.key][1]) for r in reqs]

        late = (lambda idle: forced(more(idle))) if more is not None else None
        for res in self._engine.synthesize(forced(requests), progress, more=late):
            audio, tokens = speech[res.key]
            if len(res.audio) != len(audio) or res.tokens != tokens:
                raise AssertionError(f"{res.key}: the engine made {len(res.audio)} samples, forced to {len(audio)}")
            yield Result(key=res.key, audio=audio, tokens=res.tokens)


class NextPass:
    """The engine as before re-takes joined its running pass: `more` is not asked, so a proof render's re-takes
    wait for its next pass over the engine (tasks/synthesize/proof.py collects them after the pass)."""

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def synthesize(self, requests, progress=None, more=None):
        return self._engine.synthesize(requests, progress)


class Clock:
    """Seconds spent inside a method of a class (every instance, any thread), the calls, and the audio seconds
    they were given (`audio_s(args)`), while the context is open."""

    def __init__(self, cls, name: str, audio_s):
        self.cls, self.name, self.audio_s = cls, name, audio_s
        self.seconds = self.audio = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def __enter__(self):
        self._inner = inner = getattr(self.cls, self.name)
        clock = self

        def timed(obj, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(obj, *args, **kwargs)
            finally:
                with clock._lock:
                    clock.seconds += time.perf_counter() - t0
                    clock.calls += 1
                    clock.audio += clock.audio_s(args)

        setattr(self.cls, self.name, timed)
        return self

    def __exit__(self, *exc):
        setattr(self.cls, self.name, self._inner)

    def reset(self) -> None:
        self.seconds = self.audio = 0.0
        self.calls = 0


def _one_s(args) -> float:                  # embed(audio, sample_rate)
    return len(args[0]) / args[1]


def _many_s(args) -> float:                 # transcribe_many([(audio, sample_rate, language), ...])
    return sum(len(a) / rate for a, rate, _ in args[0])


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def render_once(opts, clocks: dict) -> dict:
    """flows.pipeline.render of these options, timed: wall, CPU, engine, ASR and encoder seconds."""
    from flows.pipeline import render

    clocks["engine"].seconds = 0.0
    for name in ("transcribe", "embed"):
        clocks[name].reset()
    t0, c0 = time.perf_counter(), cpu_s()
    counts = render(opts)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    asr = (clocks["transcribe"],)
    return {"wall_s": wall, "cpu_s": cpu, "engine_s": clocks["engine"].seconds,
            "asr_s": sum(c.seconds for c in asr), "asr_calls": sum(c.calls for c in asr),
            "asr_audio_s": sum(c.audio for c in asr), "encoder_s": clocks["embed"].seconds,
            "encoder_calls": clocks["embed"].calls, "encoder_audio_s": clocks["embed"].audio,
            "counts": {k: v for k, v in counts.items() if k != "book_dir"}}


def verdicts(book_dir: Path) -> dict:
    """The book's rows by their kept take's verdict ("" without QA) and take number."""
    import manifests

    rows = manifests.load(book_dir).to_pylist()
    return {"verdicts": dict(Counter(r["qa"] or "-" for r in rows)),
            "kept_takes": dict(Counter(str(r["take"]) for r in rows)), "segments": len(rows),
            "audio_s": round(sum(r["duration_s"] for r in rows), 2)}


def alone(clips, checker, reps: int = ALONE_REPS) -> dict:
    """ASR and encoder seconds per audio second with nothing else running in the process: each recording once per
    pass, the best of `reps` passes (after a warm-up call of each on the first recording)."""
    from engine.units import SAMPLE_RATE

    first = clips[0].audio
    checker.transcriber.transcribe(first, SAMPLE_RATE, "zh")
    checker.encoder.embed(first, SAMPLE_RATE)
    audio_s = sum(c.seconds for c in clips)

    def best(fn) -> float:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for c in clips:
                fn(c.audio)
            times.append(time.perf_counter() - t0)
        return min(times)

    asr = best(lambda a: checker.transcriber.transcribe(a, SAMPLE_RATE, "zh"))
    enc = best(lambda a: checker.encoder.embed(a, SAMPLE_RATE))
    together = [(c.audio, SAMPLE_RATE, "zh") for c in clips]
    packed = min(_timed(lambda: checker.transcriber.transcribe_many(together, pack=True)) for _ in range(reps))
    return {"audio_s": round(audio_s, 2), "reps": reps, "asr_s": round(asr, 2), "encoder_s": round(enc, 3),
            "asr_s_per_audio_s": round(asr / audio_s, 4), "encoder_s_per_audio_s": round(enc / audio_s, 4),
            "asr_packed_s": round(packed, 2), "asr_packed_s_per_audio_s": round(packed / audio_s, 4)}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def qa_fraction(engine, *, segments: int, model: str, device: str = "cpu", threads: int | None = None,
                batch: int | None = None, asr_model: str = "base", speech: Path = SPEECH_DIR, repeat: int = 1,
                say=print) -> dict:
    """The QA's share of a render, for benchmarks/book_throughput.py --qa full: the reader's book (write_reader_book,
    about `segments` segments) rendered by `engine` (loaded: it is wrapped, Speaking, never loaded again) with
    `--qa off` and `--qa full` in this process, the QA models loaded and a warm-up render done first (untimed),
    `repeat` rounds (off then full, then full then off, ...).  qa_fraction = full's wall / off's wall - 1, the best
    run of each (a neighbour on a shared machine only ever adds time); re-takes, if the checks ask for any, count."""
    from flows.options import options_from_params
    from flows.pipeline import render
    from tasks import stages
    from tasks.qa.asr import Transcriber
    from tasks.qa.checker import checker_for
    from tasks.qa.speaker import SpeakerEncoder
    from tests.speech_engine import corpus_clips

    clips = corpus_clips(speech)
    copies = max(1, -(-(segments - 1) // len(READER)))          # the title is a segment too
    stages_get = stages.get_engine
    with tempfile.TemporaryDirectory(prefix="qa-fraction-") as tmp:
        book = write_reader_book(Path(tmp), clips, copies)

        def options(mode: str, run):
            return options_from_params(str(book), out=str(Path(tmp) / f"out-{mode}-{run}"), model=model,
                                       device=device, voice=VOICE, formats=list(FORMATS), max_batch=batch,
                                       threads=threads, qa=mode, asr_model=asr_model)

        speaking = Speaking(engine, {})
        stages.get_engine = lambda opts: speaking
        try:
            t0 = time.perf_counter()
            checker_for(options("full", 0).qa).load()                       # the QA models, untimed
            qa_load_s = time.perf_counter() - t0
            speaking.script = reader_script(stages.prepare(options("off", "warmup")), clips)
            t0 = time.perf_counter()
            render(options("off", "warmup"))                                 # a warm-up render, untimed
            warmup_s = time.perf_counter() - t0
            speech_s = sum(c.seconds for c in speaking.script.values())
            say(f"QA share: the reader's book, {len(speaking.script)} segments, {speech_s:.1f} s of speech; QA models "
                f"({asr_model} on {device}) loaded in {qa_load_s:.1f} s, warm-up render (off) {warmup_s:.1f} s",
                flush=True)
            runs: dict[str, list[dict]] = {"off": [], "full": []}
            with (EngineClock() as eclock, Clock(Transcriber, "transcribe_many", _many_s) as t1,
                  Clock(SpeakerEncoder, "embed", _one_s) as e):
                for k in range(repeat):
                    for mode in ("off", "full") if k % 2 == 0 else ("full", "off"):
                        takes0 = speaking.takes
                        opts = options(mode, k + 1)
                        r = render_once(opts, {"engine": eclock, "transcribe": t1, "embed": e})
                        r.update(verdicts(opts.book_dir), takes=speaking.takes - takes0)
                        runs[mode].append(_rounded(r))
                        say(f"  --qa {mode:4s} run {k + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU; engine "
                            f"{r['engine_s']:.1f} s, ASR {r['asr_s']:.1f} s ({r['asr_calls']} calls), encoder "
                            f"{r['encoder_s']:.1f} s; {r['takes']} takes, verdicts {r['verdicts']}", flush=True)
        finally:
            stages.get_engine = stages_get
    best = {m: min(r["wall_s"] for r in rs) for m, rs in runs.items()}
    return {"segments": len(speaking.script), "speech_s": round(speech_s, 2), "asr_model": asr_model,
            "device": device, "repeat": repeat, "best_wall_s": best, "runs": runs,
            "qa_fraction": round(best["full"] / best["off"] - 1, 4),
            "cpu_fraction": round(min(r["cpu_s"] for r in runs["full"]) / min(r["cpu_s"] for r in runs["off"]) - 1,
                                  4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--threads", type=int, default=2, help="the engine's torch threads (the ASR runs on 1)")
    ap.add_argument("--batch", type=int, default=None, help="max_batch (default: the engine's default)")
    ap.add_argument("--copies", type=int, default=COPIES, help=f"rounds of the reader's 3 sentences ({COPIES})")
    ap.add_argument("--repeat", type=int, default=1,
                    help="render each mode this many times, rounds in rotated order (off-suspect-full, suspect-full-"
                         "off, ...); medians")
    ap.add_argument("--bad", type=int, default=0,
                    help="copies whose first take says another sentence (re-taken); adds the mode full-next")
    ap.add_argument("--asr-model", default="base")
    ap.add_argument("--speech", type=Path, default=SPEECH_DIR, help="the speech corpus folder")
    ap.add_argument("--alone-reps", type=int, default=ALONE_REPS,
                    help=f"passes over the recordings when the checks are timed alone, the best counts ({ALONE_REPS})")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not (args.speech / "transcripts.tsv").is_file():
        print(f"{args.speech}: no transcripts.tsv (pass --speech, the corpus's speech folder)", file=sys.stderr)
        return 2
    for flag, value, least in (("--repeat", args.repeat, 1), ("--copies", args.copies, 1), ("--bad", args.bad, 0),
                               ("--alone-reps", args.alone_reps, 1)):
        if value < least:
            print(f"{flag} {value}: must be at least {least}", file=sys.stderr)
            return 2
    if args.bad > (args.copies - 1) * len(READER):
        print(f"--bad {args.bad}: the book has {(args.copies - 1) * len(READER)} copies after the first round "
              "(raise --copies)", file=sys.stderr)
        return 2
    modes = MODES + (("full-next",) if args.bad else ())
    start = time.perf_counter()

    import torch

    from flows.options import options_from_params
    from flows.pipeline import render
    from tasks import stages
    from tasks.qa.asr import Transcriber
    from tasks.qa.checker import checker_for
    from tasks.qa.speaker import SpeakerEncoder
    from tests.speech_engine import corpus_clips

    torch.set_num_threads(args.threads)
    clips = corpus_clips(args.speech)
    with tempfile.TemporaryDirectory(prefix="qa-bench-") as tmp:
        book = write_reader_book(Path(tmp), clips, args.copies)

        def options(mode: str, run: int):
            return options_from_params(str(book), out=str(Path(tmp) / f"out-{mode}-{run}"), model=args.model,
                                       voice=VOICE, formats=list(FORMATS), max_batch=args.batch,
                                       threads=args.threads, qa=mode.removesuffix("-next"),
                                       asr_model=args.asr_model)

        stages_get = stages.get_engine
        t0 = time.perf_counter()
        engine = stages.get_engine(options("off", 0).engine)                # the model, loaded once, untimed
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for mode in MODES[1:]:                                              # the QA models, loaded once, untimed
            checker_for(options(mode, 0).qa).load()
        qa_load_s = time.perf_counter() - t0
        probe = stages.prepare(options("off", "warmup"))                    # the plan: which recording says what
        speaking = Speaking(engine, with_bad_takes(reader_script(probe, clips), clips, args.bad))
        engines = {m: NextPass(speaking) if m == "full-next" else speaking for m in modes}
        t0 = time.perf_counter()
        stages.get_engine = lambda opts: speaking
        try:                                    # a warm-up render, untimed: the first render of a process is slower
            render(options("off", "warmup"))
        finally:
            stages.get_engine = stages_get
        warmup_s = time.perf_counter() - t0
        speech_s = sum((c[-1] if isinstance(c, list) else c).seconds for c in speaking.script.values())   # kept
        print(f"engine {engine.version} loaded in {load_s:.1f} s; QA models ({args.asr_model}, speaker encoder) "
              f"in {qa_load_s:.1f} s; batch {engine.opts.batch}, {args.threads} threads; book: "
              f"{len(speaking.script)} segments, {speech_s:.1f} s of speech ({', '.join(READER)} x {args.copies} "
              f"and the title); {args.bad} with a wrong first take", flush=True)
        print(f"warm-up render (off, untimed): {warmup_s:.1f} s", flush=True)

        runs: dict[str, list[dict]] = {m: [] for m in modes}
        try:
            with (EngineClock() as eclock, Clock(Transcriber, "transcribe_many", _many_s) as t1,
                  Clock(SpeakerEncoder, "embed", _one_s) as e):
                clocks = {"engine": eclock, "transcribe": t1, "embed": e}
                for k in range(args.repeat):
                    for mode in modes[k % len(modes):] + modes[:k % len(modes)]:   # each round starts elsewhere
                        takes0 = speaking.takes
                        opts = options(mode, k + 1)
                        stages.get_engine = lambda opts, e=engines[mode]: e
                        r = render_once(opts, clocks)
                        r.update(verdicts(opts.book_dir), takes=speaking.takes - takes0)
                        runs[mode].append(r)
                        print(f"  {mode:8s} run {k + 1}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU; engine "
                              f"{r['engine_s']:.1f} s, ASR {r['asr_s']:.1f} s ({r['asr_calls']} calls, "
                              f"{r['asr_audio_s']:.1f} s audio), encoder {r['encoder_s']:.1f} s "
                              f"({r['encoder_calls']} calls); {r['takes']} takes, verdicts {r['verdicts']}",
                              flush=True)
        finally:
            stages.get_engine = stages_get
        solo = alone([clips[name] for name in READER], checker_for(options("full", 0).qa), args.alone_reps)

    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "engine_s", "asr_s",
                                                                  "asr_audio_s", "encoder_s", "encoder_audio_s")}
           for m, rs in runs.items()}
    best = {m: min(r["wall_s"] for r in rs) for m, rs in runs.items()}
    result = {"model": args.model, "engine": engine.version, "threads": args.threads, "batch": engine.opts.batch,
              "asr_model": args.asr_model, "repeat": args.repeat, "copies": args.copies,
              "segments": len(speaking.script), "speech_s": round(speech_s, 2),
              "engine_load_s": round(load_s, 1), "qa_load_s": round(qa_load_s, 1), "warmup_s": round(warmup_s, 1),
              "bad": args.bad,
              "modes": {m: {**{k: round(v, 2) for k, v in med[m].items()}, "runs": [_rounded(r) for r in runs[m]]}
                        for m in modes},
              "wall_ratio": {m: round(med[m]["wall_s"] / med["off"]["wall_s"], 4) for m in modes},
              # the best run of each mode: a neighbour on a shared box only ever adds time
              "best_wall_s": {m: round(best[m], 2) for m in modes},
              "best_wall_ratio": {m: round(best[m] / best["off"], 4) for m in modes},
              "cpu_ratio": {m: round(med[m]["cpu_s"] / med["off"]["cpu_s"], 4) for m in modes},
              "in_render": {m: {"asr_s_per_audio_s": _per(med[m]["asr_s"], med[m]["asr_audio_s"]),
                                "encoder_s_per_audio_s": _per(med[m]["encoder_s"], med[m]["encoder_audio_s"])}
                            for m in modes[1:]},
              "alone": solo}
    for m in modes:
        print(f"{m:9s} wall {med[m]['wall_s']:.1f} s (x{result['wall_ratio'][m]:.3f} of off), CPU "
              f"{med[m]['cpu_s']:.1f} s (x{result['cpu_ratio'][m]:.3f}); best of {args.repeat}: {best[m]:.1f} s "
              f"(x{result['best_wall_ratio'][m]:.3f})")
    for m in modes[1:]:
        p = result["in_render"][m]
        print(f"{m:9s} in the render: ASR {p['asr_s_per_audio_s']} s per audio s, encoder "
              f"{p['encoder_s_per_audio_s']} s per audio s (beside the engine)")
    print(f"alone: ASR {solo['asr_s_per_audio_s']:.4f} s per audio s, encoder {solo['encoder_s_per_audio_s']:.4f} s "
          f"per audio s ({solo['audio_s']:.1f} s of speech, each recording once, best of {solo['reps']}); ASR packed "
          f"into Whisper's windows {solo['asr_packed_s_per_audio_s']:.4f} s per audio s "
          f"(x{solo['asr_packed_s'] / max(solo['asr_s'], 1e-9):.2f} of one by one)")
    if args.bad:
        result["running_over_next_pass"] = {"wall": round(med["full"]["wall_s"] / med["full-next"]["wall_s"], 4),
                                            "best_wall": round(best["full"] / best["full-next"], 4)}
        print(f"re-takes in the running pass (full) against the next pass (full-next): wall "
              f"x{result['running_over_next_pass']['wall']:.3f}, best of {args.repeat} "
              f"x{result['running_over_next_pass']['best_wall']:.3f}")
    return finish(result, start, args.json, print)


def _per(seconds: float, audio_s: float) -> float | None:
    return round(seconds / audio_s, 4) if audio_s else None


def _rounded(r: dict) -> dict:
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}


if __name__ == "__main__":
    sys.exit(main())
