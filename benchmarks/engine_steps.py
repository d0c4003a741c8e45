"""Decode-step time of our engine at given batch sizes (rows decoding together), one JSON line per case.

    python -m benchmarks.engine_steps --model random-full --threads 1 --batch 1 8
    python -m benchmarks.engine_steps --model random-full --device cuda --dtype bf16 --cuda-graphs --batch 64 128 256

Rows are prefilled with a ~60-token prompt, then `--steps` decode steps are timed after `--warmup` steps.
On CPU these modes are timed: `exact` (the engine's batch-invariant mode: one call padded to the next measured
batch-invariant size, per-row attention), `plain` (one call over all rows, batched attention: what CUDA runs) and
`hf` (the same-run baseline: transformers' LlamaModel inside ChatTTS, one decode step over a DynamicCache, as
upstream runs it, without upstream's logits processing) — compare modes within one run, not numbers across runs.
"""
from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=None, help="exact and/or plain (default: exact,plain on CPU)")
    a = ap.parse_args(argv)

    import torch

    from engine.api import EngineOptions, Request
    from engine.engine import Engine
    from engine.generate import DecodeBatch

    torch.set_num_threads(a.threads)
    engine = Engine.load(EngineOptions(model=a.model, device=a.device, dtype=a.dtype, int8=a.int8,
                                       cuda_graphs=a.cuda_graphs, max_batch=max(a.batch), threads=a.threads))
    voice = engine.sample_voice(1)
    text = "这是一个用来测量解码速度的句子，长度大约是六十个词元左右，足够用了。" * 2
    modes = a.modes or (["exact", "plain", "hf"] if a.device == "cpu" else ["plain", "hf"])
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    for B in a.batch:
        for mode in modes:
            if mode == "hf":
                ms, hf_dtype = hf_step_ms(engine, B, a.warmup, a.steps, sync)
                print(json.dumps({"model": a.model, "device": a.device, "dtype": hf_dtype, "threads": a.threads,
                                  "batch": B, "mode": mode, "step_ms": round(ms, 2),
                                  "ms_per_row_token": round(ms / B, 2)}), flush=True)
                continue
            n_steps = a.warmup + a.steps + 1
            reqs = [Request(f"b{i}", text, voice, seed=i, forced_tokens=n_steps + 5) for i in range(B)]
            rows = [engine._row(r, i) for i, r in enumerate(reqs)]
            batch = DecodeBatch(engine.model, B, rows[0].prompt_len + n_steps + 8, n_steps + 5, mode == "exact")
            t0 = time.perf_counter()
            for s, r in enumerate(rows):
                batch.admit(r, s)
            sync()
            prefill = (time.perf_counter() - t0) / B
            for _ in range(a.warmup):
                batch.step()
            sync()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                batch.step()
            sync()
            ms = (time.perf_counter() - t0) / a.steps * 1e3
            print(json.dumps({"model": a.model, "device": a.device, "dtype": engine.dtype, "int8": a.int8,
                              "cuda_graphs": a.cuda_graphs, "threads": a.threads, "batch": B, "mode": mode,
                              "step_ms": round(ms, 2), "ms_per_row_token": round(ms / B, 2),
                              "prefill_ms_per_row": round(prefill * 1e3, 1),
                              "prompt_tokens": rows[0].prompt_len}), flush=True)
    return 0


def hf_step_ms(engine, B: int, warmup: int, steps: int, sync) -> tuple[float, str]:
    """(ms per decode step, dtype) of the HF LlamaModel (upstream's forward) at batch B after a 60-token prefill."""
    import torch

    gpt = engine.loaded.gpt
    dev, dt = next(gpt.parameters()).device, next(gpt.parameters()).dtype
    C = gpt.config.hidden_size
    with torch.no_grad():
        out = gpt(inputs_embeds=torch.randn(B, 60, C, device=dev, dtype=dt), use_cache=True)
        past, n = out.past_key_values, 60
        for i in range(warmup + steps):
            if i == warmup:
                sync()
                t0 = time.perf_counter()
            x = torch.randn(B, 1, C, device=dev, dtype=dt)
            out = gpt(inputs_embeds=x, past_key_values=past, use_cache=True,
                      position_ids=torch.full((B, 1), n, device=dev))
            past, n = out.past_key_values, n + 1
        sync()
    return (time.perf_counter() - t0) / steps * 1e3, str(dt).replace("torch.", "")


if __name__ == "__main__":
    raise SystemExit(main())
