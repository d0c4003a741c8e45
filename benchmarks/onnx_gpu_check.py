"""The ONNX step of benchmarks/gpu_check.sh (issue 26): export the graphs, compare them with torch, check them for
TensorRT — what a lent GPU without TensorRT or onnxruntime-gpu can add.

    python -m benchmarks.onnx_gpu_check --model random-tiny --device cuda --out /tmp/onnx-graphs [--dtype fp32 fp16]
    python -m benchmarks.onnx_gpu_check --device cpu --dtype fp32      # the same path on CPU, the model cache's graphs

Per dtype: engine/onnxgraph.py exports prefill, decode, heads and vocoder (on this machine); each graph's torch
module runs on `--device` (CUDA on the lent GPU; cudnn/cuBLAS TF32 off, so fp32 is fp32) and the same small
example inputs (engine.onnxgraph's) go through onnxruntime's CPU provider; every output is compared (cosine, max
abs diff; SNR for the waveform) and must clear COSINE_MIN of its dtype.  Then benchmarks/trtcheck.py checks every
graph (operators and dtypes against TensorRT's parser table, optimization profiles, integer positions) and
prints the trtexec build line.  One result line per graph and output; exit 1 when any comparison or check
fails, 2 when something it needs is missing (one line).  `--device cpu` runs the same path without a GPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

COSINE_MIN = {"fp32": 0.99999, "fp16": 0.999}   # per output, torch (device) vs onnxruntime CPU, same inputs
DTYPES = ("fp32", "fp16")


def _metrics(ref, got) -> dict:
    import numpy as np

    a, b = np.asarray(ref, np.float64).ravel(), np.asarray(got, np.float64).ravel()
    if a.shape != b.shape:
        return {"shape": f"{a.shape} != {b.shape}", "cosine": float("nan")}
    den = float(np.linalg.norm(a) * np.linalg.norm(b))
    err = float(np.sum((a - b) ** 2))
    return {"cosine": float(a @ b / den) if den else float(a.size and np.array_equal(a, b)),
            "max_abs": float(np.max(np.abs(a - b))) if a.size else 0.0,
            "snr_db": 10 * np.log10(float(np.sum(a ** 2)) / err) if err else float("inf")}


def _flat(x) -> list:
    """Tensors of a graph's inputs or outputs in the graph's order: the KV cache's per-layer lists flattened."""
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _flat(item)]
    return [x]


def _on(x, device: str):
    """A tensor, or a list of them (a KV cache's layers), on `device`."""
    return [t.to(device) for t in x] if isinstance(x, list) else x.to(device)


def check_dtype(model: str, dtype: str, device: str, out: Path | None, lines: list) -> bool:
    """Export, compare and TensorRT-check one dtype's graphs; appends result lines; True when all pass."""
    import onnxruntime as ort
    import torch

    from benchmarks import trtcheck
    from engine import onnxgraph
    from engine.loader import load_chattts

    t0 = time.perf_counter()
    loaded = load_chattts(model)
    paths = onnxgraph.export_graphs(loaded, None if out is None else out / dtype, dtype=dtype)
    where = paths[next(iter(paths))].parent
    lines.append(f"{dtype} export: {len(paths)} graphs in {time.perf_counter() - t0:.1f} s -> {where}")
    mods = onnxgraph.modules(loaded, dtype)
    cm = mods.pop("model")
    tdtype = {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    ok = True
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for name, path in paths.items():
        args = onnxgraph.examples(name, cm, tdtype)
        try:                                        # the modules share the loaded model's weights: back to cpu
            with torch.inference_mode():            # after, so the next dtype's export finds them there
                ref = mods[name].to(device)(*(_on(a, device) for a in args))
            ref = tuple(t.float().cpu() for t in _flat(ref))
        finally:
            mods[name].to("cpu")
        try:
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            feed = {i.name: a.cpu().numpy() for i, a in zip(sess.get_inputs(), _flat(args))}
            got = sess.run(None, feed)
        except Exception as e:                      # noqa: BLE001 — e.g. an op without a CPU kernel in fp16
            lines.append(f"{dtype} {name}: onnxruntime CPU failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            ok = False
            continue
        for out_name, r, g in zip((o.name for o in sess.get_outputs()), ref, got):
            m = _metrics(r.numpy(), g)
            good = m["cosine"] >= COSINE_MIN[dtype]
            ok &= good
            lines.append(f"{dtype} {name}.{out_name}: {'PASS' if good else 'FAIL'} cosine {m['cosine']:.8f} "
                         f"max_abs {m.get('max_abs', float('nan')):.3g} snr {m.get('snr_db', float('nan')):.1f} dB "
                         f"shape {tuple(g.shape)} (torch {device} vs onnxruntime CPU)")
        report = trtcheck.check_model(path)
        ok &= report.ok
        lines.append(f"{dtype} {name}: trtcheck {'OK' if report.ok else 'PROBLEMS'} ({sum(report.ops.values())} "
                     f"nodes, {len(report.ops)} op types, opset {report.opset})")
        lines += [f"    PROBLEM: {p}" for p in report.problems]
        lines += [f"    note: {n}" for n in report.notes]
        if report.shapes:
            lines.append("    " + " ".join(trtcheck.trtexec_command(report, path.with_suffix(".plan"))))
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.onnx_gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="random-tiny", help="random-tiny | random-full | hf | an asset dir")
    p.add_argument("--device", default="cuda", help="where the torch reference runs (cuda, cpu)")
    p.add_argument("--dtype", nargs="+", choices=DTYPES, default=list(DTYPES))
    p.add_argument("--out", type=Path, default=None,
                   help="export into OUT/<dtype> (default: the model cache, where an earlier export is reused)")
    p.add_argument("--report", type=Path, default=None, help="also write the result lines here")
    a = p.parse_args(argv)
    try:
        import onnx
        import onnxruntime
        import onnxscript  # noqa: F401 — the export needs it: checked here, before any work
        import torch

        import engine.onnxgraph  # noqa: F401 — importable with this onnx: checked before any work
    except ImportError as e:
        msg = f"onnx_gpu_check: {e.name or e} is not importable: ONNX step skipped"
        print(msg, file=sys.stderr)
        if a.report:
            a.report.write_text(msg + "\n", encoding="utf-8")
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("onnx_gpu_check: --device cuda but CUDA is not available", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False     # the reference in true fp32 (cuDNN convolutions default TF32)
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(min(torch.get_num_threads(), 8))
    gpu = f", {torch.cuda.get_device_name()}" if a.device.startswith("cuda") else ""
    lines = [f"torch {torch.__version__} ({a.device}{gpu}), "
             f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__} "
             f"({', '.join(onnxruntime.get_available_providers())}), model {a.model}"]
    print(lines[0], flush=True)
    ok = True
    for dtype in a.dtype:
        before = len(lines)
        try:
            ok &= check_dtype(a.model, dtype, a.device, a.out, lines)
        except Exception as e:                       # noqa: BLE001 — one line per dtype that broke, then go on
            lines.append(f"{dtype}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
            ok = False
        print("\n".join(lines[before:]), flush=True)
        if a.report:                                 # after each dtype: a run cut short keeps what it did
            a.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines.append(f"onnx_gpu_check: {'PASS' if ok else 'FAIL'}")
    print(lines[-1])
    if a.report:
        a.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
