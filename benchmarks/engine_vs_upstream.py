"""Our engine vs upstream ChatTTS 0.2.5 on the same workload, weights, process and thread count.

    python benchmarks/engine_vs_upstream.py                    # random-full, 32 segments, 2 threads, CPU
    python benchmarks/engine_vs_upstream.py --n 8 --json out.json
    python benchmarks/engine_vs_upstream.py --only upstream --n 16
    python benchmarks/engine_vs_upstream.py --with-int8       # ours fp32 and ours INT8 vs one upstream run

Workload: the first N segments of ../shared/corpus/txt/gutenberg-zh/27166-0.txt as our front-end cuts them
(tasks.ingest.load_book + tasks.text.segment.segment_chapter), each with a forced token count
T = engine.units.expected_tokens(text).  Both sides speak with one voice (engine.voice.sample_voice(seed 1234)).

Upstream: `Chat` loaded from the same asset directory (engine.loader), `Chat.infer` on the segments in document
order, batch size the best of 4/8/16 on a short probe (or --batch), text normalization and refine-text off,
each batch with min_new_token = max_new_token = the batch's longest T (random weights would stop rows at a random
EOS; upstream runs every row to the batch's longest anyway), decoded by upstream.
Ours: `Engine.load(EngineOptions(...)).synthesize(requests)` with each request's exact T.

Audio seconds are the workload's: sum over segments of (2T-1)*256 / 24000, identical for both sides (upstream
returns more: every row padded to its batch's longest; that is reported as returned_audio_s).  Wall seconds
exclude model loading and a short warm-up; peak RSS is sampled every 10 ms during the side's run.
ratio = ours / upstream throughput (audio seconds per wall second).
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.units import SAMPLE_RATE, expected_tokens, samples_for_tokens  # noqa: E402

CORPUS_FILE = ROOT.parent / "shared" / "corpus" / "txt" / "gutenberg-zh" / "27166-0.txt"
VOICE_SEED = 1234
PROBE_BATCHES = (4, 8, 16)
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


def run_upstream(loaded, texts: list[str], forced: list[int], voice: str, batch: int | None, log) -> dict:
    chat = loaded.chat
    probe: dict = {}
    if batch is None:
        batch, probe = probe_upstream_batch(chat, texts, voice, log)
    else:
        _upstream_batch(chat, texts[:1], voice, WARMUP_STEPS)
    gc.collect()
    returned = 0
    steps_total = 0
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        for i in range(0, len(texts), batch):
            chunk, counts = texts[i:i + batch], forced[i:i + batch]
            steps = max(counts)
            wavs = _upstream_batch(chat, chunk, voice, steps)
            if len(wavs) != len(chunk):
                raise RuntimeError(f"upstream returned {len(wavs)} waveforms for {len(chunk)} texts")
            returned += sum(int(w.size) for w in wavs)
            steps_total += steps * len(chunk)
            log(f"  upstream batch {i // batch + 1}: {len(chunk)} rows x {steps} steps, "
                f"{time.perf_counter() - t0:.1f} s so far")
        wall = time.perf_counter() - t0
    return _side(workload_audio_s(forced), returned / SAMPLE_RATE, wall, rss, batch=batch, probe=probe,
                 row_steps=steps_total)


# ------------------------------------------------------------------------------------------------ ours

def load_ours(args, int8: bool):
    """Our Engine with the benchmark's settings (the process-wide model cache loads it once)."""
    from engine.api import EngineOptions
    from engine.engine import Engine

    kw = dict(model=args.model, device=args.device, int8=int8, compile=args.compile, threads=args.threads)
    if args.batch:
        kw["max_batch"] = args.batch
    return Engine.load(EngineOptions(**kw))


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
    extra = {"row_steps": sum(forced), "engine": engine.version, "mean_batch": round(sum(sizes) / len(sizes), 2)}
    return _side(workload_audio_s(forced), returned / SAMPLE_RATE, wall, rss, **extra)


# ------------------------------------------------------------------------------------------ INT8 drift

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


def _cos(a, b) -> "object":
    import torch.nn.functional as F

    return F.cosine_similarity(a.float(), b.float(), dim=-1).flatten()


def int8_drift(loaded, texts: list[str], voice: str, args, steps: int = 32) -> dict:
    """Cosine similarity of the code logits, fp32 vs INT8, on the same inputs: 4 segment prompts each followed
    by `steps` random code embeddings; mean and min over positions and codebooks.  Our engine's INT8 model
    (Engine.load(int8=True)) against our fp32 one, itself checked against the HF Llama (RuntimeError if it
    disagrees)."""
    import torch
    import torch.nn.functional as F
    from ChatTTS.model.speaker import Speaker

    from engine.api import EngineOptions
    from engine.engine import Engine
    from engine.llama import KVCache

    base = dict(model=args.model, device="cpu", threads=args.threads)
    m32 = Engine.load(EngineOptions(**base)).model
    m8 = Engine.load(EngineOptions(**base, int8=True)).model
    spk = torch.from_numpy(Speaker._decode(voice)).float()

    def logits(m, ids, codes):
        x = torch.cat([m.prompt_embedding(ids, spk)[0], m.code_embedding(codes)[:, 0]])[None]   # (1, L, C)
        L = x.shape[1]
        cache = KVCache(m.llama.s, 1, L, x.device, m.dtype)
        mask = torch.ones(L, L, dtype=torch.bool).tril()[None, None]                          # (1,1,L,L)
        h = m.llama(x, torch.arange(L)[None], cache, torch.tensor([0]), mask=mask)[0]         # (L, C)
        return m.logits(h)                                                                    # (L, 4, 626)

    sims, checks = [], []
    with torch.inference_mode():
        for ids, codes in _inputs(loaded, texts, voice, steps):
            l32 = logits(m32, ids, codes)
            checks.append(_cos(l32, _hf_logits(loaded, loaded.gpt, ids, codes, F.normalize(spk, dim=0))))
            sims.append(_cos(l32, logits(m8, ids, codes)))
    s, c = torch.cat(sims), torch.cat(checks)
    if float(c.min()) < 0.999:
        raise RuntimeError(f"engine fp32 forward disagrees with the HF Llama (cosine min {float(c.min()):.4f})")
    return {"cosine_mean": round(float(s.mean()), 5), "cosine_min": round(float(s.min()), 5),
            "positions": int(s.numel() // 4), "fp32_vs_hf_cosine_min": round(float(c.min()), 6)}


# ------------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="random-full", help="random-full | random-tiny | hf | asset dir")
    ap.add_argument("--n", type=int, default=32, help="segments (default 32)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads for both sides (default 2)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--int8", action="store_true", help="ours with INT8 GPT linears (CPU); reports logit drift")
    ap.add_argument("--with-int8", action="store_true",
                    help="ours twice, fp32 then INT8, against the same upstream measurement (CPU); reports drift")
    ap.add_argument("--compile", action="store_true", help="ours with the compiled decode step (CUDA)")
    ap.add_argument("--batch", type=int, default=None,
                    help="upstream batch size (skips the 4/8/16 probe) and ours max_batch")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--only", choices=["ours", "upstream"], default=None)
    ap.add_argument("--corpus", type=Path, default=CORPUS_FILE, help="the book (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be at least 1")
    if args.batch is not None and args.batch < 1:
        ap.error("--batch must be at least 1")
    if not args.corpus.is_file():
        print(f"{args.corpus}: corpus file not found (pass --corpus)", file=sys.stderr)
        return 2

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
    log(f"workload: {len(texts)} segments from {args.corpus.name}; forced tokens "
        f"{min(forced)}..{max(forced)}, {sum(forced)} in all = {workload_audio_s(forced):.1f} s of audio")
    t0 = time.perf_counter()
    try:
        loaded = load_chattts(args.model, args.device)
    except ModelUnavailable as e:
        print(str(e), file=sys.stderr)
        return 2
    log(f"model: {args.model} ({loaded.root}, fingerprint {loaded.fingerprint}) loaded in "
        f"{time.perf_counter() - t0:.1f} s; torch threads {torch.get_num_threads()}; device {args.device}")
    voice = sample_voice(loaded, VOICE_SEED)

    result: dict = {"model": args.model, "fingerprint": loaded.fingerprint, "device": args.device,
                    "threads": args.threads, "n": len(texts), "forced_tokens": forced,
                    "int8": args.int8, "compile": args.compile, "torch": torch.__version__}
    if args.only != "ours":
        log("upstream (ChatTTS 0.2.5 Chat.infer):")
        result["upstream"] = run_upstream(loaded, texts, forced, voice, args.batch, log)
        log(_line("upstream", result["upstream"]))
        gc.collect()
    sides = [] if args.only == "upstream" else [("ours", args.int8)]
    if sides and args.with_int8 and not args.int8:
        sides.append(("ours_int8", True))
    for name, int8 in sides:
        engine = load_ours(args, int8)
        log(f"{name} (engine {engine.version}):")
        result[name] = run_ours(engine, texts, forced, voice, log, name)
        log(_line(name, result[name]))
        gc.collect()
        if "upstream" in result:
            o, u = result[name], result["upstream"]
            suffix = name[len("ours"):]
            result["ratio" + suffix] = round(o["audio_s_per_wall_s"] / u["audio_s_per_wall_s"], 3)
            result["ratio_cpu" + suffix] = round(o["audio_s_per_cpu_s"] / u["audio_s_per_cpu_s"], 3)
            log(f"ratio{suffix} ({name} / upstream throughput): {result['ratio' + suffix]:.2f}x wall, "
                f"{result['ratio_cpu' + suffix]:.2f}x per CPU second")
    if args.int8 or args.with_int8:
        result["int8_drift"] = int8_drift(loaded, texts, voice, args)
        d = result["int8_drift"]
        log(f"INT8 drift: logits cosine mean {d['cosine_mean']}, min {d['cosine_min']} (INT8 vs fp32, "
            f"{d['positions']} positions)")
    if args.json:
        _write_json(args.json, result)
        log(f"wrote {args.json}")
    return 0


def _line(name: str, r: dict) -> str:
    return (f"{name}: {r['audio_s']:.1f} s audio in {r['wall_s']:.1f} s wall = {r['audio_s_per_wall_s']:.3f} "
            f"audio-s/wall-s ({r['cpu_s']:.0f} CPU s); peak RSS {r['peak_rss_mb']:.0f} MB (before {r['rss_before_mb']:.0f} MB)"
            + (f"; batch {r['batch']}" if "batch" in r else ""))


def _write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
