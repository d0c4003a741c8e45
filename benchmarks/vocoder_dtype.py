"""Decoder + Vocos in bf16 against fp32 (engine/vocoder.py's two dtypes): the drift and the speed, in one process.

    python -m benchmarks.vocoder_dtype --json F            # random-full, 6 engine rows of <= 200 tokens, 2 threads
    python -m benchmarks.vocoder_dtype --rows 8 --tokens 300 --repeat 3 --speech ../shared/corpus/speech --json F

**Rows**: the hidden states our engine gives the vocoder in a render — the engine (`--dtype auto`, the model
`--model`) decodes the first `--rows` segments of 吶喊 as the front-end cuts them, each forced to min(its expected
tokens, `--tokens`).  Each row is decoded alone in fp32 and in bf16, `--repeat` rounds alternating (after an
untimed warm-up of both: the bf16 copies are made then), the best of each: seconds per audio second both ways and
**fp32 / bf16** (the vocoder's speed-up; on a CPU without native bf16 — AVX2 — torch's bf16 is emulated, slower,
and no engine vocodes in bf16 there).  **Drift**: the SNR of bf16's waveform against fp32's, per row (min and
median) and over all rows.

**The ASR check** (`--speech DIR`: the corpus's transcripts.tsv and recordings; left out without it): random
weights say no words, so what bf16 does to real speech through the real model cannot be heard here.  What is
measured instead, a proxy: the recordings as they are, and with the bf16 error of the rows above added — the
difference waveform of the row with the lowest SNR, resampled to the recording's rate, tiled to its length and
scaled to that SNR against it, then to `--margin` dB less — and the ASR check's verdicts (tasks.qa.recordings:
Whisper `--asr-model`, compared with each recording's text) on each, which must equal the clean recordings'.  It
says an error of that size and spectrum does not move a verdict; the real model's bf16 error may be another size,
and correlate with the speech, which an added error does not.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.engine_vs_upstream import CORPUS_FILE, VOICE_SEED, finish, workload  # noqa: E402
from engine.units import SAMPLE_RATE  # noqa: E402

MARGIN_DB = 10.0                   # the second perturbed set: this much below the measured SNR


def engine_rows(engine, texts: list[str], cap: int) -> list:
    """The hidden states [T, hidden] the engine gives for each text (forced to min(expected tokens, cap)), in order."""
    from engine.api import Request
    from engine.scheduler import Scheduler
    from engine.units import expected_tokens

    voice = engine.sample_voice(VOICE_SEED)
    reqs = [Request(key=f"r{i}", text=t, spk_emb=voice, seed=i, forced_tokens=min(expected_tokens(t), cap))
            for i, t in enumerate(texts)]
    rows = [engine._row(r, i) for i, r in enumerate(reqs)]
    done = {r.key: r.hiddens for r in Scheduler(engine.model, len(rows), exact=True).run(rows)}
    return [done[r.key] for r in reqs]


def snr_db(ref, x) -> float:
    import numpy as np

    ref, x = ref.astype(np.float64), x.astype(np.float64)
    return float(10 * np.log10((ref ** 2).sum() / max(((ref - x) ** 2).sum(), 1e-300)))


def timed(loaded, rows: list, repeat: int) -> tuple[dict, dict]:
    """({dtype: [waveforms]}, {dtype: best seconds}) of decoding every row alone in fp32 and bf16, `repeat` rounds
    alternating after an untimed warm-up of each."""
    from engine.vocoder import decode

    waves = {d: decode(loaded, rows, d) for d in ("fp32", "bf16")}     # warm-up (the bf16 copies are made here)
    best = {d: float("inf") for d in waves}
    for i in range(repeat):
        for d in (("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32")):
            t0 = time.perf_counter()
            decode(loaded, rows, d)
            best[d] = min(best[d], time.perf_counter() - t0)
    return waves, best


def perturbed(audio, rate: int, error, snr: float):
    """`audio` (float32, `rate` Hz) plus `error` (24 kHz) resampled to `rate`, tiled to its length and scaled so
    that the result's SNR against `audio` is `snr` dB."""
    import numpy as np
    import torch
    import torchaudio.functional as AF

    e = AF.resample(torch.from_numpy(error.astype(np.float32)), SAMPLE_RATE, rate).numpy() if rate != SAMPLE_RATE \
        else error.astype(np.float32)
    e = np.resize(e, audio.shape)                                          # tiled (np.resize repeats it)
    scale = np.sqrt((audio.astype(np.float64) ** 2).sum() / max((e.astype(np.float64) ** 2).sum(), 1e-300)
                    / 10 ** (snr / 10))
    return (audio + scale * e).astype(np.float32)


def asr_proxy(speech: Path, error, snr: float, margin: float, asr_model: str, clips: int | None, log) -> dict:
    """The ASR check's verdicts on the corpus recordings clean, at `snr` dB of `error` and at `snr - margin`."""
    from tasks.qa.asr import load_transcriber
    from tasks.qa.recordings import check_recordings, read_recording, read_texts

    items = read_texts(speech / "transcripts.tsv")[:clips]
    clean = [read_recording(p) for p, _ in items]
    transcriber = load_transcriber(asr_model)
    sides = {"clean": clean}
    for name, level in ((f"snr_{snr:.1f}dB", snr), (f"snr_{snr - margin:.1f}dB", snr - margin)):
        sides[name] = [(perturbed(a, r, error, level), r) for a, r in clean]
    verdicts = {}
    for name, audio in sides.items():
        checks = check_recordings(items, audio, transcriber)
        verdicts[name] = {Path(c.file).name: {"verdict": c.verdict, "cer": round(c.cer, 4)} for c in checks}
        log(f"  ASR check, {name:16s}: " + ", ".join(f"{v['verdict']}" for v in verdicts[name].values()))
    changed = {name: [f for f in v if v[f]["verdict"] != verdicts["clean"][f]["verdict"]]
               for name, v in verdicts.items() if name != "clean"}
    at_snr, at_margin = changed.values()
    return {"asr_model": asr_model, "clips": len(items), "verdicts": verdicts, "changed": changed,
            "unchanged": not at_snr, "unchanged_at_margin": not at_margin}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="random-full")
    ap.add_argument("--rows", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=200, help="each row's tokens at most")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", type=Path, default=CORPUS_FILE)
    ap.add_argument("--speech", type=Path, default=None, help="the speech corpus folder (its transcripts.tsv)")
    ap.add_argument("--clips", type=int, default=None, help="--speech: its first N recordings only")
    ap.add_argument("--asr-model", default="base")
    ap.add_argument("--margin", type=float, default=MARGIN_DB, help="dB below the measured SNR, the second set")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.rows < 1 or a.tokens < 2 or a.repeat < 1:
        ap.error("--rows and --repeat must be at least 1, --tokens at least 2")
    for what, path in (("corpus file", a.corpus), ("speech corpus's transcripts.tsv",
                                                   a.speech / "transcripts.tsv" if a.speech else None)):
        if path is not None and not path.is_file():
            print(f"{path}: {what} not found", file=sys.stderr)
            return 2
    start = time.perf_counter()

    import numpy as np
    import torch

    from engine.api import EngineOptions
    from engine.engine import Engine

    torch.set_num_threads(a.threads)
    engine = Engine.load(EngineOptions(model=a.model, threads=a.threads, max_batch=a.rows))
    rows = engine_rows(engine, workload(a.corpus, a.rows), a.tokens)
    audio_s = sum((2 * r.shape[0] - 1) * 256 for r in rows) / SAMPLE_RATE
    print(f"engine {engine.version} (its vocoder: {engine.vocoder}); {len(rows)} rows, {audio_s:.1f} s of audio; "
          f"{a.threads} threads", flush=True)
    waves, best = timed(engine.loaded, rows, a.repeat)
    per = {d: best[d] / audio_s for d in best}
    snrs = [snr_db(f, b) for f, b in zip(waves["fp32"], waves["bf16"])]
    overall = snr_db(np.concatenate(waves["fp32"]), np.concatenate(waves["bf16"]))
    print(f"Decoder+Vocos, each row alone, best of {a.repeat}: fp32 {per['fp32']:.4f} s per audio s, bf16 "
          f"{per['bf16']:.4f}; fp32 / bf16 = {best['fp32'] / best['bf16']:.3f}", flush=True)
    print(f"drift of bf16 against fp32: SNR {overall:.2f} dB over all rows, per row min {min(snrs):.2f} dB, median "
          f"{statistics.median(snrs):.2f} dB", flush=True)
    result: dict = {"model": a.model, "engine": engine.version, "threads": a.threads, "rows": len(rows),
                    "audio_s": round(audio_s, 2), "s_per_audio_s": {d: round(v, 5) for d, v in per.items()},
                    "fp32_over_bf16": round(best["fp32"] / best["bf16"], 4),
                    "snr_db": {"overall": round(overall, 2), "min": round(min(snrs), 2),
                               "median": round(statistics.median(snrs), 2), "rows": [round(x, 2) for x in snrs]}}
    if a.speech is not None:
        worst = int(np.argmin(snrs))
        error = waves["bf16"][worst] - waves["fp32"][worst]
        print(f"ASR check on {a.speech} with row {worst}'s bf16 error at {min(snrs):.2f} dB and "
              f"{min(snrs) - a.margin:.2f} dB (a proxy: module docstring):", flush=True)
        result["asr"] = asr_proxy(a.speech, error, min(snrs), a.margin, a.asr_model, a.clips, print)
        asr = result["asr"]
        print(f"ASR verdicts at the measured SNR: {'unchanged' if asr['unchanged'] else 'CHANGED'}; "
              + ", ".join(f"{k}: {len(v)} of {asr['clips']} changed{' (' + ', '.join(v) + ')' if v else ''}"
                          for k, v in asr["changed"].items()), flush=True)
    return finish(result, start, a.json, print)


if __name__ == "__main__":
    sys.exit(main())
