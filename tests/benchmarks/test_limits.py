"""benchmarks/limits.py: FLOPs from the shapes, the compute-bound ceiling, a measured peak."""
from __future__ import annotations

import pytest

from benchmarks.limits import ceiling_audio_s, gpt_flops


def test_gpt_flops_count_weights_attention_and_heads():
    from engine.llama import LlamaShape

    s = LlamaShape(hidden=8, layers=2, heads=2, kv_heads=2, ffn=16, rope_theta=1e4, eps=1e-6, max_pos=64)
    f = gpt_flops(s, prompt_lens=[3], tokens=[2], head_cells=10)
    weights = 8 * 24 + 8 * 8 + 8 * 32 + 16 * 8                       # wqkv, wo, w13, w2 of one layer
    assert f["linear"] == 2 * weights * 2 * 4                          # 2 layers, 4 positions (3 prompt + 1 step)
    assert f["attention"] == 4 * 2 * 2 * 4 * (1 + 2 + 3 + 4)           # layers, heads, head_dim, keys per position
    assert f["heads"] == 2 * 10 * 8 * 2                                 # 2 tokens sampled


def test_ceiling_spends_each_part_at_its_dtype_peak():
    cost = {"linear": 10.0, "attention": 2.0, "heads": 1.0, "decoder_vocos": 1.0}
    peaks = {"fp32": 100.0, "bf16": 200.0, "int8": 400.0}
    assert ceiling_audio_s(cost, peaks, "fp32") == pytest.approx(1 / 0.14)
    assert ceiling_audio_s(cost, peaks, "bf16") == pytest.approx(1 / (0.05 + 0.01 + 0.02))
    assert ceiling_audio_s(cost, peaks, "fp32", int8=True) == pytest.approx(1 / (0.025 + 0.02 + 0.02))


def test_peak_gemm_measures_a_positive_rate():
    pytest.importorskip("torch")
    from benchmarks.limits import peak_gemm

    assert peak_gemm("fp32", 1) > 1e8


def test_peak_gemm_is_the_best_of_blas_onednn_and_our_kernels(monkeypatch):
    torch = pytest.importorskip("torch")
    from benchmarks import limits
    from engine import kernels
    from engine.cpu import onednn_available

    outputs = []

    def fake_peak(make):
        outputs.append(make(limits.PEAK_MIN_N)())                    # the kernel's GEMM really runs
        return float(len(outputs) % 3 + 1)                            # what its timing "measures"

    monkeypatch.setattr(limits, "_peak", fake_peak)
    for dtype, tol in (("fp32", 1e-4), ("bf16", 3e-2)):
        outputs.clear()
        best = limits.peak_gemm(dtype, 1)
        ours = [k for k in limits.PEAK_KINDS[dtype] if k in kernels.kinds()]
        count = 1 + (dtype == "fp32" and onednn_available()) + len(ours)   # torch's, oneDNN packed, our kinds
        assert len(outputs) == count and best == max(k % 3 + 1 for k in range(1, count + 1))   # the fastest
        for out in outputs[1:]:
            torch.testing.assert_close(out.float(), outputs[0].float(), atol=tol * 50, rtol=tol)   # one product


def test_the_roofline_is_the_slower_of_bytes_over_bandwidth_and_flops_over_peak():
    """One layer of hidden 8 (weights: 8 x 24 + 8 x 8 + 3 x 8 x 16 = 640), rows of prompt 3 and 5 tokens: 4 steps
    of 2 rows at 2 rows a call; bf16 weights (2 bytes) and KV (2 bytes a value: 2 x 8 per position)."""
    from benchmarks.limits import roofline
    from engine.llama import LlamaShape

    s = LlamaShape(hidden=8, layers=1, heads=2, kv_heads=2, ffn=16, rope_theta=1e4, eps=1e-6, max_pos=64)
    cost = {"decoder_vocos": 0.0}
    bf16 = {"weights": 2, "kv": 2, "compute": "bf16"}
    keys = 2 * (4 + 5 + 6 + 7)                                         # steps at positions 3..6 attend 4..7 keys
    memory = 4 * (640 * 2 + 10 * 8 * 4) + keys * 32                      # weights + fp32 heads a step, the keys read
    slow_memory = roofline(s, 10, [3, 3], [5, 5], 2, 1e3, {"fp32": 1e3, "bf16": 1e3}, bf16, cost)
    assert slow_memory["decode_bound"] == "memory"
    assert slow_memory["seconds"]["decode"] == pytest.approx(memory / 1e3)
    assert slow_memory["step_mb"] == pytest.approx({"weights": (640 * 2 + 10 * 8 * 4) / 1e6, "kv": keys * 32 / 4e6})
    light = slow_memory["weights_only"]                                   # the same without the KV cache's bytes
    assert light["decode_bound"] == "memory" and light["decode_step_ms"] == pytest.approx(1e3 * (640 * 2 + 320) / 1e3)
    assert light["ceiling_audio_s"] > slow_memory["ceiling_audio_s"]
    assert slow_memory["seconds"]["prefill"] == pytest.approx(2 * 640 * 2 / 1e3)    # each row's weights once
    flops = 2 * 640 * 2 * 4 + 4 * 2 * 4 * keys                            # the linears, the attention
    slow_compute = roofline(s, 10, [3, 3], [5, 5], 2, 1e15, {"fp32": 1e-6, "bf16": 1e-6}, bf16, cost)
    assert slow_compute["decode_bound"] == "compute"
    assert slow_compute["seconds"]["decode"] == pytest.approx((flops + 2 * 80 * 10) / 1e3)
    audio_s = 10 / 46.875
    assert slow_compute["ceiling_audio_s"] == pytest.approx(audio_s / sum(slow_compute["seconds"].values()))
    assert slow_compute["weights_only"]["ceiling_audio_s"] == pytest.approx(slow_compute["ceiling_audio_s"])


def test_the_vocoder_runs_at_its_dtypes_peak():
    from benchmarks.limits import roofline
    from engine.llama import LlamaShape

    s = LlamaShape(hidden=8, layers=1, heads=2, kv_heads=2, ffn=16, rope_theta=1e4, eps=1e-6, max_pos=64)
    peaks, cost = {"fp32": 1.0, "bf16": 4.0}, {"decoder_vocos": 2.0}
    secs = {v: roofline(s, 10, [3], [5], 1, 1e15, peaks, {"weights": 2, "kv": 2, "compute": "bf16", "vocoder": v},
                        cost)["seconds"]["decoder_vocos"] for v in ("fp32", "bf16")}
    assert secs["fp32"] == pytest.approx(4 * secs["bf16"]) == pytest.approx(2.0 * 5 / 46.875)   # GFLOP / GFLOP/s


def test_read_bandwidth_measures_a_positive_rate():
    pytest.importorskip("torch")
    from benchmarks.limits import read_bandwidth

    assert 1e8 < read_bandwidth(1) < 1e13


def test_memory_bandwidth_measures_a_positive_rate():
    pytest.importorskip("torch")
    from benchmarks.limits import memory_bandwidth

    assert 1e8 < memory_bandwidth(1) < 1e13


def _engine(int8: bool, wqkv):
    from types import SimpleNamespace as NS

    return NS(opts=NS(int8=int8), dtype="fp32", model=NS(llama=NS(layers=[NS(wqkv=wqkv)])))


def test_only_w8a8_int8_is_held_to_the_int8_peak():
    """--int8 through engine/kernels.c multiplies in fp32 (int8 weights only): its ceiling is the fp32 peak, and
    no int8 peak is measured for it; the W8A8 Int8Linear multiplies in int8."""
    torch = pytest.importorskip("torch")
    from benchmarks.limits import best_float, dtypes_of, int8_compute
    from engine.cpu import Int8Linear

    w8a8 = _engine(True, Int8Linear(torch.nn.Linear(8, 8, bias=False)))
    weight_only = _engine(True, torch.nn.Linear(8, 8, bias=False))      # anything but an Int8Linear
    assert int8_compute(w8a8) and not int8_compute(weight_only) and not int8_compute(_engine(False, None))
    best = ("bf16",) if best_float() == "bf16" else ()                   # the roofline's, always measured
    assert dtypes_of([w8a8]) == ("fp32", *best, "int8") and dtypes_of([weight_only]) == ("fp32", *best)
