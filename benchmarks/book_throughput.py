"""The whole render against the engine alone: how much of a book's wall time is spent outside the engine.

    python -m benchmarks.book_throughput --json F                 # random-full, 3 batches of the default batch
    python -m benchmarks.book_throughput --batch 8 --segments 24 --json F

One process, one model load (before any timing).  The book is the first `--segments` segments of 吶喊 (the same
front-end cut as benchmarks/engine_vs_upstream.py), written as a one-chapter TXT book into a temp dir, so the
render goes through every stage for real: `flows.pipeline.render` (ingest → plan → synthesize with the quality
guard, FLAC per segment, manifest commits → assemble → package flac + m4b → the book page).  Then the engine alone
renders the same manifest rows (same text, voice, seed: the render's first attempt) with `Engine.synthesize`.

    pipeline_overhead = 1 - engine_alone_wall / render_wall         (the share of the render spent outside it)

split by stage: prepare (ingest, normalize, segment, plan), synthesize outside the engine (segment encode + write,
manifest commits, guard), the engine inside the render (time spent in Engine.synthesize's iterator), package.
limit_fraction = the engine's audio seconds per wall second ÷ the roofline at the best float dtype this CPU has
(benchmarks/limits.py: min of compute and the read bandwidth at the batch, the weights' and the KV cache's bytes
counted); limit_fraction_weights_only ÷ the same without the KV cache; path_limit_fraction(_weights_only) ÷ its
own path's.  Then a per-step profile at the batch (limits.step_profile: GEMM, attention, sampling, other, and what
the step's GEMMs and attention achieved: the reason a fraction is what it is; `--no-profile` skips it).
With `--dtype auto` the engine alone also renders the same rows on `--baseline` (default BASELINE_PATH, fp32 AVX2:
the step this engine was tuned on before the paths; fp32-avx512 on an AVX-512 or AMX CPU), in the same run:
vs_<baseline> (vs_fp32_avx2) = auto's throughput ÷ its.  Where the engine vocodes in bf16 (a bf16 path:
engine/vocoder.py) the engine alone renders the same rows once more with Decoder + Vocos in fp32, same run:
vs_fp32_vocoder = its throughput ÷ that one's (the render-level gain of the bf16 vocoder).

With `--listen` ("listen while it renders", the studio's question), the same segments cut into chapters of
`--chapter-segments` (default 8: 12 chapters of the 96-segment book, each with its heading) are rendered twice by
the same loaded engine, with `--schedule length` (the default) and `--schedule chapters`, fresh each time:

    first_chapter_share = (when chapter 1's last row is committed: playable in the studio) / render wall
    chapter_order_cost  = 1 - chapters' audio-s per wall-s / length's                   (its throughput cost)

A row takes as many decode steps as its audio is long whatever the schedule, so chapter 1 cannot be whole before
its longest row is: first_chapter_share >= (that row's steps) / (the render's steps), about batch / segments for
rows of equal length (1/3 at the default batch of 32 on 96 segments; a real book is many batches long).
`--listen-only` skips the rest; `--listen-repeat K` alternates the two K times (medians).

With `--refine`, the render runs upstream's refine-text pass first (tasks/synthesize/render.refine_pending:
Engine.refine, batched) at its default levels, and its share is measured in the same render: refine_s (the wall
time inside Engine.refine), refine_share = refine_s / render wall, refine_vs_speech = refine_s / the engine's
speech time in the render.

With `--qa full`, then the QA's share (benchmarks/qa_bench.qa_fraction): a book the checks can hear (the speech
corpus reader's sentences, about as many segments, the engine's audio replaced by the recordings that say them)
rendered with `--qa off` and `--qa full` by the same loaded engine, same run; qa_fraction = full's wall / off's - 1.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.clock import EngineClock  # noqa: E402
from benchmarks.engine_vs_upstream import CORPUS_FILE, finish, workload  # noqa: E402

BATCHES = 3                        # default segments: this many batches' worth (refill in steady state)
BASELINE_PATH = "fp32-avx2"        # --dtype auto's baseline in the same run (engine/cpupath.py's name)
FORMATS = ("flac", "m4b")


def timed_stages(opts) -> dict:
    """flows.pipeline.render with each stage timed (the stages are passed through pipeline's `call`)."""
    from flows.pipeline import render

    times: dict[str, float] = {}

    def call(fn, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[fn.__name__] = times.get(fn.__name__, 0.0) + time.perf_counter() - t0

    t0 = time.perf_counter()
    counts = render(opts, call=call)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "stages": times, "counts": counts}


class ChapterClock:
    """When each chapter became whole in the manifest (its last row committed: what the studio plays), in seconds
    since `t0`, and how many of the book's rows were still not done then: the manifest read after every commit of
    the synthesize stage (a few ms at this size).  The stage commits through its module's own `commit` name
    (tasks.synthesize.render.Commits), so that is the one wrapped: wrapping manifests.store.commit after the stage
    was imported saw none of them (issue 42's first measurement, every chapter "whole" at the render's end)."""

    def __init__(self, t0: float):
        self.t0, self.whole, self.left_at, self.commits = t0, {}, {}, 0

    def __enter__(self):
        import manifests.store as store
        from tasks.synthesize import render as stage  # the module whose `commit` the stage's Commits call

        self._module, self._commit = stage, stage.commit
        clock = self

        def commit(book_dir, rows, **kw):
            out = clock._commit(book_dir, rows, **kw)
            now = time.perf_counter() - clock.t0
            clock.commits += 1
            left = Counter()
            for r in store.load(book_dir).to_pylist():
                left[r["chapter"]] += r["status"] != store.STATUS_DONE
            for c in sorted(c for c, n in left.items() if n == 0 and c not in clock.whole):
                clock.whole[c], clock.left_at[c] = now, sum(left.values())
            return out

        self._module.commit = commit
        return self

    def __exit__(self, *exc):
        self._module.commit = self._commit


def listen(texts: list[str], tmp: Path, params: dict, per_chapter: int, repeat: int, log) -> dict:
    """The texts as a book of chapters of `per_chapter` segments, rendered with each schedule (module docstring);
    the medians of `repeat` alternating runs."""
    from flows.options import options_from_params

    book = tmp / "chapters.txt"
    numbers = range(0, len(texts), per_chapter)
    book.write_text("".join(f"第{i // per_chapter + 1}章\n\n" + "\n\n".join(texts[i:i + per_chapter]) + "\n\n"
                            for i in numbers), encoding="utf-8")
    runs: dict[str, list[dict]] = {"length": [], "chapters": []}
    for k in range(repeat):
        for schedule in runs:
            opts = options_from_params(str(book), out=str(tmp / f"listen-{schedule}-{k}"), schedule=schedule, **params)
            t0 = time.perf_counter()
            with ChapterClock(t0) as clock:
                render = timed_stages(opts)
            audio = sum(r["duration_s"] for r in load_rows(opts.book_dir))
            if 0 not in clock.whole:                  # no commit of the stage seen: the clock is broken
                raise RuntimeError(f"--schedule {schedule}: {clock.commits} commits seen, chapter 1 never whole")
            first = clock.whole[0]
            runs[schedule].append({"wall_s": round(render["wall_s"], 2), "first_chapter_s": round(first, 2),
                                   "first_chapter_share": round(first / render["wall_s"], 4),
                                   "rows_left_at_first_chapter": clock.left_at[0],
                                   "audio_s_per_wall_s": round(audio / render["wall_s"], 4)})
            log(f"listen, --schedule {schedule}: chapter 1 playable at {first:.1f} s of {render['wall_s']:.1f} s "
                f"({first / render['wall_s']:.1%}; {clock.left_at[0]} rows still to render); "
                f"{audio / render['wall_s']:.3f} audio-s/wall-s")
    medians = {sch: {k: round(median(r[k] for r in rs), 4) for k in rs[0]} for sch, rs in runs.items()}
    ratio = medians["chapters"]["audio_s_per_wall_s"] / medians["length"]["audio_s_per_wall_s"]
    out = {"chapter_segments": per_chapter, "chapter_count": len(numbers), "repeat": repeat, "runs": runs,
           "schedules": medians, "first_chapter_share": medians["chapters"]["first_chapter_share"],
           "chapter_order_cost": round(1 - ratio, 4)}
    log(f"first_chapter_share {out['first_chapter_share']:.4f} (chapters; length: "
        f"{medians['length']['first_chapter_share']:.4f}), chapter_order_cost {out['chapter_order_cost']:+.4f}")
    return out


def load_rows(book_dir: Path) -> list[dict]:
    from manifests.store import load

    return load(book_dir).to_pylist()


def engine_alone(engine, book_dir: Path) -> dict:
    """The render's manifest rows (first attempt's seed), rendered by the engine alone."""
    from engine.units import SAMPLE_RATE
    from manifests.store import load
    from tasks.plan.rows import row_request
    from tasks.synthesize.guard import reroll_seed

    rows = {r["content_key"]: r for r in load(book_dir).to_pylist()}
    reqs = [row_request(r, k, reroll_seed(r["seed"], 1)) for k, r in rows.items()]   # a refined row: its text
    t0 = time.perf_counter()
    audio = sum(len(res.audio) for res in engine.synthesize(reqs)) / SAMPLE_RATE
    wall = time.perf_counter() - t0
    return {"segments": len(reqs), "audio_s": round(audio, 2), "wall_s": round(wall, 2),
            "audio_s_per_wall_s": round(audio / wall, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16"],
                    help="the engine's dtype (default auto: engine/cpupath.py's choice of an exact float path)")
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=None, help="max_batch (default: the engine's default)")
    ap.add_argument("--segments", type=int, default=None, help=f"default: {BATCHES} x the batch")
    ap.add_argument("--corpus", type=Path, default=CORPUS_FILE)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--refine", action="store_true", help="run the refine-text pass too: measure its share")
    ap.add_argument("--qa", default="off", choices=["off", "full"], help="full: also measure qa_fraction (module doc)")
    ap.add_argument("--asr-model", default="base", help="the ASR model of --qa full")
    ap.add_argument("--speech", type=Path, default=None, help="--qa full: the speech corpus folder (qa_bench's)")
    ap.add_argument("--qa-repeat", type=int, default=1, help="--qa full: rounds of off and full (the best counts)")
    ap.add_argument("--listen", action="store_true", help="also: chapter 1's playable time and the chapters "
                                                          "schedule's cost (module doc)")
    ap.add_argument("--listen-only", action="store_true", help="--listen and nothing else")
    ap.add_argument("--chapter-segments", type=int, default=8, help="--listen: segments per chapter (default 8)")
    ap.add_argument("--listen-repeat", type=int, default=1, help="--listen: alternating runs of each schedule")
    ap.add_argument("--baseline", default=BASELINE_PATH,
                    help=f"--dtype auto's baseline path in the same run (default {BASELINE_PATH}; fp32-avx512 on an "
                         "AVX-512 or AMX CPU)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-step profile at the batch")
    args = ap.parse_args(argv)
    if not args.corpus.is_file():
        print(f"{args.corpus}: corpus file not found (pass --corpus)", file=sys.stderr)
        return 2
    start = time.perf_counter()

    import torch

    from benchmarks.limits import (
        dtypes_of,
        flops_per_audio_s,
        format_bandwidth,
        format_peaks,
        format_profile,
        memory_bandwidth,
        peak_gemm,
        read_bandwidth,
        side_limits,
        step_profile,
    )
    from engine.api import EngineOptions
    from engine.cpupath import PATHS
    from engine.units import expected_tokens
    from flows.options import options_from_params
    from tasks import stages

    if args.baseline not in (fp32 := [p.name for p in PATHS if p.dtype == "fp32" and not p.int8]):
        print(f"--baseline {args.baseline}: not an fp32 path (one of {', '.join(fp32)})", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    eopts = EngineOptions(model=args.model, device=args.device, dtype=args.dtype, int8=args.int8,
                          threads=args.threads, max_batch=args.batch)
    n = args.segments or BATCHES * eopts.batch
    texts = workload(args.corpus, n)
    if args.listen or args.listen_only:
        params = {"model": args.model, "formats": list(FORMATS), "device": args.device, "dtype": args.dtype,
                  "int8": args.int8, "max_batch": args.batch, "threads": args.threads}
        stages.get_engine(eopts)                                           # loaded once, untimed
        with tempfile.TemporaryDirectory(prefix="book-listen-") as tmp:
            listened = listen(texts, Path(tmp), params, args.chapter_segments, args.listen_repeat, print)
        if args.listen_only:
            return finish({"model": args.model, "batch": eopts.batch, "threads": args.threads, "segments": len(texts),
                           "listen": listened, "first_chapter_share": listened["first_chapter_share"],
                           "chapter_order_cost": listened["chapter_order_cost"]}, start, args.json, print)
    with tempfile.TemporaryDirectory(prefix="book-throughput-") as tmp:
        book = Path(tmp) / "nahan.txt"
        book.write_text("第一章\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
        opts = options_from_params(str(book), out=str(Path(tmp) / "out"), model=args.model, formats=list(FORMATS),
                                   device=args.device, dtype=args.dtype, int8=args.int8, max_batch=args.batch,
                                   threads=args.threads, refine=args.refine)
        t0 = time.perf_counter()
        engine = stages.get_engine(opts.engine)                            # the model, loaded once, untimed
        print(f"engine {engine.version} (path {engine.path.name if engine.path else 'none'}) loaded in "
              f"{time.perf_counter() - t0:.1f} s; batch {eopts.batch}, "
              f"{args.threads} threads; book: the first {len(texts)} segments of {args.corpus.name}", flush=True)
        with EngineClock() as clock, EngineClock("refine") as refining:
            render = timed_stages(opts)
        wall, st = render["wall_s"], render["stages"]
        outputs = sorted(p.name for p in opts.book_dir.iterdir() if p.suffix in (".flac", ".m4b"))
        split = {"prepare_s": st.get("prepare", 0.0), "engine_in_render_s": clock.seconds,
                 **({"refine_s": refining.seconds} if args.refine else {}),
                 "synthesize_outside_engine_s": st.get("synthesize", 0.0) - clock.seconds - refining.seconds,
                 "package_s": st.get("package", 0.0)}
        split["other_s"] = wall - sum(split.values())                   # the lock, temp-file scan
        print(f"render: {render['counts'].get('rendered')} segments rendered in {wall:.1f} s wall; "
              f"outputs {', '.join(outputs)}", flush=True)                # each phase prints as it ends
        print("  split: " + ", ".join(f"{k} {v:.1f} s ({v / wall:.1%})" for k, v in split.items()), flush=True)
        alone = engine_alone(engine, opts.book_dir)
        base = baseline_engine(args) if args.dtype == "auto" and not args.int8 and engine.path is not None \
            and engine.path.name != args.baseline else None
        base_alone = engine_alone(base, opts.book_dir) if base is not None else None
        voc_alone = engine_alone(fp32_vocoder(engine), opts.book_dir) if engine.vocoder != "fp32" else None
    print(f"engine alone, same segments: {alone['segments']} segments, {alone['audio_s']:.1f} s of audio in "
          f"{alone['wall_s']:.1f} s wall ({alone['audio_s_per_wall_s']:.3f} audio-s/wall-s); the render: "
          f"{alone['audio_s'] / wall:.3f} audio-s/wall-s", flush=True)
    overhead = 1 - alone["wall_s"] / wall
    print(f"pipeline_overhead {overhead:.4f} (1 - engine alone / render wall)", flush=True)
    vs_base = "vs_" + args.baseline.replace("-", "_")
    if base_alone is not None:
        ratio = alone["audio_s_per_wall_s"] / base_alone["audio_s_per_wall_s"]
        print(f"{args.baseline} engine alone, same segments: {base_alone['audio_s']:.1f} s of audio in "
              f"{base_alone['wall_s']:.1f} s wall ({base_alone['audio_s_per_wall_s']:.3f} audio-s/wall-s); "
              f"{vs_base} {ratio:.3f} ({engine.path.name if engine.path else engine.dtype} / {args.baseline})",
              flush=True)
    if voc_alone is not None:
        print(f"the same engine with Decoder + Vocos in fp32, same segments: {voc_alone['wall_s']:.1f} s wall "
              f"({voc_alone['audio_s_per_wall_s']:.3f} audio-s/wall-s); vs_fp32_vocoder "
              f"{alone['audio_s_per_wall_s'] / voc_alone['audio_s_per_wall_s']:.3f} ({engine.vocoder} / fp32)",
              flush=True)
    engines = [engine] + ([base] if base is not None else [])
    peaks = {d: peak_gemm(d, args.threads) / 1e9 for d in dtypes_of(engines)}
    bandwidth, read = memory_bandwidth(args.threads), read_bandwidth(args.threads)
    lens, tokens = [len(engine.prompt_ids(t)) for t in texts], [expected_tokens(t) for t in texts]
    cost = flops_per_audio_s(engine, lens, tokens)
    print("peak GEMM: " + format_peaks(peaks) + "; " + format_bandwidth(bandwidth, read) + "; GFLOP per audio s: "
          + ", ".join(f"{k} {v:.2f}" for k, v in cost.items()))
    limits = side_limits("engine", engine, (lens, tokens, cost), eopts.batch, read, peaks,
                         alone["audio_s_per_wall_s"], print)
    profile = None
    if not args.no_profile:                        # where a step's time goes at the batch: the fraction's reason
        from engine.voice import sample_voice

        profile = step_profile(engine, texts, tokens, sample_voice(engine.loaded, 1234), eopts.batch)
        print("engine: " + format_profile(profile), flush=True)
    result = {
        "model": args.model, "engine": engine.version, "threads": args.threads, "batch": eopts.batch,
        "segments": alone["segments"], "audio_s": alone["audio_s"], "outputs": outputs,
        "render_wall_s": round(wall, 2), "render_audio_s_per_wall_s": round(alone["audio_s"] / wall, 4),
        "split": {k: round(v, 4) for k, v in split.items()},
        "split_share": {k: round(v / wall, 4) for k, v in split.items()},
        "engine_alone": alone, "pipeline_overhead": round(overhead, 4),
        "peak_gemm_gflops": {k: round(v, 1) for k, v in peaks.items()}, "gflop_per_audio_s": cost,
        "memory_bandwidth_gbs": round(bandwidth / 1e9, 2), "read_bandwidth_gbs": round(read / 1e9, 2), **limits,
        "vocoder": engine.vocoder,
        "render_counts": {k: v for k, v in render["counts"].items() if k != "book_dir"},
    }
    if profile is not None:
        result["profile"] = profile
    if voc_alone is not None:
        result.update(fp32_vocoder_alone=voc_alone,
                      vs_fp32_vocoder=round(alone["audio_s_per_wall_s"] / voc_alone["audio_s_per_wall_s"], 4))
    if base_alone is not None:
        result.update(baseline={"path": args.baseline, "engine": base.version, "engine_alone": base_alone,
                                **side_limits(args.baseline, base, (lens, tokens, cost), eopts.batch, read,
                                              peaks, base_alone["audio_s_per_wall_s"], print)},
                      **{vs_base: round(alone["audio_s_per_wall_s"] / base_alone["audio_s_per_wall_s"], 4)})
    if args.listen:
        result.update(listen=listened, first_chapter_share=listened["first_chapter_share"],
                      chapter_order_cost=listened["chapter_order_cost"])
    if args.refine:
        result.update(refine_share=round(refining.seconds / wall, 4),
                      refine_vs_speech=round(refining.seconds / clock.seconds, 4))
        print(f"refine_share {result['refine_share']:.4f} (the refine-text pass / render wall; "
              f"{result['refine_vs_speech']:.3f} of the engine's speech time)")
    if args.qa == "full":                          # the QA's share, same engine, same run
        from benchmarks.qa_bench import qa_fraction

        result["qa"] = qa_fraction(engine, segments=n, model=args.model, device=args.device, threads=args.threads,
                                   batch=args.batch, asr_model=args.asr_model, repeat=args.qa_repeat,
                                   **({"speech": args.speech} if args.speech else {}))
        result["qa_fraction"] = result["qa"]["qa_fraction"]
        print(f"qa_fraction {result['qa_fraction']:.4f} (--qa full over --qa off, {result['qa']['segments']} "
              f"segments of speech; CPU seconds: {result['qa']['cpu_fraction']:+.4f})")
    return finish(result, start, args.json, print)


def fp32_vocoder(engine):
    """The same engine (model, path, version) with Decoder + Vocos in fp32: what a bf16 path vocoded in before."""
    import copy

    other = copy.copy(engine)
    other.vocoder = "fp32"
    return other


def baseline_engine(args):
    """The fp32 engine on args.baseline (CHATTTS_RENDER_KERNELS names it while it loads; the model loads again,
    untimed), or None where this CPU has no such path."""
    import os

    from engine.api import EngineOptions
    from engine.engine import Engine
    from engine.kernels import ENV

    old = os.environ.get(ENV)
    os.environ[ENV] = args.baseline
    try:
        base = Engine.load(EngineOptions(model=args.model, dtype="fp32", threads=args.threads, max_batch=args.batch))
    except ValueError:                                    # this CPU has no such path
        return None
    finally:
        if old is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = old
    return base if base.path is not None and base.path.name == args.baseline else None


if __name__ == "__main__":
    sys.exit(main())
