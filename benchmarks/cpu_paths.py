"""Every CPU path this machine has (engine/cpupath.py), one decode step each, and oneDNN's bf16 linear beside ours.

    python -m benchmarks.cpu_paths                          # ChatTTS's GPT shape, 4 and 32 rows over 400 keys, 1 thread
    python -m benchmarks.cpu_paths --threads 2 --rows 4 32 --keys 100 400 --rounds 7 --json F

One process, random weights of the real shape (hidden 768, 20 layers, 12 heads, FFN 3072; engine.cpupath's
random_state), each path's whole decode step (engine.kernels.DecodeStep: every layer and the final norm) on `rows`
rows each attending over `keys` keys of its KV cache (the path's dtype), the paths' steps in turn `--rounds` times,
the best of each with its split (GEMM, attention, the rest: the step's own timers).  Then the linears alone at the
decode step's shapes (the four projections of one layer, distinct weights of 20 layers streamed): our bf16 kind
against torch's bf16 linear (oneDNN, AVX512_CORE_BF16 here; AMX on an AMX CPU), which keeps a row's bits only at
some call sizes — what an `--exact off` would run (docs/architecture.md, "CPU paths") — and, where the CPU has
AMX, our amx_bf16 kind beside them.  Each size ends with every path's step as a multiple of the fastest fp32 path's
(`vs_fp32`: fp32-avx512 where the CPU has it, else fp32-avx2): on an AMX CPU, bf16-amx's is the number issue 43
asks >= 2.5 of.  Compare paths within one run, not across runs: on a shared machine the neighbours' load moves
every number.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHAPE = dict(hidden=768, layers=20, heads=12, kv_heads=12, ffn=3072, rope_theta=1e4, eps=1e-6, max_pos=4096)


def step_times(paths, s, rows: int, keys: int, rounds: int) -> dict:
    """{path name: {"step_ms", "gemm_ms", "attention_ms", "rest_ms"}} of the best of `rounds` steps each."""
    import torch

    from engine.cpu import pack_path
    from engine.cpupath import random_state
    from engine.llama import KVCache, build_llama

    state = random_state(s)
    steps = {}
    for p in paths:
        step = pack_path(build_llama(s, state), p).attention.decode
        cache = KVCache(s, rows, keys + 1, "cpu", step.kv_dtype)
        x = torch.randn(rows, 1, s.hidden, generator=torch.Generator().manual_seed(0))
        args = (x, torch.full((rows, 1), keys - 1), cache, torch.arange(rows), [keys] * rows)
        step(*args)                                                          # warm-up: pages, caches
        steps[p.name] = (step, args, [])
    for _ in range(rounds):
        for step, args, runs in steps.values():
            before = step.times.clone()
            t0 = time.perf_counter()
            step(*args)
            runs.append((time.perf_counter() - t0, (step.times - before).tolist()))
    out = {}
    for name, (_, _, runs) in steps.items():
        wall, (gemm, attention, rest) = min(runs)
        out[name] = {"step_ms": round(wall * 1e3, 4), "gemm_ms": round(gemm * 1e3, 4),       # 0.1 us: a step
                     "attention_ms": round(attention * 1e3, 4), "rest_ms": round(rest * 1e3, 4)}  # of 1 layer too
    return out


def fp32_baseline(times: dict) -> str | None:
    """The fastest-ISA fp32 path timed (fp32-avx512, else fp32-avx2): what the others are a multiple of."""
    return next((p for p in ("fp32-avx512", "fp32-avx2") if p in times), None)


def bf16_linears(s, rows: int, rounds: int) -> dict:
    """ms for one layer's four projections at `rows` rows (20 layers' distinct weights in turn, streamed from
    memory as in a step): ours ("bf16" kind, "amx_bf16" where the CPU has them) and torch's bf16 linear (oneDNN),
    the best of `rounds` passes."""
    import torch
    import torch.nn.functional as F

    from engine import kernels

    g = torch.Generator().manual_seed(1)
    C, D, Fd = s.hidden, s.head_dim, s.ffn
    shapes = [((s.heads + 2 * s.kv_heads) * D, C), (C, s.heads * D), (2 * Fd, C), (C, Fd)]
    weights = [[torch.randn(n, k, generator=g) * 0.02 for n, k in shapes] for _ in range(s.layers)]
    xs = {k: torch.randn(rows, k, generator=g) for _, k in shapes}
    sides = {"torch_bf16": [(F.linear, xs[w.shape[1]].bfloat16(), w.bfloat16()) for ws in weights for w in ws]}
    for kind in ("bf16", "amx_bf16"):
        if kind in kernels.kinds():
            sides[f"ours_{kind}"] = [(lambda x, lin: lin(x), xs[w.shape[1]], kernels.GemmBf16Linear(w, kind))
                                     for ws in weights for w in ws]
    best = {name: float("inf") for name in sides}
    for _ in range(rounds):
        for name, calls in sides.items():
            t0 = time.perf_counter()
            for fn, x, w in calls:
                fn(x, w)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: round(t * 1e3 / s.layers, 3) for name, t in best.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, nargs="+", default=[4, 32])
    ap.add_argument("--keys", type=int, nargs="+", default=[400])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layers", type=int, default=SHAPE["layers"], help="of the GPT shape (fewer: a quicker run)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if min(args.rows + args.keys) < 1 or args.rounds < 1 or args.layers < 1:
        ap.error("--rows, --keys, --rounds and --layers must be at least 1")

    import torch

    from engine import kernels
    from engine.cpupath import PATHS
    from engine.llama import LlamaShape

    torch.set_num_threads(args.threads)
    s = LlamaShape(**{**SHAPE, "layers": args.layers})
    paths = [p for p in PATHS if p.kind in kernels.kinds() and p.heads in kernels.kinds()]
    missing = [p.name for p in PATHS if p not in paths]
    print(f"paths here: {', '.join(p.name for p in paths) or 'none'}"
          + (f" (not here: {', '.join(missing)})" if missing else "") + f"; {args.threads} thread(s)", flush=True)
    result: dict = {"threads": args.threads, "layers": args.layers, "paths": [p.name for p in paths], "steps": [],
                    "bf16_linears": []}
    for rows in args.rows:
        for keys in args.keys:
            times = step_times(paths, s, rows, keys, args.rounds)
            result["steps"].append({"rows": rows, "keys": keys, "paths": times})
            for name, t in times.items():
                print(f"{rows:3d} rows, {keys} keys, {name:12s} {t['step_ms']:8.1f} ms a step: gemm {t['gemm_ms']:.1f}"
                      f", attention {t['attention_ms']:.1f}, rest {t['rest_ms']:.1f}", flush=True)
            if base := fp32_baseline(times):
                ratios = {name: round(times[base]["step_ms"] / t["step_ms"], 3) for name, t in times.items()}
                result["steps"][-1]["vs_fp32"] = {"path": base, "ratio": ratios}
                print(f"{rows:3d} rows, {keys} keys, vs {base} (its step / each path's): "
                      + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()), flush=True)
        lin = bf16_linears(s, rows, args.rounds)
        result["bf16_linears"].append({"rows": rows, "ms_per_layer": lin})
        print(f"{rows:3d} rows, one layer's projections in bf16: "
              + ", ".join(f"{k} {v:.3f} ms" for k, v in lin.items()), flush=True)
    if args.json:
        from engine.atomic import write_bytes

        write_bytes(args.json, (json.dumps(result, indent=2) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
