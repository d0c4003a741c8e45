"""What `--voice-anchor` costs: prompt tokens per segment and throughput, anchored vs plain, in one run.

    python -m benchmarks.voice_anchor                          # random-full, 6 segments of 吶喊, 1 thread, CPU
    python -m benchmarks.voice_anchor --n 4 --json out.json
    python -m benchmarks.voice_anchor --device cuda --n 64

One engine, one workload (the first N segments of the book as our front-end cuts them, each with its forced
token count, as benchmarks/engine_vs_upstream.py builds it), one voice (seed 1234), rendered twice with the
same seeds: plain, then anchored (tasks.synthesize.anchor.anchored: the voice's own rendering of the anchor passage,
DVAE-encoded, before every segment).  Reported: the one-time anchor cost (its render and encoding, after a
warm-up call), prompt tokens per segment on each side, and audio seconds per wall second (and per CPU
second) on each side.  On a shared machine compare the per-CPU-second ratio, not absolute numbers.
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

from benchmarks.engine_vs_upstream import (  # noqa: E402
    CORPUS_FILE,
    VOICE_SEED,
    WARMUP_STEPS,
    load_ours,
    run_ours,
    workload,
)


def prompt_tokens(engine, texts: list[str], voice: str) -> list[int]:
    """Prompt positions (text ids + sample codes) of each segment's row in this voice."""
    from engine.api import Request

    return [engine._row(Request(key=str(i), text=t, spk_emb=voice, seed=i), i).prompt_len
            for i, t in enumerate(texts)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--n", type=int, default=6, help="segments (default 6)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--batch", type=int, default=None, help="max_batch (default: the engine's)")
    ap.add_argument("--corpus", type=Path, default=CORPUS_FILE)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)

    import torch

    from engine.api import Request
    from engine.units import expected_tokens
    from tasks.synthesize.anchor import ANCHOR_TEXT, anchored

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    torch.set_num_threads(a.threads)
    texts = workload(a.corpus, a.n)
    forced = [expected_tokens(t) for t in texts]
    engine = load_ours(a, int8=False)
    voice = engine.sample_voice(VOICE_SEED)
    list(engine.synthesize([Request("warm", texts[0], voice, 0, forced_tokens=WARMUP_STEPS)]))   # first-call costs
    t0 = time.perf_counter()
    anchored_voice = anchored(voice, None, engine)
    anchor_s = time.perf_counter() - t0
    plain_tokens = prompt_tokens(engine, texts, voice)
    anchored_tokens = prompt_tokens(engine, texts, anchored_voice)
    log(f"{len(texts)} segments, {sum(forced)} tokens; anchor made in {anchor_s:.1f} s; rendering plain ...")
    plain = run_ours(engine, texts, forced, voice, log, "plain")
    log("rendering anchored ...")
    anch = run_ours(engine, texts, forced, anchored_voice, log, "anchored")
    extra = [x - p for x, p in zip(anchored_tokens, plain_tokens)]
    r = {
        "model": a.model, "device": a.device, "threads": a.threads, "n": len(texts), "forced_tokens": forced,
        "engine": engine.version, "anchor_text": ANCHOR_TEXT, "anchor_once_s": round(anchor_s, 2),
        "prompt_tokens_plain_mean": round(sum(plain_tokens) / len(texts), 1),
        "prompt_tokens_anchored_mean": round(sum(anchored_tokens) / len(texts), 1),
        "anchor_prompt_tokens": extra[0] if len(set(extra)) == 1 else extra,
        "generated_tokens_mean": round(sum(forced) / len(texts), 1),
        "plain": plain, "anchored": anch,
        "throughput_ratio": round(anch["audio_s_per_wall_s"] / plain["audio_s_per_wall_s"], 3),
        "throughput_ratio_cpu": round(anch["audio_s_per_cpu_s"] / plain["audio_s_per_cpu_s"], 3),
    }
    for side in ("plain", "anchored"):
        s = r[side]
        print(f"{side:>9}: {s['audio_s']:.1f} s of audio in {s['wall_s']:.1f} s wall = {s['audio_s_per_wall_s']:.3f} "
              f"audio s / wall s ({s['audio_s_per_cpu_s']:.3f} per CPU s), prompt {r[f'prompt_tokens_{side}_mean']} "
              f"tokens per segment")
    print(f"anchor: +{r['anchor_prompt_tokens']} prompt tokens per segment (generated: {r['generated_tokens_mean']} "
          f"per segment), made once in {anchor_s:.1f} s; throughput anchored / plain = {r['throughput_ratio']} "
          f"(per CPU second {r['throughput_ratio_cpu']})")
    if a.json:
        a.json.write_text(json.dumps(r, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
