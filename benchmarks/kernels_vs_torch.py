"""engine/kernels.c against what torch itself offers, at the ChatTTS GPT's shape, in one run.

    python -m benchmarks.kernels_vs_torch                           # full shape, rows 1 4 16 32, threads 1 2
    python -m benchmarks.kernels_vs_torch --rows 4 16 --threads 2 --repeat 3 --json F
    python -m benchmarks.kernels_vs_torch --no-compile              # skip torch.compile (no C++ compiler, or quick)

Random weights at the full GPT shape (hidden 768, 20 layers, 12 heads, FFN 3072; built directly, no assets), B
rows, each with a KV cache of --keys keys (every row decodes at position keys-1, so every path attends over the
same `keys` keys).  Two levels, every case timed in the same run, the variants alternating:

- **linears**: the 80 block projections of the 20 layers (distinct weights: streamed from memory as a decode step
  streams them) on B rows.  fp32: `ours` (engine.kernels.GemmLinear) against `onednn` (engine.cpu.PackedLinear)
  and `mkl` (F.linear on the dense weight).  int8 weight-only, the same int8 weights and per-channel scales:
  `ours_int8` (GemmInt8Linear) against `aten_int8` (torch.ops.aten._weight_int8pack_mm(x, w [N, K] int8,
  scales [N]) with fp32 x and scales, as ours) and `aten_int8_bf16` (the same with x and scales rounded to
  bf16: the only dtype torch 2.11's CPU kernel vectorizes; not our numerics).
- **step**: a decode step of the whole GPT (every layer and the final norm; the cache write, RoPE, attention
  included).  `ours` (engine.kernels.DecodeStep: one C call) against the per-layer torch path: `eager_onednn`
  (the engine's fallback: engine.llama.Llama.forward, oneDNN packed linears, per-row SDPA), `eager` (the same
  Block.forward on the dense MKL linears, one masked SDPA call over all rows: what CUDA runs) and `compile`
  (that Block.forward through torch.compile (inductor), one compiled graph for all 20 layers); int8:
  `ours_int8` (DecodeStep on int8 weights) against `eager_aten_int8` and `eager_aten_int8_bf16` (Block.forward,
  masked SDPA, projections through _weight_int8pack_mm in fp32 / bf16 activations).

Each number is the median over up to --reps calls after --warmup calls, the variants of a case taking turns call
by call (a variant leaves the turns once its calls took BUDGET_S), and with --repeat K the median of K such
runs; `ratio` = variant time / ours (fp32) or / ours_int8 (int8): above 1, ours is faster.  Every variant's
output is checked against ours (max abs difference, `max_diff`; the run fails beyond TOLERANCE, BF16_TOLERANCE
for the bf16 variants).  Compile time is reported, not counted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch.nn as nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HIDDEN, LAYERS, HEADS, FFN = 768, 20, 12, 3072    # ChatTTS's GPT (engine.assets random-full)
KEYS = 256                         # keys in every row's cache (a step attends over all of them)
WARMUP = 3                         # untimed calls per case
REPS = 10                          # timed calls per case (median)
FP32 = ("ours", "onednn", "mkl")
INT8 = ("ours_int8", "aten_int8", "aten_int8_bf16")
STEP32 = ("ours", "eager_onednn", "eager", "compile")
STEP8 = ("ours_int8", "eager_aten_int8", "eager_aten_int8_bf16")
TOLERANCE = 1e-2                   # max |variant - ours| a variant may differ by (fp32 sums in other orders;
                                   # int8: the same quantized weights) before the run fails
BF16_TOLERANCE = 0.25              # the same for variants that round the activations to bf16 (*_bf16)
BUDGET_S = 1.5                     # a variant stops being timed once its timed calls took this long (>= 3 calls)


def build(hidden: int, layers: int, heads: int, ffn: int, keys: int, seed: int = 0):
    """A Llama with random weights at this shape (norm weights ~1, projections ~N(0, 0.02)) and RoPE tables."""
    import torch

    from engine.llama import Llama, LlamaShape

    s = LlamaShape(hidden=hidden, layers=layers, heads=heads, kv_heads=heads, ffn=ffn, rope_theta=10_000.0,
                   eps=1e-6, max_pos=max(keys, 64))
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = Llama(s)
    state = {}
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            state[name] = 1 + 0.1 * torch.randn(p.shape, generator=g)
        else:
            state[name] = 0.02 * torch.randn(p.shape, generator=g)
    model.load_state_dict(state, strict=False, assign=True)
    model.rope_tables("cpu")
    return model.eval().requires_grad_(False)


class AtenInt8Linear(nn.Module):
    """Weight-only int8 through torch.ops.aten._weight_int8pack_mm(x [M, K], w [N, K] int8, scales [N]) (the int8
    weights and scales engine.cpu.quantize_weight makes: the same as GemmInt8Linear's).  x and scales fp32, or
    with `bf16` both rounded to bf16 (the output back to fp32): torch 2.11's CPU kernel is vectorized for bf16
    activations only (fp32 takes a scalar loop)."""

    def __init__(self, linear, bf16: bool = False):
        import torch

        from engine.cpu import quantize_weight

        super().__init__()
        wq, scale = quantize_weight(linear.weight)
        self.dtype = torch.bfloat16 if bf16 else torch.float32
        self.register_buffer("wq", wq)                                             # [N, K] int8
        self.register_buffer("scale", scale.to(self.dtype))                        # [N]
        self.in_features, self.out_features = wq.shape[1], wq.shape[0]

    def forward(self, x):                                                         # x [..., K] fp32 -> [..., N]
        import torch

        x2 = x.reshape(-1, self.in_features).to(self.dtype)
        y = torch.ops.aten._weight_int8pack_mm(x2, self.wq, self.scale).float()
        return y.view(*x.shape[:-1], self.out_features)


def variants(dense) -> dict:
    """{name: Llama} sharing dense's fp32 weights: mkl (dense itself), ours (GemmLinear + DecodeStep), onednn
    (PackedLinear), ours_int8 (GemmInt8Linear + DecodeStep), aten_int8 (AtenInt8Linear)."""
    import copy

    from engine import kernels
    from engine.cpu import PackedLinear, kind_linear, onednn_available, pack_linears

    def twin():                                   # a structural copy that shares every weight tensor
        return copy.deepcopy(dense, memo={id(t): t for t in list(dense.parameters()) + list(dense.buffers())})

    out = {"mkl": dense, "ours": pack_linears(twin(), kernels.GemmLinear),
           "ours_int8": pack_linears(twin(), kind_linear("q8"))}
    if onednn_available():
        out["onednn"] = pack_linears(twin(), PackedLinear)
    for name, bf16 in (("aten_int8", False), ("aten_int8_bf16", True)):
        aten = twin()
        for b in aten.layers:
            for n in kernels.PROJECTIONS:
                setattr(b, n, AtenInt8Linear(getattr(b, n), bf16))
        out[name] = aten
    from engine.attention import CStep

    if not (isinstance(out["ours"].attention, CStep) and isinstance(out["ours_int8"].attention, CStep)):
        raise RuntimeError("engine/kernels.c's decode step does not support this shape")
    return out


def linear_cases(models: dict, B: int, int8: bool) -> dict:
    """{variant: fn() -> [80 outputs]}: the 80 block projections of 20 layers on B rows (distinct weights)."""
    import torch

    from engine import kernels

    names = INT8 if int8 else FP32
    g = torch.Generator().manual_seed(B)
    lin0 = [getattr(b, n) for b in models["mkl"].layers for n in kernels.PROJECTIONS]
    xs = [torch.randn(B, lin.in_features, generator=g) for lin in lin0]
    cases = {}
    for name in names:
        if name in models:
            lins = [getattr(b, n) for b in models[name].layers for n in kernels.PROJECTIONS]
            cases[name] = lambda lins=lins: [f(x) for f, x in zip(lins, xs)]
    return cases


def step_cases(models: dict, B: int, keys: int, int8: bool, compile_: bool) -> tuple[dict, dict]:
    """({variant: fn() -> hidden [B, 1, C]}, {variant: compile seconds}): one decode step of B rows at position
    keys-1 over caches already holding keys-1 keys per row."""
    import torch

    from engine.attention import Batched
    from engine.llama import KVCache

    dense = models["mkl"]
    s = dense.s
    g = torch.Generator().manual_seed(1000 + B)
    x = torch.randn(B, 1, s.hidden, generator=g)                           # [B, 1, C]
    pos = torch.full((B, 1), keys - 1, dtype=torch.long)                   # [B, 1]
    slots, lengths = torch.arange(B), [keys] * B                          # every row over all `keys` keys
    cache = KVCache(s, B, keys, "cpu", torch.float32)
    for t in cache.k + cache.v:
        t.copy_(torch.randn(t.shape, generator=g))

    def per_row(m):                           # the engine's exact path: the model's strategy (chattts_step, per-row)
        return lambda: m(x, m.attention.begin(cache, pos, slots, lengths))

    def masked(m):                            # Block.forward, all rows in one masked SDPA (slots 0..B-1)
        return lambda: m(x, Batched().begin(cache, pos, None, lengths))

    if int8:
        return {"ours_int8": per_row(models["ours_int8"]), "eager_aten_int8": masked(models["aten_int8"]),
                "eager_aten_int8_bf16": masked(models["aten_int8_bf16"])}, {}
    cases = {"ours": per_row(models["ours"])}
    if "onednn" in models:
        cases["eager_onednn"] = per_row(models["onednn"])
    cases["eager"] = masked(dense)
    compiled_s = {}
    if compile_:
        call = Batched().begin(cache, pos, None, lengths)
        cases["compile"], compiled_s["compile"] = _compiled_step(dense, x, call)
    return cases, compiled_s


def _timed(cases: dict, warmup: int, reps: int) -> dict:
    """{variant: median seconds of a call}: warmup calls each, then up to reps rounds, one call of every variant
    per round (so a change in the machine's load hits them alike); a variant whose timed calls took BUDGET_S
    (after at least 3) leaves the rounds."""
    for fn in cases.values():
        for _ in range(warmup):
            t0 = time.perf_counter()
            fn()
            if time.perf_counter() - t0 > BUDGET_S / 3:                  # slow: one warm-up is enough
                break
    times: dict = {k: [] for k in cases}
    for _ in range(reps):
        for k, fn in cases.items():
            if len(times[k]) >= 3 and sum(times[k]) > BUDGET_S:
                continue
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _compiled_step(dense, x, call):
    """(fn, compile seconds): Llama.forward's layer loop with Block.forward through torch.compile (one graph
    for every layer: the weights are inputs), the final norm eager; `call` a Batched one."""
    import torch

    from engine.llama import _rms_norm

    block = torch.compile(type(dense.layers[0]).forward, dynamic=False)
    rope = dense.cos[call.pos].unsqueeze(2), dense.sin[call.pos].unsqueeze(2)

    def step():
        h = x
        for layer, kv in zip(dense.layers, zip(call.cache.k, call.cache.v)):
            h = block(layer, h, rope, kv, call)
        return _rms_norm(h, dense.norm.weight, dense.s.eps)

    t0 = time.perf_counter()
    with torch.no_grad():
        step()
    return step, time.perf_counter() - t0


def _diff(a, b) -> float:
    if isinstance(a, list):
        return max(float((p - q).abs().max()) for p, q in zip(a, b))
    return float((a - b).abs().max())


def run_once(models: dict, rows: list[int], threads: list[int], keys: int, compile_: bool, warmup: int, reps: int,
             levels: list[str]) -> list[dict]:
    """One timed pass over every (level, kind, threads, rows) case: [{level, kind, threads, rows, ms: {variant:
    ms}, max_diff: {variant: x}, compile_s: {...}}]."""
    import torch

    out = []
    with torch.no_grad():
        for th in threads:
            torch.set_num_threads(th)
            for B in rows:
                for level in levels:
                    for int8 in (False, True):
                        if level == "linears":
                            cases, comp = linear_cases(models, B, int8), {}
                        else:
                            cases, comp = step_cases(models, B, keys, int8, compile_)
                        base = "ours_int8" if int8 else "ours"
                        ref = cases[base]()
                        diffs = {k: _diff(fn(), ref) for k, fn in cases.items() if k != base}
                        ms = {k: v * 1e3 for k, v in _timed(cases, warmup, reps).items()}
                        out.append({"level": level, "kind": "int8" if int8 else "fp32", "threads": th, "rows": B,
                                    "ms": ms, "max_diff": diffs, "compile_s": comp})
                        print(f"{level} {out[-1]['kind']} threads {th} rows {B}: "
                              + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items()), file=sys.stderr, flush=True)
                        del cases
    return out


def merge(runs: list[list[dict]]) -> list[dict]:
    """The median over runs of each case's ms per variant, with ratios to ours (or ours_int8)."""
    merged = []
    for cases in zip(*runs):
        c = dict(cases[0])
        c["ms"] = {k: round(statistics.median(r["ms"][k] for r in cases), 3) for k in c["ms"]}
        c["runs_ms"] = {k: [round(r["ms"][k], 3) for r in cases] for k in c["ms"]}
        c["max_diff"] = {k: max(r["max_diff"][k] for r in cases) for k in c["max_diff"]}
        base = c["ms"]["ours_int8" if c["kind"] == "int8" else "ours"]
        c["ratio"] = {k: round(v / base, 2) for k, v in c["ms"].items()}
        merged.append(c)
    return merged


def table(merged: list[dict]) -> str:
    lines = []
    for level in ("linears", "step"):
        for kind in ("fp32", "int8"):
            cs = [c for c in merged if c["level"] == level and c["kind"] == kind]
            if not cs:
                continue
            names = list(cs[0]["ms"])
            lines.append(f"{level} {kind}: ms per call (ratio to {names[0]})")
            lines.append(f"{'threads':>7} {'rows':>4} " + " ".join(f"{n:>22}" for n in names))
            for c in cs:
                cells = [f"{c['ms'][n]:10.2f} ({c['ratio'][n]:5.2f}x)" for n in names]
                lines.append(f"{c['threads']:>7} {c['rows']:>4} " + " ".join(f"{x:>22}" for x in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--keys", type=int, default=KEYS)
    ap.add_argument("--repeat", type=int, default=1, help="whole runs; each number is the median over them")
    ap.add_argument("--warmup", type=int, default=WARMUP)
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--levels", nargs="+", default=["linears", "step"], choices=["linears", "step"])
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--shape", type=int, nargs=4, default=[HIDDEN, LAYERS, HEADS, FFN],
                    metavar=("HIDDEN", "LAYERS", "HEADS", "FFN"), help="(tests: a tiny GPT)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    import torch

    from engine import kernels

    if not kernels.available():
        print("kernels_vs_torch: engine/kernels.c is not available here (needs AVX2+FMA and a C compiler)",
              file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    dense = build(*a.shape, keys=a.keys)
    models = variants(dense)
    runs = [run_once(models, a.rows, a.threads, a.keys, not a.no_compile, a.warmup, a.reps, a.levels)
            for _ in range(a.repeat)]
    merged = merge(runs)
    bad = [(c["level"], c["kind"], c["rows"], k, d) for c in merged for k, d in c["max_diff"].items()
           if not d <= (BF16_TOLERANCE if k.endswith("_bf16") else TOLERANCE)]
    print(table(merged))
    for c in merged:
        if c["compile_s"]:
            print(f"torch.compile: {c['threads']} threads, {c['rows']} rows: "
                  f"compiled in {c['compile_s']['compile']:.1f} s")
    result = {"shape": dict(zip(("hidden", "layers", "heads", "ffn"), a.shape)), "keys": a.keys,
              "repeat": a.repeat, "reps": a.reps, "torch": torch.__version__,
              "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": merged,
              "wall_s": round(time.perf_counter() - t_start, 1)}
    print(json.dumps(result), flush=True)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if bad:
        print(f"kernels_vs_torch: outputs disagree with ours beyond {TOLERANCE} ({BF16_TOLERANCE} for bf16): {bad}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
