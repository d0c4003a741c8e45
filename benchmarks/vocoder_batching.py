"""Decoder + Vocos: each row alone (what engine/vocoder.py does on every device) against equal-length rows in one
batched call (what it did on CUDA before), in one run.

    python -m benchmarks.vocoder_batching --model random-full --rows 8 --tokens 150 --threads 2 --repeat 3
    python -m benchmarks.vocoder_batching --model random-full --rows 16 --device cuda    # what CUDA gave up

`rows` hidden-state rows of `tokens` GPT steps each (random, the GPT's hidden size): `alone` decodes them one
call per row through engine.vocoder.decode, `batched` stacks them into one Decoder call and one Vocos call.
Prints seconds per audio second of each, the ratio alone / batched (above 1: batching was faster) and the
largest difference between a batched row and the same row alone (batching changes bits: why it is gone).
Each side is the median of --repeat runs, alternating.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.units import SAMPLE_RATE, samples_for_tokens  # noqa: E402


def batched(loaded, rows):
    """The rows (equal lengths) through one Decoder call and one Vocos call -> [numpy waveform]."""
    import torch

    device = next(loaded.decoder.parameters()).device
    with torch.inference_mode():
        x = torch.stack(rows).to(device).transpose(1, 2).contiguous()       # (B, hidden, T)
        wav = loaded.vocos.decode(loaded.decoder(x).float()).cpu()           # (B, 256 (2T-1))
    n = samples_for_tokens(rows[0].shape[0])
    return [w[:n].numpy() for w in wav]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    import numpy as np
    import torch

    from engine.loader import load_chattts
    from engine.vocoder import decode

    torch.set_num_threads(a.threads)
    loaded = load_chattts(a.model, a.device)
    hidden = loaded.gpt.config.hidden_size
    g = torch.Generator().manual_seed(0)
    rows = [torch.randn(a.tokens, hidden, generator=g) for _ in range(a.rows)]
    decode(loaded, rows[:1])                                                  # warm-up
    times = {"alone": [], "batched": []}
    for _ in range(a.repeat):
        for side, fn in (("alone", lambda: decode(loaded, rows)), ("batched", lambda: batched(loaded, rows))):
            t0 = time.perf_counter()
            out = fn()
            times[side].append(time.perf_counter() - t0)
            if side == "alone":
                alone = out
            else:
                together = out
    audio_s = a.rows * samples_for_tokens(a.tokens) / SAMPLE_RATE
    med = {k: statistics.median(v) for k, v in times.items()}
    r = {"model": a.model, "device": a.device, "rows": a.rows, "tokens": a.tokens, "threads": a.threads,
         "repeat": a.repeat, "audio_s": round(audio_s, 2),
         "s_per_audio_s": {k: round(v / audio_s, 4) for k, v in med.items()},
         "runs_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
         "ratio_alone_over_batched": round(med["alone"] / med["batched"], 3),
         "max_diff_batched_vs_alone": float(max(np.abs(x - y).max() for x, y in zip(alone, together)))}
    print(f"Decoder+Vocos on {a.device}, {a.rows} rows x {a.tokens} tokens, {a.threads} threads: alone "
          f"{r['s_per_audio_s']['alone']:.4f} s per audio s, batched {r['s_per_audio_s']['batched']:.4f}; "
          f"alone / batched = {r['ratio_alone_over_batched']:.2f}; batched differs from alone by up to "
          f"{r['max_diff_batched_vs_alone']:.1e}")
    print(json.dumps(r), flush=True)
    if a.json:
        a.json.write_text(json.dumps(r, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
