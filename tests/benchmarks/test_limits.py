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


def test_peak_gemm_fp32_is_the_best_of_blas_onednn_and_our_kernel(monkeypatch):
    torch = pytest.importorskip("torch")
    from benchmarks import limits
    from engine import kernels
    from engine.cpu import onednn_available

    rates = iter([5.0, 7.0, 6.0, 3.0])            # what each kernel's timing "measures", in call order
    outputs = []

    def fake_peak(make):
        outputs.append(make(limits.PEAK_MIN_N)())                    # the kernel's GEMM really runs
        return next(rates)

    monkeypatch.setattr(limits, "_peak", fake_peak)
    fp32 = limits.peak_gemm("fp32", 1)
    kernels = 1 + onednn_available() + kernels.available()              # MKL, oneDNN packed, engine/kernels.c
    assert len(outputs) == kernels and fp32 == max([5.0, 7.0, 6.0][:kernels])   # the fastest
    for out in outputs[1:]:
        torch.testing.assert_close(out, outputs[0], atol=1e-3, rtol=1e-4)        # the same product
    rates = iter([3.0])
    outputs.clear()
    assert limits.peak_gemm("bf16", 1) in (3.0, 7.0) and len(outputs) == 1   # one kernel for bf16


def _engine(int8: bool, wqkv):
    from types import SimpleNamespace as NS

    return NS(opts=NS(int8=int8), dtype="fp32", model=NS(llama=NS(layers=[NS(wqkv=wqkv)])))


def test_only_w8a8_int8_is_held_to_the_int8_peak():
    """--int8 through engine/kernels.c multiplies in fp32 (int8 weights only): its ceiling is the fp32 peak, and
    no int8 peak is measured for it; the W8A8 Int8Linear multiplies in int8."""
    torch = pytest.importorskip("torch")
    from benchmarks.limits import dtypes_of, int8_compute
    from engine.cpu import Int8Linear

    w8a8 = _engine(True, Int8Linear(torch.nn.Linear(8, 8, bias=False)))
    weight_only = _engine(True, torch.nn.Linear(8, 8, bias=False))      # anything but an Int8Linear
    assert int8_compute(w8a8) and not int8_compute(weight_only) and not int8_compute(_engine(False, None))
    assert dtypes_of([w8a8]) == ("fp32", "int8") and dtypes_of([weight_only]) == ("fp32",)
