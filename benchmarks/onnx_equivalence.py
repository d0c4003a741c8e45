"""The onnx back-end against our torch engine on one model (default random-full), CPU, fp32:

    python -m benchmarks.onnx_equivalence --model random-full --json F

1. decode-step logits of every code head: prompts of the workload prefilled alone, then STEPS decode steps of all
   rows together, each step fed the same (torch-sampled) tokens on both sides; cosine per (row, head, step), its
   minimum, and the max abs diff;
2. a forced-length segment's tokens with the same seed (Engine.synthesize's scheduler, both back-ends): equal or
   the first step where they part;
3. Decoder + Vocos: the onnx vocoder graph vs engine.vocoder.decode on the torch side's hidden states: SNR in dB;
4. batch invariance of ORT CPU: the workload batched (max_batch) vs every segment alone, bitwise;
5. export and session-load seconds.
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

TEXTS = ["今天天气很好，我们去公园散步吧。", "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
         "一二三四五六七八九十。", "道可道，非常道；名可名，非常名。"]
STEPS = 24                         # decode steps compared
SEED = 1234
TOKENS_BATCH = 3                   # rows decoded together when the segments' tokens are compared


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from engine.api import EngineOptions, Request
    from engine.codemodel import CodeModel
    from engine.engine import Engine
    from engine.llama import KVCache
    from engine.vocoder import decode

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    ours = Engine.load(EngineOptions(model=args.model, threads=args.threads, max_batch=args.batch))
    t1 = time.perf_counter()
    onnx = Engine.load(EngineOptions(model=args.model, threads=args.threads, max_batch=args.batch, backend="onnx"))
    t2 = time.perf_counter()
    res: dict = {"model": args.model, "threads": args.threads, "torch_load_s": round(t1 - t0, 1),
                 "onnx_export_and_load_s": round(t2 - t1, 1), "torch_version": ours.version,
                 "onnx_version": onnx.version}
    print(json.dumps(res), flush=True)
    loaded = ours.loaded
    ref = CodeModel.from_chattts(loaded.chat.gpt, loaded.embed, loaded.tokenizer.spk_emb_ids, "cpu", torch.float32)
    voice = ours.sample_voice(SEED)
    spk = ours._speaker_vector(voice)

    # 1. decode-step logits, teacher-forced with the same tokens
    cos_min, diff_max, steps_seen = 1.0, 0.0, 0
    with torch.no_grad():
        sides = [(m, KVCache(m.llama.s, len(TEXTS) + 1, 256, "cpu", torch.float32)) for m in (ref, onnx.model)]
        lens = []
        hs = []
        for m, cache in sides:
            h = []
            for slot, t in enumerate(TEXTS):
                x = ref.prompt_embedding(torch.tensor(ours.prompt_ids(t)), spk)
                L = x.shape[1]
                call = m.llama.attention.begin(cache, torch.arange(L)[None], torch.tensor([slot]), [L])
                h.append(m.llama(x, call)[:, -1])
                if m is ref:
                    lens.append(L)
            hs.append(torch.cat(h))
        slots = torch.arange(len(TEXTS))
        for step in range(STEPS):
            la, lb = onnx.model.logits(hs[1]), ref.logits(hs[0])
            cos = torch.nn.functional.cosine_similarity(la, lb, dim=-1)
            cos_min, diff_max = min(cos_min, float(cos.min())), max(diff_max, float((la - lb).abs().max()))
            steps_seen += 1
            tok = lb.argmax(-1)                                           # [B, Q]: the same tokens on both sides
            pos = torch.tensor([[n + step] for n in lens])
            ends = [n + step + 1 for n in lens]
            hs = [m.llama(m.code_embedding(tok), m.llama.attention.begin(cache, pos, slots, ends))[:, 0]
                  for m, cache in sides]
    res["logits"] = {"cosine_min": round(cos_min, 8), "max_abs_diff": diff_max, "steps": steps_seen,
                     "rows": len(TEXTS), "heads": ref.Q}
    print(json.dumps(res["logits"]), flush=True)

    # 2. tokens of forced-length segments (the scheduler, the same seeds) and 3. vocoder SNR
    reqs = [Request(key=f"s{i}", text=t, spk_emb=voice, seed=SEED + i) for i, t in enumerate(TEXTS)]
    ta, tb = onnx.sampled_codes(reqs, TOKENS_BATCH), ours.sampled_codes(reqs, TOKENS_BATCH)
    parted = {k: next((i for i, (x, y) in enumerate(zip(ta[k], tb[k])) if x != y), None) for k in ta}
    res["tokens"] = {"equal": ta == tb, "first_difference_step": parted,
                     "steps": {k: len(v) - 1 for k, v in ta.items()}}
    print(json.dumps(res["tokens"]), flush=True)
    rows = list(ours.synthesize(reqs[:1]))
    from engine.scheduler import Scheduler

    row = next(iter(Scheduler(ours.model, 1, exact=True).run([ours._row(reqs[0], 0)])))
    (wt,) = decode(loaded, [row.hiddens])
    wo = onnx.model.vocode(row.hiddens)
    snr = 10 * np.log10(np.sum(wt.astype(np.float64) ** 2) / max(np.sum((wt.astype(np.float64) - wo) ** 2), 1e-30))
    res["vocoder"] = {"snr_db": round(float(snr), 1), "max_abs_diff": float(np.abs(wt - wo).max()),
                      "samples": int(wt.size), "equal_to_engine_result": bool(np.array_equal(wt, rows[0].audio))}
    print(json.dumps(res["vocoder"]), flush=True)

    # 4. batch invariance of the onnx back-end (and timing of both back-ends on the same requests)
    t = time.perf_counter()
    batched = {r.key: r.audio for r in onnx.synthesize(reqs)}
    res["onnx_batched_s"] = round(time.perf_counter() - t, 2)
    alone = {r.key: next(iter(onnx.synthesize([r]))).audio for r in reqs}
    t = time.perf_counter()
    list(ours.synthesize(reqs))
    res["torch_batched_s"] = round(time.perf_counter() - t, 2)
    res["onnx_batched_equals_alone"] = all(np.array_equal(batched[k], alone[k]) for k in batched)
    res["onnx_batch_sizes"] = onnx.last_batch_sizes
    print(json.dumps({k: res[k] for k in ("onnx_batched_s", "torch_batched_s", "onnx_batched_equals_alone")}))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
