"""Our engine vs upstream ChatTTS 0.2.5 on the same workload, weights, process, thread count and batch size.

    python -m benchmarks.engine_vs_upstream --model random-full --json F   # the default run: 12 segments, batch 4
    python -m benchmarks.engine_vs_upstream --doc-order --with-int8 --with-bf16 --repeat 3
    python -m benchmarks.engine_vs_upstream --batch 0                      # probe upstream's best batch (4..32)

Workload: the first N segments of ../shared/corpus/txt/gutenberg-zh/27166-0.txt as our front-end cuts them
(tasks.ingest.load_book + tasks.text.segment.segment_chapter), each with a forced token count
T = engine.units.expected_tokens(text).  Both sides speak with one voice (engine.voice.sample_voice(seed 1234)).

Upstream (the primary baseline): `Chat` loaded from the same asset directory (engine.loader), `Chat.infer` on the
segments **sorted by length** (what a careful user does), in batches of the same size as ours; document order is
the second baseline (--doc-order).  Text normalization and refine-text off; each batch with min_new_token =
max_new_token = the batch's longest T (random weights would stop rows at a random EOS; upstream runs every row
to the batch's longest anyway), decoded by upstream.  Ours: `Engine.synthesize(requests)` with each request's exact T.
Sides run alternately (upstream sorted, upstream document order, ours, ours INT8, ours bf16, then again) --repeat
times; each side reports its median run.

Audio seconds are the workload's: sum over segments of (2T-1)*256 / 24000, identical for every side (upstream
returns more: every row padded to its batch's longest; that is reported as returned_audio_s).  Wall seconds
exclude model loading and a short warm-up; peak RSS is sampled every 10 ms during the side's run.
ratio = ours / sorted upstream throughput (audio seconds per wall second); ratio_doc_order against document order;
ratio_onnx (--with-onnx) = ours through ONNX Runtime (engine/ortengine.py) / sorted upstream, in the same run.
Distance to the limit (benchmarks/limits.py): peak GEMM per dtype, the memory bandwidth (copy and read-only), FLOPs
per audio second, the roofline (min of compute and read bandwidth at the batch, the KV cache's bytes counted) at the
best float dtype this CPU has and at each side's own path, limit_fraction = ours / the former (and
limit_fraction_weights_only: the same without the KV cache); a per-step profile of each of our sides.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.units import SAMPLE_RATE, expected_tokens, samples_for_tokens  # noqa: E402

CORPUS_FILE = ROOT.parent / "shared" / "corpus" / "txt" / "gutenberg-zh" / "27166-0.txt"
VOICE_SEED = 1234
PROBE_BATCHES = (4, 8, 16, 32)     # --batch 0: upstream's best of these is used by both sides
DEFAULT_N = 12                     # segments: 3 batches' worth at DEFAULT_BATCH (refill is exercised)
DEFAULT_BATCH = 4                  # both sides; with the probe's sizes the default run fits 15 minutes here
PROBE_STEPS = 12                   # GPT steps per probe batch
WARMUP_STEPS = 4
RSS_PERIOD = 0.01                  # s


# ------------------------------------------------------------------------------------------- workload

def workload(path: Path, n: int) -> list[str]:
    """The first n segment texts of the book, as the front-end cuts them."""
    from tasks.ingest import load_book
    from tasks.text.segment import segment_chapter

    texts: list[str] = []
    for ch in load_book(path).chapters:
        for seg in segment_chapter(ch):
            if seg.text.strip():
                texts.append(seg.text)
            if len(texts) >= n:
                return texts
    return texts


# ---------------------------------------------------------------------------------------- measurement

class PeakRSS:
    """Peak resident set size (bytes) of this process while the block runs, sampled in a thread."""

    def __enter__(self):
        import psutil
        import torch

        self.cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self._p = psutil.Process()
        self.before = self.peak = self._p.memory_info().rss
        c = self._p.cpu_times()
        self._cpu0 = c.user + c.system
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.wait(RSS_PERIOD):
            self.peak = max(self.peak, self._p.memory_info().rss)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._p.memory_info().rss)
        c = self._p.cpu_times()
        self.cpu_s = c.user + c.system - self._cpu0     # all threads of the process (the RSS sampler is idle)
        self.gpu_peak = 0
        if self.cuda:
            import torch

            self.gpu_peak = torch.cuda.max_memory_allocated()


def _side(audio_s: float, returned_s: float, wall: float, rss: PeakRSS, **extra) -> dict:
    return {"audio_s": round(audio_s, 3), "returned_audio_s": round(returned_s, 3), "wall_s": round(wall, 3),
            "audio_s_per_wall_s": round(audio_s / wall, 4) if wall > 0 else None,
            "cpu_s": round(rss.cpu_s, 2), "audio_s_per_cpu_s": round(audio_s / rss.cpu_s, 4) if rss.cpu_s > 0 else None,
            "peak_rss_mb": round(rss.peak / 2**20, 1), "rss_before_mb": round(rss.before / 2**20, 1),
            **({"peak_gpu_mb": round(rss.gpu_peak / 2**20, 1)} if rss.cuda else {}), **extra}


def workload_audio_s(forced: list[int]) -> float:
    return sum(samples_for_tokens(t) for t in forced) / SAMPLE_RATE


# ------------------------------------------------------------------------------------------- upstream

def _upstream_batch(chat, texts: list[str], voice: str, steps: int) -> list:
    from ChatTTS import Chat

    params = Chat.InferCodeParams(spk_emb=voice, max_new_token=steps, min_new_token=steps, show_tqdm=False)
    return chat.infer(list(texts), skip_refine_text=True, split_text=False, do_text_normalization=False,
                      do_homophone_replacement=False, params_infer_code=params)


def probe_upstream_batch(chat, texts: list[str], voice: str, log) -> tuple[int, dict]:
    """Row-steps per second of upstream at each probe batch size on the first texts; the best size."""
    rates: dict[int, float] = {}
    _upstream_batch(chat, texts[:1], voice, WARMUP_STEPS)                   # warm-up
    for b in PROBE_BATCHES:
        if b > len(texts) and rates:
            break
        batch = (texts * b)[:b]
        t0 = time.perf_counter()
        _upstream_batch(chat, batch, voice, PROBE_STEPS)
        rates[b] = b * PROBE_STEPS / (time.perf_counter() - t0)
        log(f"  probe: upstream batch {b:2d}: {rates[b]:.1f} row-steps/s")
    best = max(rates, key=rates.get)
    return best, {str(k): round(v, 2) for k, v in rates.items()}


def run_upstream(loaded, texts: list[str], forced: list[int], voice: str, batch: int, sort: bool, log) -> dict:
    """Upstream over the workload in batches of `batch`: sorted by length (longest first) or in document order."""
    chat = loaded.chat
    order = sorted(range(len(texts)), key=lambda i: -forced[i]) if sort else list(range(len(texts)))
    _upstream_batch(chat, texts[:1], voice, WARMUP_STEPS)
    gc.collect()
    returned = 0
    steps_total = 0
    name = "upstream " + ("sorted" if sort else "document order")
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            chunk, steps = [texts[j] for j in idx], max(forced[j] for j in idx)
            wavs = _upstream_batch(chat, chunk, voice, steps)
            if len(wavs) != len(chunk):
                raise RuntimeError(f"upstream returned {len(wavs)} waveforms for {len(chunk)} texts")
            returned += sum(int(w.size) for w in wavs)
            steps_total += steps * len(chunk)
            log(f"  {name} batch {i // batch + 1}: {len(chunk)} rows x {steps} steps, "
                f"{time.perf_counter() - t0:.1f} s so far")
        wall = time.perf_counter() - t0
    return _side(workload_audio_s(forced), returned / SAMPLE_RATE, wall, rss, batch=batch, row_steps=steps_total)


# ------------------------------------------------------------------------------------------------ ours

def load_ours(args, int8: bool, dtype: str = "auto", backend: str = "torch"):
    """Our Engine with the benchmark's settings (the process-wide model cache loads it once); backend onnx: the
    same scheduler and sampling, the model calls through ONNX Runtime (graphs exported once into the cache)."""
    from engine.api import EngineOptions
    from engine.engine import Engine

    return Engine.load(EngineOptions(model=args.model, device=args.device, dtype=dtype, int8=int8,
                                     cuda_graphs=args.cuda_graphs, threads=args.threads, max_batch=args.batch,
                                     backend=backend))


def run_ours(engine, texts: list[str], forced: list[int], voice: str, log, name: str = "ours") -> dict:
    from engine.api import Request

    warm = [Request(key="warm", text=texts[0], spk_emb=voice, seed=0, forced_tokens=WARMUP_STEPS)]
    list(engine.synthesize(warm))
    reqs = [Request(key=str(i), text=t, spk_emb=voice, seed=i, forced_tokens=f)
            for i, (t, f) in enumerate(zip(texts, forced))]
    gc.collect()
    returned = 0
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        for n_done, res in enumerate(engine.synthesize(reqs), 1):
            want = samples_for_tokens(forced[int(res.key)])
            if len(res.audio) != want:
                raise RuntimeError(f"{name}: segment {res.key} has {len(res.audio)} samples, expected {want}")
            returned += len(res.audio)
            if n_done % 8 == 0:
                log(f"  {name}: {n_done}/{len(reqs)} segments, {time.perf_counter() - t0:.1f} s so far")
        wall = time.perf_counter() - t0
    sizes = engine.last_batch_sizes
    extra = {"row_steps": sum(forced), "engine": engine.version, "mean_batch": round(sum(sizes) / len(sizes), 2),
             "path": engine.path.name if engine.path is not None else None}
    return _side(workload_audio_s(forced), returned / SAMPLE_RATE, wall, rss, **extra)


# ---------------------------------------------------------------------------------- drift (INT8, bf16)

def _inputs(loaded, texts: list[str], voice: str, steps: int):
    """[(ids [L], codes [steps, 4])] for the drift measurement; deterministic."""
    import torch

    tok = loaded.tokenizer._tokenizer
    g = torch.Generator().manual_seed(0)
    out = []
    for text in texts[:4]:
        ids = torch.tensor(tok(f"[Stts][spk_emb]{text}[Ptts]", add_special_tokens=False)["input_ids"])
        out.append((ids, torch.randint(0, 625, (steps, 4), generator=g)))
    return out


def _hf_logits(loaded, llama, ids, codes, spk):
    """Code logits (L, 4, 626) of an HF LlamaModel over prompt + code embeddings, no cache."""
    import torch

    emb = loaded.embed
    x = emb.emb_text(ids)
    x = torch.where((ids == loaded.tokenizer.spk_emb_ids)[:, None], spk[None], x)
    x = torch.cat([x, sum(emb.emb_code[k](codes[:, k]) for k in range(4))])[None]       # (1, L, C)
    h = llama(inputs_embeds=x, use_cache=False).last_hidden_state[0]                     # (L, C)
    return torch.einsum("lc,qvc->lqv", h, loaded.head_code_weight)


def _cos(a, b) -> object:
    import torch.nn.functional as F

    return F.cosine_similarity(a.float(), b.float(), dim=-1).flatten()


def drift(loaded, texts: list[str], voice: str, args, int8: bool = False, dtype: str = "fp32",
          steps: int = 64) -> dict:
    """fp32 vs INT8 or bf16 on the same inputs (4 segment prompts each followed by `steps` random code steps):
    cosine similarity of the code logits (mean and min over positions and codebooks), and the SNR (dB) of the
    Decoder + Vocos output of the code steps' hidden states against fp32's.  Our fp32 model is itself checked
    against the HF Llama (RuntimeError if it disagrees)."""
    import torch
    import torch.nn.functional as F
    from ChatTTS.model.speaker import Speaker

    from engine.api import EngineOptions
    from engine.attention import Batched
    from engine.engine import Engine
    from engine.llama import KVCache
    from engine.vocoder import decode

    base = dict(model=args.model, device="cpu", threads=args.threads)
    m32 = Engine.load(EngineOptions(**base, dtype="fp32")).model
    mx = Engine.load(EngineOptions(**base, int8=int8, dtype=dtype)).model
    spk = torch.from_numpy(Speaker._decode(voice)).float()

    def forward(m, ids, codes):
        x = torch.cat([m.prompt_embedding(ids, spk)[0], m.code_embedding(codes)[:, 0]])[None]   # (1, L, C)
        L = x.shape[1]
        cache = KVCache(m.llama.s, 1, L, x.device, m.llama.attention.kv_dtype or m.dtype)   # the path's cache
        call = Batched().begin(cache, torch.arange(L)[None], torch.tensor([0]), [L])           # causal over L
        h = m.llama(x, call)[0]                                                                # (L, C)
        return m.logits(h), h[-steps:].float()                                                # (L, 4, 626)

    sims, checks, sig, err = [], [], 0.0, 0.0
    with torch.inference_mode():
        for ids, codes in _inputs(loaded, texts, voice, steps):
            l32, h32 = forward(m32, ids, codes)
            checks.append(_cos(l32, _hf_logits(loaded, loaded.gpt, ids, codes, F.normalize(spk, dim=0))))
            lx, hx = forward(mx, ids, codes)
            sims.append(_cos(l32, lx))
            a, b = decode(loaded, [h32, hx])
            a, b = a.astype("float64"), b.astype("float64")
            sig, err = sig + float((a ** 2).sum()), err + float(((a - b) ** 2).sum())
    s, c = torch.cat(sims), torch.cat(checks)
    if float(c.min()) < 0.999:
        raise RuntimeError(f"engine fp32 forward disagrees with the HF Llama (cosine min {float(c.min()):.4f})")
    import math
    snr = round(10 * math.log10(sig / err), 2) if err > 0 else None                          # None: identical
    return {"cosine_mean": round(float(s.mean()), 5), "cosine_min": round(float(s.min()), 5),
            "positions": int(s.numel() // 4), "decoder_vocos_snr_db": snr,
            "fp32_vs_hf_cosine_min": round(float(c.min()), 6)}


# ------------------------------------------------------------------------------------------------ main

def _median(runs: list[dict]) -> dict:
    """The run with the median throughput (the lower middle one for an even count), with every run's wall time."""
    mid = sorted(runs, key=lambda r: r["audio_s_per_wall_s"])[(len(runs) - 1) // 2]
    return {**mid, "runs_wall_s": [r["wall_s"] for r in runs]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="random-full", help="random-full | random-tiny | hf | asset dir")
    ap.add_argument("--n", type=int, default=DEFAULT_N, help="segments (default %(default)s)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads for every side (default 2)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16", "fp16"], help="ours (default auto)")
    ap.add_argument("--int8", action="store_true", help="ours with INT8 GPT linears (CPU); reports logit drift")
    ap.add_argument("--with-int8", action="store_true", help="also ours with INT8 GPT linears (CPU): ratio_int8")
    ap.add_argument("--with-bf16", action="store_true", help="also ours in bf16: ratio_bf16")
    ap.add_argument("--cuda-graphs", action="store_true", help="ours with the decode step as CUDA graphs")
    ap.add_argument("--with-onnx", action="store_true",
                    help="also ours through ONNX Runtime (--backend onnx; CPU provider on cpu): ratio_onnx")
    ap.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                    help="batch size of both sides (default %(default)s; 0: upstream's best of a 4..32 probe)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every side, alternating; medians reported")
    ap.add_argument("--doc-order", action="store_true",
                    help="also upstream in document order: ratio_doc_order (the default run leaves it out to fit "
                         "15 minutes on a 2-core CPU)")
    ap.add_argument("--no-limits", action="store_true", help="skip peak GEMM, FLOPs, ceiling and the profile")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--only", choices=["ours", "upstream"], default=None)
    ap.add_argument("--corpus", type=Path, default=CORPUS_FILE, help="the book (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.n < 1 or args.repeat < 1:
        ap.error("--n and --repeat must be at least 1")
    if args.batch < 0:
        ap.error("--batch must be 0 (probe) or more")
    if not args.corpus.is_file():
        print(f"{args.corpus}: corpus file not found (pass --corpus)", file=sys.stderr)
        return 2
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, flush=True)

    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("ChatTTS").setLevel(logging.ERROR)       # forced lengths make upstream warn per batch
    from engine.api import ModelUnavailable
    from engine.loader import load_chattts
    from engine.voice import sample_voice

    texts = workload(args.corpus, args.n)
    forced = [expected_tokens(t) for t in texts]
    t0 = time.perf_counter()
    try:
        loaded = load_chattts(args.model, args.device)
    except ModelUnavailable as e:
        print(str(e), file=sys.stderr)
        return 2
    log(f"model: {args.model} ({loaded.root}, fingerprint {loaded.fingerprint}) loaded in "
        f"{time.perf_counter() - t0:.1f} s; torch threads {torch.get_num_threads()}; device {args.device}")
    voice = sample_voice(loaded, VOICE_SEED)
    probe: dict = {}
    if args.batch == 0:
        args.batch, probe = probe_upstream_batch(loaded.chat, texts, voice, log)
    log(f"workload: {len(texts)} segments from {args.corpus.name} (batch {args.batch} on every side: "
        f"{len(texts) / args.batch:.1f} batches' worth); forced tokens {min(forced)}..{max(forced)}, "
        f"{sum(forced)} in all = {workload_audio_s(forced):.1f} s of audio; {args.repeat} run(s) per side")

    result: dict = {"model": args.model, "fingerprint": loaded.fingerprint, "device": args.device,
                    "threads": args.threads, "n": len(texts), "batch": args.batch, "probe": probe,
                    "repeat": args.repeat, "forced_tokens": forced, "int8": args.int8, "cuda_graphs": args.cuda_graphs,
                    "torch": torch.__version__}
    sides: list[tuple[str, object]] = []          # (name, run()) in the order they alternate
    if args.only != "ours":
        sides.append(("upstream", lambda: run_upstream(loaded, texts, forced, voice, args.batch, True, log)))
        if args.doc_order:
            sides.append(("upstream_doc_order",
                          lambda: run_upstream(loaded, texts, forced, voice, args.batch, False, log)))
    ours = [] if args.only == "upstream" else [("ours", args.int8, args.dtype, "torch")]
    if ours and args.with_int8 and not args.int8:
        ours.append(("ours_int8", True, "fp32", "torch"))
    if ours and args.with_bf16 and args.dtype != "bf16":
        ours.append(("ours_bf16", False, "bf16", "torch"))
    if ours and args.with_onnx:
        ours.append(("ours_onnx", False, "auto", "onnx"))
    t0 = time.perf_counter()
    engines = {name: load_ours(args, int8, dtype, backend) for name, int8, dtype, backend in ours}
    log(f"our engines loaded in {time.perf_counter() - t0:.1f} s (an onnx side exports its graphs once)")
    for name, engine in engines.items():
        sides.append((name, lambda e=engine, n=name: run_ours(e, texts, forced, voice, log, n)))
    runs: dict[str, list[dict]] = {name: [] for name, _ in sides}
    for k in range(args.repeat):
        for name, run in sides:
            e = engines.get(name)
            label = f" (engine {e.version}, path {e.path.name if e.path else 'none'})" if e is not None else ""
            log(f"{name}{label}, run {k + 1}/{args.repeat}:")
            runs[name].append(run())
            log(_line(name, runs[name][-1]))
            gc.collect()
    for name in runs:
        result[name] = _median(runs[name])
    for name in engines:
        suffix = name[len("ours"):]
        for base, key in (("upstream", "ratio"), ("upstream_doc_order", "ratio_doc_order")):
            if base not in result:
                continue
            o, u = result[name], result[base]
            result[key + suffix] = round(o["audio_s_per_wall_s"] / u["audio_s_per_wall_s"], 3)
            result[key.replace("ratio", "ratio_cpu") + suffix] = round(
                o["audio_s_per_cpu_s"] / u["audio_s_per_cpu_s"], 3)
            log(f"{key}{suffix} ({name} / {base} throughput, medians): {result[key + suffix]:.2f}x wall, "
                f"{result[key.replace('ratio', 'ratio_cpu') + suffix]:.2f}x per CPU second")
    if engines and not args.no_limits:
        result.update(limits(args, {n: e for n, e in engines.items() if e.opts.backend == "torch"}, texts,
                             forced, voice, result, log))
    for name, int8, dtype, _backend in ours:
        resolved = engines[name].dtype if args.device == "cpu" else dtype   # CPU auto: the path's (bf16 here)
        key = "int8_drift" if int8 else "bf16_drift"
        if (int8 or resolved == "bf16") and key not in result:
            result[key] = d = drift(loaded, texts, voice, args, int8=int8, dtype="fp32" if int8 else resolved)
            log(f"{key}: logits cosine mean {d['cosine_mean']}, min {d['cosine_min']} ({d['positions']} positions); "
                f"Decoder+Vocos SNR vs fp32 {d['decoder_vocos_snr_db']} dB")
    return finish(result, start, args.json, log)


def finish(result: dict, start: float, path: Path | None, log) -> int:
    """Print (and store in `result`) the benchmark's own wall time since `start`; write the JSON if asked."""
    result["benchmark_wall_s"] = round(time.perf_counter() - start, 1)
    log(f"benchmark wall time: {result['benchmark_wall_s']:.1f} s ({result['benchmark_wall_s'] / 60:.1f} min)")
    if path:
        _write_json(path, result)
        log(f"wrote {path}")
    return 0


def limits(args, engines: dict, texts: list[str], forced: list[int], voice: str, result: dict, log) -> dict:
    """Peak GEMM per CPU dtype, the memory bandwidth (copy and read-only), FLOPs per audio second, the roofline and
    limit fractions of each of our sides (at the best float dtype and at its own path; with the KV cache's bytes and
    with the weights' alone), and the per-step profile of each (benchmarks/limits.py)."""
    from benchmarks.limits import (
        PEAK_N,
        PEAK_REPS,
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

    cpu = args.device == "cpu"
    peaks = {d: round(peak_gemm(d, args.threads) / 1e9, 1) for d in dtypes_of(engines.values()) if cpu}
    bandwidth = memory_bandwidth(args.threads) if cpu else 0.0
    read = read_bandwidth(args.threads) if cpu else 0.0
    first = next(iter(engines.values()))
    lens = [len(first.prompt_ids(t)) for t in texts]
    cost = flops_per_audio_s(first, lens, forced)
    out: dict = {"peak_gemm_gflops": peaks, "gflop_per_audio_s": cost, "limits": {}}
    log(f"peak GEMM (square, up to {PEAK_N}, best of {PEAK_REPS}): "
        + format_peaks(peaks))
    if cpu:
        out["memory_bandwidth_gbs"] = round(bandwidth / 1e9, 2)
        out["read_bandwidth_gbs"] = round(read / 1e9, 2)
        log(format_bandwidth(bandwidth, read))
    log("GFLOP per audio second: " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items()))
    for name, e in engines.items():
        entry: dict = {"profile": step_profile(e, texts, forced, voice, args.batch)}
        log(f"{name}: " + format_profile(entry["profile"]))
        if peaks:
            entry.update(side_limits(name, e, (lens, forced, cost), args.batch, read, peaks,
                                     result[name]["audio_s_per_wall_s"], log))
        out["limits"][name] = entry
    return out


def _line(name: str, r: dict) -> str:
    return (f"{name}: {r['audio_s']:.1f} s audio in {r['wall_s']:.1f} s wall = {r['audio_s_per_wall_s']:.3f} "
            f"audio-s/wall-s ({r['cpu_s']:.0f} CPU s); peak RSS {r['peak_rss_mb']:.0f} MB "
            f"(before {r['rss_before_mb']:.0f} MB)"
            + (f"; batch {r['batch']}" if "batch" in r else ""))


def _write_json(path: Path, obj: dict) -> None:
    from engine.atomic import write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
