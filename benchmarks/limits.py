"""How far the engine is from what the machine can do, and where a decode step's time goes.

    peak = peak_gemm("fp32", threads=2)                 # FLOP/s of a large square GEMM: the best this CPU does
                                                        # (the best of MKL, oneDNN packed and our kernels)
    bw = memory_bandwidth(threads=2)                    # bytes/s of a STREAM-like copy (read + written)
    rd = read_bandwidth(threads=2)                      # bytes/s of a read-only pass: what a decode step does
    cost = flops_per_audio_s(engine, prompt_lens, forced)   # GPT linears / attention / heads, Decoder + Vocos
    ceiling_audio_s(cost, peaks, "bf16")                # compute-bound audio seconds per wall second
    roof = roofline(shape, cells, lens, forced, batch, rd, peaks, at_best_float(), cost)   # min(compute, memory)
    step_profile(engine, texts, forced, voice, batch)   # ms per decode step: GEMM, attention, sampling, other

FLOPs come from the shapes: a GPT token costs 2 FLOPs per weight of the block projections (and of the 4 code
heads) plus 4·layers·H·D·p for attention at position p (scores and values); the Decoder + Vocos cost is counted by
torch's FlopCounterMode on one decode of PROBE_TOKENS tokens (convolutions and linears; Vocos' ISTFT, an FFT, is not
counted: it is a few percent).  The ceiling is the audio rate at which those FLOPs take exactly the whole wall
time at the peak GEMM rate of the dtype each part runs in (GPT linears in the engine's dtype; W8A8 INT8: the int8
peak; weight-only INT8 (engine/kernels.c) computes in fp32: the fp32 peak;
attention in the Llama dtype; heads, Decoder, Vocos fp32).

The *roofline* is min(compute, bandwidth) at the batch the engine runs: a decode step of B rows streams every
weight once (in the dtype's bytes: fp32 4, bf16 2, int8 1) and reads each row's keys and values — every key
position of its prefix, K and V of every layer (ChatTTS: 20 layers x 768 x 2 x the cache's bytes, fp32 4 or bf16
2; a 10-s segment holds ~570 positions, so from ~10-20 rows on a step reads more cache than weights) — and does 2
FLOPs per weight per row plus the attention; it takes at least the longer of its FLOPs over the peak of the path's
arithmetic and its bytes (weights + the KV cache it reads) over the *read* bandwidth (`read_bandwidth`: a
read-only pass, as a step reads; the STREAM-like copy, `memory_bandwidth`, counts written bytes too and is
reported beside it).  The same roofline without the KV cache's bytes (`weights_only`) is stated beside it, so a
fraction that looks near the limit only because the cache was not counted shows.  Prefill (each row alone, as
the engine runs it) is bound the same way; heads run at the fp32 peak, Decoder + Vocos at their dtype's
(engine/vocoder.py: bf16 on a bf16 path).  Each run states it at the best float dtype this CPU has
(`best_float`: bf16 where engine/kernels.c has a bf16 kind, its KV cache and vocoder bf16 too; else fp32) — what
limit_fraction is measured against — and at the engine's own path.
"""
from __future__ import annotations

import time
import warnings

from engine.units import TOKENS_PER_SECOND

PEAK_N = 2048                      # square GEMM side for the peak (a size every BLAS runs at its best)
PEAK_MIN_N = 256                   # the first side tried
PEAK_DTYPES = ("fp32", "bf16", "int8")   # every CPU dtype the engine can run its GPT linears in
PEAK_CALL_S = 0.5                  # s: a slower call stops the doubling
PEAK_REPS = 5                      # best of this many timed calls
COPY_BYTES = 512 << 20             # the bandwidth copy's source (and its destination), and the read pass's:
COPY_REPS = 5                      # far beyond any cache; best of this many passes
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "int8": 1}
PEAK_KINDS = {"fp32": ("f32", "f32_512"), "bf16": ("bf16", "amx_bf16"), "int8": ("i8", "amx_i8")}   # the kinds that
# multiply a dtype's operands as they are (weight-only int8 widens its weights to fp32: a rounded fp32 product)
PROBE_TOKENS = 256                 # tokens decoded by Decoder + Vocos to count their FLOPs
PROFILE_STEPS = 128                # decode steps per row in the per-step profile
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::_int_mm", "aten::bmm",   # profiler ops counted as GEMM
            "mkldnn::_linear_pointwise")                                # (oneDNN packed: engine.cpu.PackedLinear)
GEMM_RANGES = ("gemm",)            # record_function ranges counted as GEMM (engine.kernels.GEMM_RANGE: our kernel)
RANGES = ("attention", "sampling")   # record_function ranges the engine marks (engine/llama.py, generate.py)


def peak_gemm(dtype: str, threads: int) -> float:
    """Best FLOP/s (int8: OP/s) of a square GEMM in `dtype` (fp32 | bf16 | int8) on `threads` CPU threads, over
    every kernel the engine can call for it — torch's (MKL's sgemm, oneDNN's bf16, _int_mm), oneDNN's packed linear
    (fp32) and each kind of engine/kernels.c that multiplies in that dtype (PEAK_KINDS) — the fastest is the honest
    peak: the side doubles from PEAK_MIN_N while one call takes under PEAK_CALL_S, up to PEAK_N (a dtype the CPU
    has no fast kernel for stops early instead of taking minutes); best of PEAK_REPS calls at the last size."""
    import torch

    from engine import kernels
    from engine.cpu import PackedLinear, kind_linear, onednn_available

    torch.set_num_threads(threads)

    def call(n: int, kernel: str):
        g = torch.Generator().manual_seed(n)                              # the same operands for every kernel
        if dtype == "int8" and kernel == "blas":
            a = torch.randint(-127, 128, (n, n), generator=g, dtype=torch.int8)
            w = torch.randint(-127, 128, (n, n), generator=g, dtype=torch.int8)
            return lambda: torch._int_mm(a, w.t())                        # as Int8Linear calls it: weight [N, K]
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        if kernel != "blas":                                              # b as the weight [N, K], packed once
            lin = PackedLinear(b) if kernel == "onednn" else kind_linear(kernel)(b)
            return lambda: lin(a)
        t = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        a, b = a.to(t), b.to(t)
        return lambda: a @ b.t()                                          # a linear's product: x @ weight.T

    names = ("blas",) + ("onednn",) * (dtype == "fp32" and onednn_available())
    names += tuple(k for k in PEAK_KINDS[dtype] if k in kernels.kinds())
    return max(_peak(lambda n, k=k: call(n, k)) for k in names)


def memory_bandwidth(threads: int) -> float:
    """Bytes per second of a STREAM-like copy on `threads` threads: dst[:] = src over COPY_BYTES of fp32, read and
    written bytes counted (2 x COPY_BYTES), best of COPY_REPS after one copy that pages both in."""
    import torch

    torch.set_num_threads(threads)
    src = torch.ones(COPY_BYTES // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(COPY_REPS):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return 2 * COPY_BYTES / best


def read_bandwidth(threads: int) -> float:
    """Bytes per second of a read-only pass on `threads` threads: the sum of COPY_BYTES of fp32 (every byte read
    once, nothing written: as a decode step reads its weights and KV cache), best of COPY_REPS after one pass that
    pages it in."""
    import torch

    torch.set_num_threads(threads)
    src = torch.ones(COPY_BYTES // 4)
    src.sum()
    best = float("inf")
    for _ in range(COPY_REPS):
        t0 = time.perf_counter()
        src.sum()
        best = min(best, time.perf_counter() - t0)
    return COPY_BYTES / best


def best_float() -> str:
    """The best float dtype this CPU runs exactly (engine/cpupath.py's float paths): bf16 where engine/kernels.c
    has a bf16 kind here (AVX512_BF16 or AMX), else fp32."""
    from engine import kernels

    return "bf16" if {"bf16", "amx_bf16"} & set(kernels.kinds()) else "fp32"


def engine_arithmetic(engine) -> dict:
    """What the roofline of an engine needs: its weights' bytes, its KV cache's bytes (per value), the dtype its
    GPT linears multiply in and its Decoder + Vocos's (engine/vocoder.py)."""
    import torch

    weights = "int8" if engine.opts.int8 else engine.dtype
    kv = torch.empty(0, dtype=engine.model.llama.attention.kv_dtype or engine.model.dtype).element_size()
    return {"weights": DTYPE_BYTES[weights], "kv": kv, "compute": "int8" if int8_compute(engine) else engine.dtype,
            "vocoder": getattr(engine, "vocoder", "fp32")}


def at_best_float() -> dict:
    """engine_arithmetic of the best float path this CPU has (best_float): bf16 weights, KV cache and vocoder, or
    fp32."""
    d = best_float()
    return {"weights": DTYPE_BYTES[d], "kv": DTYPE_BYTES[d], "compute": d, "vocoder": d}


def roofline(s, head_cells: int, prompt_lens: list[int], tokens: list[int], batch: int, bandwidth: float,
             peaks: dict, arithmetic: dict, cost: dict) -> dict:
    """The roofline (module docstring) of a workload — rows of these prompt lengths and generated token counts,
    decoded `batch` rows a step — for GPT shape `s` (head_cells = Q·V code-head outputs) at `arithmetic`
    (engine_arithmetic or at_best_float), bandwidth (read_bandwidth) in bytes/s, peaks in GFLOP/s by dtype, cost
    from flops_per_audio_s (its Decoder + Vocos): {"ceiling_audio_s", "decode_bound": "memory" | "compute",
    "decode_step_ms": a bound step of `batch` rows, "step_mb": {"weights", "kv"} the bytes a step reads (its mean),
    "seconds": {decode, prefill, decoder_vocos}, "weights_only": the same roofline without the KV cache's bytes
    ({"ceiling_audio_s", "decode_bound", "decode_step_ms"})}."""
    per_layer = s.hidden * (s.heads + 2 * s.kv_heads) * s.head_dim + s.heads * s.head_dim * s.hidden \
        + 3 * s.hidden * s.ffn
    params, heads = per_layer * s.layers, head_cells * s.hidden
    peak = peaks[arithmetic["compute"]] * 1e9
    kv_position = 2 * s.layers * s.kv_heads * s.head_dim * arithmetic["kv"]         # bytes a key position holds
    keys = sum(sum(range(L + 1, L + T)) for L, T in zip(prompt_lens, tokens))       # step at position p: p + 1
    steps = sum(T - 1 for T in tokens) / batch                                       # full steps of `batch` rows
    weights = steps * (params * arithmetic["weights"] + heads * 4)
    compute = (2 * params * batch * steps + 4 * s.layers * s.heads * s.head_dim * keys) / peak \
        + 2 * heads * sum(tokens) / (peaks["fp32"] * 1e9)
    prefill = sum(max(params * arithmetic["weights"] / bandwidth, 2 * params * L / peak) for L in prompt_lens)
    audio_s = sum(tokens) / TOKENS_PER_SECOND
    vocoder = cost["decoder_vocos"] * audio_s / peaks[arithmetic.get("vocoder", "fp32")]

    def bound(memory: float) -> dict:
        decode = max(memory, compute)
        return {"ceiling_audio_s": audio_s / (decode + prefill + vocoder),
                "decode_bound": "memory" if memory >= compute else "compute",
                "decode_step_ms": 1e3 * decode / steps if steps else 0.0, "decode": decode}

    full, light = bound((weights + keys * kv_position) / bandwidth), bound(weights / bandwidth)
    return {**{k: v for k, v in full.items() if k != "decode"},
            "step_mb": {"weights": weights / steps / 1e6 if steps else 0.0,
                        "kv": keys * kv_position / steps / 1e6 if steps else 0.0},
            "seconds": {"decode": full["decode"], "prefill": prefill, "decoder_vocos": vocoder},
            "weights_only": {k: v for k, v in light.items() if k != "decode"}}


def dtypes_of(engines) -> tuple[str, ...]:
    """The dtypes whose peak GEMM the ceilings of these engines need (PEAK_DTYPES order): fp32 (heads, Decoder,
    Vocos), the best float this CPU has (the roofline's), each engine's dtype and its vocoder's, int8 for an engine
    that multiplies in int8 — the others are not measured (minutes saved)."""
    need = {"fp32", best_float()} | {e.dtype for e in engines} | {getattr(e, "vocoder", "fp32") for e in engines} \
        | {"int8" for e in engines if int8_compute(e)}
    return tuple(d for d in PEAK_DTYPES if d in need)


def int8_compute(engine) -> bool:
    """Whether the engine's GPT linears multiply in int8 (W8A8: engine.cpu.Int8Linear, engine/kernels.c's i8);
    weight-only --int8 (q8, q8_512) stores int8 weights but multiplies in fp32 (its ceiling is the fp32 peak)."""
    from engine.cpu import Int8Linear
    from engine.kernels import GemmW8A8Linear

    return engine.opts.int8 and isinstance(engine.model.llama.layers[0].wqkv, (Int8Linear, GemmW8A8Linear))


def side_limits(name: str, engine, shape_cost: tuple, batch: int, bandwidth: float, peaks: dict,
                measured: float, log) -> dict:
    """A side's limit fractions against the roofline at the best float dtype (the acceptance's) and at its own
    arithmetic — each with the KV cache's bytes (`limit_fraction`, `path_limit_fraction`) and with the weights'
    alone (`…_weights_only`) — printed on a line each naming the side's path; bandwidth: read_bandwidth's.
    {"path", "ceiling_audio_s", "limit_fraction", "decode_bound", "step_mb", and the same with "_weights_only"
    and with "path_" before}.  shape_cost: (prompt lengths, tokens, cost)."""
    lens, tokens, cost = shape_cost
    m = engine.model
    path = engine.path.name if engine.path is not None else engine.version.split("-cpu-")[-1]
    out: dict = {"path": path}
    for key, what, arithmetic in (("", f"the best float ({best_float()})", at_best_float()),
                                  ("path_", "its own arithmetic", engine_arithmetic(engine))):
        roof = roofline(m.llama.s, m.Q * m.V, lens, tokens, batch, bandwidth, peaks, arithmetic, cost)
        light = roof["weights_only"]
        fraction, fraction_light = measured / roof["ceiling_audio_s"], measured / light["ceiling_audio_s"]
        out.update({f"{key}ceiling_audio_s": round(roof["ceiling_audio_s"], 3),
                    f"{key}limit_fraction": float(f"{fraction:.4g}"),
                    f"{key}decode_bound": roof["decode_bound"],
                    f"{key}step_mb": {k: round(v, 1) for k, v in roof["step_mb"].items()},
                    f"{key}ceiling_audio_s_weights_only": round(light["ceiling_audio_s"], 3),
                    f"{key}limit_fraction_weights_only": float(f"{fraction_light:.4g}"),
                    f"{key}decode_bound_weights_only": light["decode_bound"]})
        mb = roof["step_mb"]
        log(f"{name} ({path}): roofline at {what}, batch {batch}: with the KV cache {roof['ceiling_audio_s']:.2f} "
            f"audio-s/wall-s (decode {roof['decode_bound']}-bound, {roof['decode_step_ms']:.1f} ms a step reading "
            f"{mb['weights']:.0f} MB of weights + {mb['kv']:.0f} MB of KV cache), weights only "
            f"{light['ceiling_audio_s']:.2f} ({light['decode_bound']}-bound); ours {measured:.3f} = "
            f"{key}limit_fraction {fraction:.3f} (weights only {fraction_light:.3f})")
    return out


def _peak(make) -> float:
    """Best FLOP/s of make(n)() (a square GEMM of side n), n doubling as peak_gemm says."""
    n = PEAK_MIN_N
    while True:
        fn = make(n)
        t0 = time.perf_counter()
        fn()                                                              # also the warm-up
        if n >= PEAK_N or time.perf_counter() - t0 > PEAK_CALL_S:
            break
        n *= 2
    best = float("inf")
    for _ in range(PEAK_REPS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def gpt_flops(shape, prompt_lens: list[int], tokens: list[int], head_cells: int) -> dict:
    """FLOPs of the GPT for rows with these prompt lengths and generated token counts: projections, attention
    (every step attends over its row's prefix) and the code heads (head_cells = Q·V outputs), summed."""
    s = shape
    per_layer = s.hidden * (s.heads + 2 * s.kv_heads) * s.head_dim + s.heads * s.head_dim * s.hidden \
        + 2 * s.hidden * s.ffn + s.ffn * s.hidden                     # weights of wqkv, wo, w13, w2
    lin = att = head = 0
    for L, T in zip(prompt_lens, tokens):
        positions = L + T - 1                                          # prefill L, then T-1 decode steps
        lin += 2 * per_layer * s.layers * positions
        # step at position p attends over p+1 keys: q·k and p·v, 2 FLOPs each per (head, dim)
        att += 4 * s.layers * s.heads * s.head_dim * sum(range(1, positions + 1))
        head += 2 * head_cells * s.hidden * T
    return {"linear": lin, "attention": att, "heads": head}


def vocoder_flops_per_audio_s(loaded, hidden: int) -> float:
    """Decoder + Vocos FLOPs per audio second, counted on one decode of PROBE_TOKENS hidden states [T, hidden]."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from engine.units import SAMPLE_RATE, samples_for_tokens
    from engine.vocoder import decode

    with FlopCounterMode(display=False) as fc:
        decode(loaded, [torch.zeros(PROBE_TOKENS, hidden)])
    return fc.get_total_flops() / (samples_for_tokens(PROBE_TOKENS) / SAMPLE_RATE)


def flops_per_audio_s(engine, prompt_lens: list[int], tokens: list[int]) -> dict:
    """Per audio second of the workload: GPT linears, attention, heads, Decoder + Vocos, and the total."""
    m = engine.model
    g = gpt_flops(m.llama.s, prompt_lens, tokens, m.Q * m.V)
    audio_s = sum(tokens) / TOKENS_PER_SECOND
    out = {k: v / audio_s for k, v in g.items()}
    out["decoder_vocos"] = vocoder_flops_per_audio_s(engine.loaded, m.llama.s.hidden)
    out["total"] = sum(out.values())
    return {k: round(v / 1e9, 3) for k, v in out.items()}             # GFLOP per audio second


def ceiling_audio_s(cost: dict, peaks: dict, dtype: str, int8: bool = False) -> float:
    """Compute-bound audio seconds per wall second: cost (GFLOP per audio second, flops_per_audio_s) at the peak
    GEMM rates (GFLOP/s per dtype) of the dtype each part runs in."""
    lin_peak = peaks["int8"] if int8 else peaks[dtype]
    seconds = cost["linear"] / lin_peak + cost["attention"] / peaks[dtype] \
        + (cost["heads"] + cost["decoder_vocos"]) / peaks["fp32"]
    return 1.0 / seconds


def step_profile(engine, texts: list[str], forced: list[int], voice: str, batch: int) -> dict:
    """ms per decode step of `batch` rows (the workload's first, each cut to PROFILE_STEPS tokens), split by the
    torch profiler into GEMM (block projections and heads), attention, sampling (logits processing + draw) and
    other (norms, RoPE, embeddings, Python and scheduling); plus Decoder + Vocos per audio second (in the engine's
    vocoder dtype), timed.  Where the decode step is one engine/kernels.c call (its own timers): what its parts
    achieved — `step_gemm_gflops` (the block projections' FLOPs over their time) and `step_attention_gbs` (the KV
    cache bytes the decode steps read over the attention's time), to set beside the peak and the read bandwidth."""
    from torch.profiler import ProfilerActivity, profile

    from engine.api import Request
    from engine.scheduler import Scheduler
    from engine.vocoder import decode

    n = min(batch, len(texts))
    reqs = [Request(key=f"p{i}", text=texts[i], spk_emb=voice, seed=i, forced_tokens=min(forced[i], PROFILE_STEPS))
            for i in range(n)]
    rows = [engine._row(r, i) for i, r in enumerate(reqs)]
    sched = Scheduler(engine.model, n, exact=engine.opts.device == "cpu")
    steps = []
    sched.step_hook = lambda b: steps.append(1)
    fused = getattr(engine.model.llama.attention, "decode", None)       # engine.kernels.DecodeStep: one C call
    before = fused.times.clone() if fused is not None else None          # a step, timing its own phases
    with warnings.catch_warnings(), profile(activities=[ProfilerActivity.CPU]) as prof:
        warnings.simplefilter("ignore")                                  # "clears events at the end of each cycle"
        t0 = time.perf_counter()
        done = list(sched.run(rows))
        wall = time.perf_counter() - t0
    ev = {e.key: e for e in prof.key_averages()}
    us = lambda k, attr="self_cpu_time_total": getattr(ev[k], attr) if k in ev else 0.0   # noqa: E731
    parts = {r: us(r, "cpu_time_total") for r in RANGES}
    parts["gemm"] = sum(us(k) for k in GEMM_OPS) + sum(us(r, "cpu_time_total") for r in GEMM_RANGES)
    achieved = {}
    if fused is not None:                                                # its GEMMs and attention (s -> us)
        spent = (fused.times - before).tolist()
        parts["gemm"] += spent[0] * 1e6
        parts["attention"] += spent[1] * 1e6
        s = engine.model.llama.s
        params = s.layers * (s.hidden * (s.heads + 2 * s.kv_heads) * s.head_dim + s.heads * s.head_dim * s.hidden
                             + 3 * s.hidden * s.ffn)
        row_steps = sum(r.tokens - 1 for r in done)
        keys = sum(sum(range(r.prompt_len + 1, r.prompt_len + r.tokens)) for r in done)   # as roofline counts
        kv = 2 * s.layers * s.kv_heads * s.head_dim * fused.kv_dtype.itemsize * keys
        achieved = {"step_gemm_gflops": round(2 * params * row_steps / spent[0] / 1e9, 1) if spent[0] else 0.0,
                    "step_attention_gbs": round(kv / spent[1] / 1e9, 2) if spent[1] else 0.0}
    parts["other"] = max(0.0, wall * 1e6 - sum(parts.values()))
    t0 = time.perf_counter()
    decode(engine.loaded, [r.hiddens for r in done], getattr(engine, "vocoder", "fp32"))
    dec = time.perf_counter() - t0
    audio = sum(r.tokens for r in done) / TOKENS_PER_SECOND
    k = len(steps)
    out = {f"{p}_ms": round(v / 1e3 / k, 2) for p, v in parts.items()}
    out.update(rows=n, steps=k, step_ms=round(wall * 1e3 / k, 2), profiled_wall_s=round(wall, 2),
               decoder_vocos_s_per_audio_s=round(dec / audio, 4), **achieved)
    return out


def format_profile(p: dict) -> str:
    total = p["step_ms"]
    parts = ", ".join(f"{name} {p[name + '_ms']:.1f} ms ({p[name + '_ms'] / total:.0%})"
                      for name in ("gemm", "attention", "sampling", "other"))
    rates = (f"; the step's GEMMs at {p['step_gemm_gflops']:.1f} GFLOP/s, its attention reading the KV cache at "
             f"{p['step_attention_gbs']:.1f} GB/s" if "step_gemm_gflops" in p else "")
    return (f"per-step profile ({p['rows']} rows, {p['steps']} steps, {total:.1f} ms/step): {parts}; "
            f"Decoder+Vocos {p['decoder_vocos_s_per_audio_s']:.3f} s per audio s{rates}")


def format_bandwidth(bandwidth: float, read: float | None = None) -> str:
    copy = f"memory bandwidth (STREAM-like copy, {COPY_BYTES >> 20} MiB): {bandwidth / 1e9:.1f} GB/s"
    return copy if read is None else f"{copy}, read-only {read / 1e9:.1f} GB/s"


def format_peaks(peaks: dict) -> str:
    """Peak GEMM rates (giga-operations per second by dtype) as one phrase: int8 counts integer ops."""
    return ", ".join(f"{d} {v:.1f} {'GOP/s' if d == 'int8' else 'GFLOP/s'}" for d, v in peaks.items())
