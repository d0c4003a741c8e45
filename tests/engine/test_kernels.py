"""engine/kernels.c through engine/kernels.py: the linear and the decode attention agree with torch, a row's bits never
depend on the call (rows, chunk, slots, threads), the build is cached by content, and the engine falls back to
oneDNN and SDPA where the kernels cannot be used."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from engine import kernelbuild, kernels  # noqa: E402
from engine.attention import CAttention, CStep, PerRow  # noqa: E402
from engine.cpu import PackedLinear, onednn_available  # noqa: E402
from tests.conftest import ROOT, unavailable  # noqa: E402
from tests.engine.kinds import KIND_PARAMS, kind_param, reference, why_not  # noqa: E402


@pytest.fixture
def lin():
    if not kernels.available():
        unavailable("engine/kernels.c is not available here (no AVX2/FMA or no C compiler)")
    return kernels.GemmLinear


def _linear(kind: str, w: torch.Tensor):
    """(the kernel's linear for `kind` on weight w [N, K], the weight as the kernel takes it, its column scales)."""
    from engine.cpu import kind_linear

    lin = kind_linear(kind)(w)
    if kernels.KINDS[kind][2] == "int8":
        return lin, *kernels.quantize_weight(w)
    return lin, w, None


@pytest.mark.parametrize("kind", KIND_PARAMS)
@pytest.mark.parametrize("n, k", [(48, 64), (40, 37), (13, 96), (2504, 64), (8, 1), (72, 768)])
def test_every_kind_equals_its_reference(kind, n, k):
    """Against float64 over the operands as the kind rounds them (tests/engine/kinds.py reference: torch's own
    bf16 rounding and row quantization, not the kernels'), within the fp32 sums' bound: 16-column blocks, a
    lone block and a last one of 8, N padded to 8 (13), the heads' 2504, K odd, tiny, not a multiple of 4."""
    g = torch.Generator().manual_seed(n * 1000 + k)
    w, x = torch.randn(n, k, generator=g), torch.randn(2, 7, k, generator=g)   # [..., K] inputs keep their shape
    lin, wq, scale = _linear(kind, w)
    y = lin(x)
    assert y.shape == (2, 7, n) and y.dtype == torch.float32
    ref, bound = reference(kind, x.reshape(-1, k), wq, scale)
    err = (y.reshape(-1, n).double() - ref).abs()
    assert bool((err <= bound).all()), float((err - bound).max())
    if kind in ("f32", "f32_512"):
        torch.testing.assert_close(y, x @ w.t(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_a_rows_bits_depend_on_nothing_else_in_the_call(kind):
    """Every call size 1..30 (ragged chunks of 6 and of 12), each row alone, and 1 or 2 threads: the same bits."""
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(200, 96, generator=g), torch.randn(30, 96, generator=g)
    f, _, _ = _linear(kind, w)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = f(x)
        for m in range(1, 31):
            assert torch.equal(f(x[:m]), ref[:m]), m
            assert torch.equal(f(x[30 - m:]), ref[30 - m:]), m          # rows in other chunk positions
        for i in range(30):
            assert torch.equal(f(x[i:i + 1]), ref[i:i + 1]), i
        torch.set_num_threads(2)
        assert torch.equal(f(x), ref)
        assert torch.equal(f(x[3:8]), ref[3:8])
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("kind", [kind_param(k) for k in kernels.SAME_BITS])
def test_the_avx512_kinds_run_the_avx2_chains_bit_for_bit(kind):
    """f32_512, q8_512 and amx_i8 give f32's, q8's and i8's bits (so the engine names their arithmetic alike), at
    every call size and over blocks of 32, 16 and 8 columns."""
    twin = kernels.SAME_BITS[kind]
    if why := why_not(twin):
        pytest.skip(why)
    g = torch.Generator().manual_seed(8)
    for n, k in ((56, 768), (40, 37), (2504, 64)):
        w, x = torch.randn(n, k, generator=g), torch.randn(27, k, generator=g)
        a, b = _linear(kind, w)[0], _linear(twin, w)[0]
        assert all(torch.equal(a(x[:m]), b(x[:m])) for m in range(1, 28)), (n, k)


def test_a_non_contiguous_input_is_taken_as_its_values(lin):
    g = torch.Generator().manual_seed(2)
    w, x = torch.randn(32, 24, generator=g), torch.randn(24, 5, generator=g)
    assert torch.equal(lin(w)(x.t()), lin(w)(x.t().contiguous()))


@pytest.mark.parametrize("kind", [kind_param(k) for k in ("q8", "q8_512", "i8")])
def test_int8_kinds_differ_from_fp32_by_int8_rounding_only(kind):
    g = torch.Generator().manual_seed(9)
    w, x = torch.randn(48, 64, generator=g), torch.randn(9, 64, generator=g)
    y = _linear(kind, w)[0](x)
    assert (y - x @ w.t()).abs().max() < 0.05 * (x @ w.t()).abs().max()


def _w8a8_reference(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """W8A8 as engine.cpu.Int8Linear defines it, the product in int64 (exact, no BLAS), the same fp32 rescale."""
    from engine.cpu import quantize_rows, quantize_weight

    wq, scale = quantize_weight(w)
    xq, s = quantize_rows(x)
    return (xq.to(torch.int64) @ wq.t().to(torch.int64)).float() * (s * scale)


def _w8a8_case() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(10)           # 16-bit pair sums overflow here (oneDNN without VNNI saturates)
    return torch.randn(40, 72, generator=g), torch.randn(11, 72, generator=g) * 3


def test_the_w8a8_int8linear_is_exact_on_any_cpu():
    """Int8Linear's integer product is exact whatever oneDNN this CPU (or ONEDNN_MAX_CPU_ISA) gives torch."""
    from engine.cpu import Int8Linear

    w, x = _w8a8_case()
    dense = torch.nn.Linear(72, 40, bias=False)
    dense.weight.data = w
    assert torch.equal(Int8Linear(dense)(x), _w8a8_reference(w, x))


@pytest.mark.parametrize("kind", [kind_param(k) for k in kernels.W8A8])
def test_the_w8a8_kinds_give_the_w8a8_bits(kind):
    """"i8" (VNNI) and "amx_i8" (AMX tiles) quantize a row and rescale as engine.cpu.Int8Linear does (an exact
    integer product, then the same fp32 operations), so the same bits as the int64 reference."""
    w, x = _w8a8_case()
    assert torch.equal(_linear(kind, w)[0](x), _w8a8_reference(w, x))


def test_the_cpu_int8_engine_runs_its_whole_step_on_an_int8_kind(lin):
    from engine.api import EngineOptions
    from engine.engine import Engine

    e = Engine.load(EngineOptions(model="random-tiny", int8=True))
    m = e.model
    assert e.path.int8 and e.path.kind in kernels.kinds()                  # which one: measured, never assumed
    assert all(isinstance(getattr(b, n), kernels.GemmInt8Linear) and getattr(b, n).kind == e.path.kind
               for b in m.llama.layers for n in ("wqkv", "wo", "w13", "w2"))
    assert isinstance(m.head_linear, lin) and isinstance(m.llama.attention, CStep)
    assert m.llama.attention.decode.kind == e.path.kind                  # the whole step on the int8 weights
    assert m.call_size(1, 8) == 1


def _cache(g, slots=5, heads=4, length=40, dim=16):
    return (torch.randn(slots, heads, length, dim, generator=g), torch.randn(slots, heads, length, dim, generator=g))


@pytest.mark.parametrize("heads, kv_heads, dim", [(4, 4, 16), (4, 2, 64), (2, 1, 24)])
def test_decode_attention_equals_sdpa_over_each_rows_prefix(lin, heads, kv_heads, dim):
    """Lengths 1, not multiples of 8, the whole cache; grouped kv heads; a padding row (length 0) gets zeros."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(heads * 100 + dim)
    k, v = _cache(g, heads=kv_heads, dim=dim)
    q = torch.randn(5, heads, 1, dim, generator=g)
    slots, lens = torch.tensor([3, 0, 4, 1, 2]), [1, 13, 40, 0, 27]
    o = kernels.decode_attention(slots, lens)(q, k, v)
    assert o.shape == q.shape
    for b, (sl, n) in enumerate(zip(slots.tolist(), lens)):
        if n == 0:
            assert not o[b].any()
            continue
        kk, vv = (c[sl:sl + 1, :, :n].repeat_interleave(heads // kv_heads, 1) for c in (k, v))
        torch.testing.assert_close(o[b:b + 1], F.scaled_dot_product_attention(q[b:b + 1], kk, vv),
                                   atol=1e-5, rtol=1e-4)


def test_decode_attention_rows_do_not_depend_on_each_other(lin):
    """A row alone, in another order, beside other rows, on 1 or 2 threads: the same bits; keys past its length
    (another row's garbage) change nothing."""
    g = torch.Generator().manual_seed(3)
    k, v = _cache(g)
    q = torch.randn(5, 4, 1, 16, generator=g)
    slots, lens = torch.tensor([0, 1, 2, 3, 4]), [9, 17, 33, 40, 1]
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = kernels.decode_attention(slots, lens)(q, k, v)
        for b in range(5):
            alone = kernels.decode_attention(slots[b:b + 1], lens[b:b + 1])(q[b:b + 1], k, v)
            assert torch.equal(alone, ref[b:b + 1]), b
        perm = [3, 0, 4, 2, 1]
        torch.set_num_threads(2)
        mixed = kernels.decode_attention(slots[perm], [lens[i] for i in perm])(q[perm], k, v)
        assert torch.equal(mixed, ref[perm])
        k2, v2 = k.clone(), v.clone()
        k2[0, :, 9:], v2[0, :, 9:] = 1e3, -1e3                           # past row 0's length
        assert torch.equal(kernels.decode_attention(slots[:1], lens[:1])(q[:1], k2, v2), ref[:1])
    finally:
        torch.set_num_threads(old)


def test_decode_attention_refuses_what_it_cannot_compute(lin):
    g = torch.Generator().manual_seed(4)
    k, v = _cache(g)
    attend = kernels.decode_attention(torch.tensor([0, 1]), [3, 4])
    with pytest.raises(ValueError, match="one fp32 query"):
        attend(torch.randn(2, 4, 2, 16), k, v)                           # two queries per row: prefill is SDPA's
    with pytest.raises(ValueError, match="contiguous"):
        attend(torch.randn(2, 4, 1, 16), k.transpose(2, 3).contiguous().transpose(2, 3), v)
    with pytest.raises(ValueError, match="2 slots for 3 lengths"):
        kernels.decode_attention(torch.tensor([0, 1]), [3, 4, 5])


def test_the_build_is_cached_by_source_flags_and_compiler(lin, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "cc")
    first = kernelbuild.build(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert kernelbuild.build(tmp_path) == first and first.stat().st_mtime_ns == mtime      # not compiled again
    monkeypatch.setenv("CC", "gcc")                                     # another compiler: another library
    other = kernelbuild.build(tmp_path)
    assert other != first and sorted(tmp_path.iterdir()) == sorted([first, other])


def test_a_failing_compiler_raises_and_leaves_only_the_remembered_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")                                   # exits 1
    with pytest.raises(RuntimeError, match="false"):
        kernelbuild.build(tmp_path)
    [marker] = tmp_path.iterdir()                                       # no library, no temp, no object file
    assert marker.name.endswith(kernelbuild.FAILED_SUFFIX) and "false" in marker.read_text()
    with pytest.raises(RuntimeError, match="remembered in"):
        kernelbuild.build(tmp_path)


FAKE_CC = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
if [ "$1" = "--version" ]; then echo "fakecc 1.0"; exit 0; fi
echo "fakecc: error: no such luck" >&2
exit 1
"""


def test_a_failed_build_is_not_retried_by_another_process(tmp_path):
    """The first process's compiler failure is written beside the library; a second process reads it and raises
    the same reason without running the compiler (only its --version, part of the key)."""
    cc = tmp_path / "fakecc"
    cc.write_text(FAKE_CC)
    cc.chmod(0o755)
    code = ("import sys; from engine import kernelbuild\ntry:\n    kernelbuild.build(sys.argv[1])\n"
            "except RuntimeError as e:\n    print(e)")
    env = {**os.environ, "CC": str(cc), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", code, str(tmp_path / "cache")], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert "no such luck" in runs[0].stdout and "remembered in" not in runs[0].stdout
    assert "no such luck" in runs[1].stdout and "remembered in" in runs[1].stdout
    compiles = [c for c in (tmp_path / "calls").read_text().splitlines() if c != "--version"]
    assert len(compiles) == 1 and " -c " in f" {compiles[0]} ", compiles          # the second run compiled nothing


def test_the_build_key_names_the_machine_the_compiler_and_the_c_library(monkeypatch):
    cc, args = "/usr/bin/cc", kernelbuild.CFLAGS
    base = kernelbuild.build_key(cc, args, ())
    assert kernelbuild.build_key(cc, args, ()) == base
    assert kernelbuild.build_key("/usr/bin/gcc", args, ()) != base
    assert kernelbuild.build_key(cc, args + kernelbuild.STRICT_FLAGS, ()) != base
    assert kernelbuild.build_key(cc, args, ("-fopenmp",)) != base
    for attr, value in (("_compiler_version", lambda cc: "cc 99.0"), ("_libc", lambda: "glibc 9.99")):
        with monkeypatch.context() as m:
            m.setattr(kernelbuild, attr, value)
            assert kernelbuild.build_key(cc, args, ()) != base, attr
    with monkeypatch.context() as m:
        m.setattr(kernelbuild.platform, "machine", lambda: "aarch64")
        assert kernelbuild.build_key(cc, args, ()) != base
    assert "-ffp-contract=off" in kernelbuild.CFLAGS


def test_the_strict_build_passes_and_loads_with_the_expected_abi(lin, tmp_path):
    """-Wall -Wextra -Werror: the tests' build of kernels.c has no warning; the library it makes has this
    module's ABI version and table layout."""
    import ctypes

    lib = ctypes.CDLL(str(kernelbuild.build(tmp_path, strict=True)))
    assert kernelbuild.abi_problem(lib) is None


def _fresh_library(monkeypatch, tmp_path):
    monkeypatch.setenv("CHATTTS_RENDER_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_LIB", [])


def test_a_library_of_another_abi_or_table_layout_is_not_used(lin, tmp_path, monkeypatch, caplog):
    _fresh_library(monkeypatch, tmp_path)
    monkeypatch.setattr(kernelbuild, "ABI_VERSION", kernelbuild.ABI_VERSION + 1)
    with caplog.at_level(logging.WARNING, logger="engine.kernelbuild"):
        assert not kernels.available()
    assert f"ABI version is {kernelbuild.ABI_VERSION - 1}" in caplog.text
    monkeypatch.undo()
    _fresh_library(monkeypatch, tmp_path)
    want = kernelbuild.expected_layout()
    monkeypatch.setattr(kernelbuild, "expected_layout", lambda: (want[0] + 8,) + want[1:])   # a field more
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="engine.kernelbuild"):
        assert not kernels.available()
    assert "table layout" in caplog.text


def test_a_library_built_ahead_is_loaded_without_a_compiler(lin, tmp_path, monkeypatch, caplog):
    """CHATTTS_RENDER_KERNELS_LIB (the container image's kernel, built in its build stage): loaded as it is where
    no compiler is, and checked like a built one; a library that cannot be loaded leaves the engine on oneDNN."""
    built = kernelbuild.build(tmp_path / "ahead")
    _fresh_library(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv(kernelbuild.LIB_ENV, str(built))
    assert kernels.available() and kernels.library()._name == str(built)
    assert not (tmp_path / "cache").exists(), "a library was built"
    _fresh_library(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv(kernelbuild.LIB_ENV, str(tmp_path / "missing.so"))
    with caplog.at_level(logging.WARNING, logger="engine.kernelbuild"):
        assert not kernels.available()
    assert "missing.so" in caplog.text and not (tmp_path / "cache").exists()


def test_without_the_kernel_the_engine_uses_onednn(tmp_path, monkeypatch, caplog):
    """No compiler (a warning, not an error) or CHATTTS_RENDER_KERNELS=off: the one back-end is the one without
    our kernels (oneDNN's packed linear, else MKL)."""
    from engine.cpupath import runnable

    monkeypatch.setenv("CHATTTS_RENDER_CACHE", str(tmp_path))          # nothing built there yet
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(kernels, "_LIB", [])                              # forget this process's loaded kernel
    with caplog.at_level(logging.WARNING, logger="engine.kernelbuild"):
        assert not kernels.available()
    assert "no C compiler" in caplog.text and list(tmp_path.iterdir()) == []
    [off] = runnable("fp32", False)
    assert off.path is None and off.kind == ("onednn" if onednn_available() else "mkl")
    with pytest.raises(RuntimeError, match="not available"):
        kernels.GemmLinear(torch.ones(8, 8))
    monkeypatch.delenv("CC")
    monkeypatch.setenv(kernels.ENV, "off")
    monkeypatch.setattr(kernels, "_LIB", [])
    assert not kernels.available() and list(tmp_path.iterdir()) == []
    assert runnable("fp32", False) == (off,)


def test_the_engine_runs_its_cpu_fp32_linears_on_the_kernel(lin):
    from engine.api import EngineOptions
    from engine.engine import Engine

    e = Engine.load(EngineOptions(model="random-tiny", dtype="fp32"))
    m = e.model
    assert e.path.dtype == "fp32" and not e.path.int8
    assert all(type(getattr(b, n)) is lin and getattr(b, n).kind == e.path.kind for b in m.llama.layers
               for n in ("wqkv", "wo", "w13", "w2"))
    assert isinstance(m.head_linear, lin)
    assert m.call_size(1, 8) == 1 and m.call_size(3, 8) == 3        # every size invariant: no padding rows
    assert isinstance(m.llama.attention, CStep)                        # and decode steps run whole in one call
    assert m.llama.attention.decode.kind == e.path.kind


# ------------------------------------------------------------------------------------- the whole decode step
def _llama(kind: str = "f32", heads=4, kv_heads=2):
    """A 3-layer Llama on our kernels' `kind` with random weights (GQA: 4 query heads over 2 kv heads)."""
    from engine.cpu import kind_linear, pack_linears
    from engine.llama import LlamaShape, build_llama

    s = LlamaShape(hidden=64, layers=3, heads=heads, kv_heads=kv_heads, ffn=96, rope_theta=10_000.0, eps=1e-6,
                   max_pos=64)
    g, D = torch.Generator().manual_seed(7), s.hidden // heads
    w = lambda *shape: torch.randn(*shape, generator=g) * 0.1                          # noqa: E731
    state = {"norm.weight": 1 + w(s.hidden)}
    for i in range(s.layers):
        p = f"layers.{i}."
        state.update({p + "self_attn.q_proj.weight": w(heads * D, s.hidden),
                      p + "self_attn.k_proj.weight": w(kv_heads * D, s.hidden),
                      p + "self_attn.v_proj.weight": w(kv_heads * D, s.hidden),
                      p + "self_attn.o_proj.weight": w(s.hidden, heads * D),
                      p + "mlp.gate_proj.weight": w(s.ffn, s.hidden) * 30,        # SiLU on both signs, far out
                      p + "mlp.up_proj.weight": w(s.ffn, s.hidden),
                      p + "mlp.down_proj.weight": w(s.hidden, s.ffn),
                      p + "input_layernorm.weight": 1 + w(s.hidden),
                      p + "post_attention_layernorm.weight": 1 + w(s.hidden)})
    return pack_linears(build_llama(s, state), kind_linear(kind))


def _step_inputs(model, seed=3):
    """5 rows in slots out of order, one of them a padding row (length 0), over a cache with earlier keys."""
    from engine.llama import KVCache

    g = torch.Generator().manual_seed(seed)
    cache = KVCache(model.s, 6, 40, "cpu", model.attention.kv_dtype)     # bf16 kernels: a bf16 cache
    for t in cache.k + cache.v:
        t.copy_(torch.randn(t.shape, generator=g))
    slots, lens = torch.tensor([3, 0, 5, 1, 2]), [7, 1, 30, 12, 0]
    pos = (torch.tensor(lens).clamp_min(1) - 1)[:, None]                          # [B, 1]: the key written
    return torch.randn(5, 1, model.s.hidden, generator=g), pos, cache, slots, lens


def _run(model, x, pos, cache, slots, lens, attention=None):
    """One call of `model` on `attention` (default: the model's own) -> [B, L, C]."""
    return model(x, (attention or model.attention).begin(cache, pos, slots, lens))


def _clone(cache):
    from copy import deepcopy

    return deepcopy(cache)


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_the_decode_step_equals_the_layer_by_layer_path(kind):
    """chattts_step (norms, RoPE, cache writes, attention, SiLU, residuals of every layer in one call) gives what
    Block.forward gives with the same kernels (attending through our kernel, or — a bf16 cache — SDPA over the
    widened keys) — output and the keys/values it writes.  The two compute norms, RoPE and SiLU apart (C and torch),
    so with activations rounded to bf16 or int8 as a linear takes them, an input one ulp apart may round to the
    next step: there the tolerance is that step's (2^-8, 1/127 of the row)."""
    model = _llama(kind)
    assert isinstance(model.attention, CStep)
    step = model.attention.decode
    assert isinstance(step, kernels.DecodeStep) and step.kind == kind
    bf16 = kernels.KINDS[kind][2] == "bf16"
    assert step.kv_dtype == (torch.bfloat16 if bf16 else torch.float32)
    x, pos, cache, slots, lens = _step_inputs(model)
    ref_cache = _clone(cache)
    y = _run(model, x, pos, cache, slots, lens)
    ref = _run(model, x, pos, ref_cache, slots, lens, PerRow() if bf16 else CAttention())
    tol = {"bf16": 2e-2, "int8": 5e-2}.get(kernels.ACTIVATIONS.get(kind, ""), 2e-5)
    torch.testing.assert_close(y, ref, atol=tol, rtol=tol / 2)
    for a, b in zip(cache.k + cache.v, ref_cache.k + ref_cache.v):
        torch.testing.assert_close(a.float(), b.float(), atol=tol, rtol=tol / 2)
    assert (step.times > 0).all()                                        # GEMM, attention, the rest: timed


@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_a_rows_decode_step_bits_depend_on_nothing_else_in_the_call(kind):
    """Each row alone, every prefix, another order, 1 or 2 threads: the same bits out and into the cache."""
    model = _llama(kind)
    x, pos, cache, slots, lens = _step_inputs(model)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        full = _clone(cache)
        ref = _run(model, x, pos, full, slots, lens)
        for b in range(5):
            c = _clone(cache)
            assert torch.equal(_run(model, x[b:b + 1], pos[b:b + 1], c, slots[b:b + 1], lens[b:b + 1]), ref[b:b + 1])
            assert all(torch.equal(t[slots[b]], u[slots[b]]) for t, u in zip(c.k + c.v, full.k + full.v)), b
        perm = [4, 2, 0, 3, 1]
        assert torch.equal(_run(model, x[perm], pos[perm], _clone(cache), slots[perm], [lens[i] for i in perm]),
                           ref[perm])
        torch.set_num_threads(2)
        assert torch.equal(_run(model, x, pos, _clone(cache), slots, lens), ref)
    finally:
        torch.set_num_threads(old)


def test_the_decode_step_refuses_what_is_outside_the_cache(lin):
    model = _llama()
    x, pos, cache, slots, lens = _step_inputs(model)
    with pytest.raises(ValueError, match="outside the cache"):
        _run(model, x, pos + 40, cache, slots, lens)                     # past S = 40
    with pytest.raises(ValueError, match="outside the cache"):
        _run(model, x, pos, cache, slots + 6, lens)                      # 6 slots
    with pytest.raises(ValueError, match="one position, slot and length each"):
        _run(model, x, pos, cache, slots, lens[:4])


def test_a_model_the_step_cannot_run_keeps_the_per_layer_path(lin):
    """Projections of mixed kernels (or padded output columns) get no fused step: decode attention on the kernel
    (CAttention); a projection not ours: per-row SDPA."""
    from engine.cpu import attach_kernels, quantize_weight

    model = _llama()
    model.layers[1].wo = kernels.GemmInt8Linear(*quantize_weight(model.layers[1].wo.weight))
    attach_kernels(model)
    assert type(model.attention) is CAttention
    model.layers[1].wo = PackedLinear(torch.randn(64, 64)) if onednn_available() else torch.nn.Linear(64, 64)
    attach_kernels(model)
    assert type(model.attention) is PerRow


# ------------------------------------------------------------------------------------------- the ctypes boundary
def test_the_linear_entry_points_refuse_what_c_would_misread(lin):
    lib = kernels.library()
    w = torch.randn(12, 16)
    with pytest.raises(ValueError, match="bfloat16"):
        lin(w.bfloat16())                                                # dtype of a weight
    with pytest.raises(ValueError, match="dimensions"):
        lin(w[0])                                                        # a 1-D weight
    with pytest.raises(ValueError, match="on meta"):
        lin(torch.empty(12, 16, device="meta"))                          # device
    f = lin(w)
    with pytest.raises(ValueError, match="K = 16"):
        f(torch.randn(3, 15))                                            # K
    with pytest.raises(ValueError, match="float64"):
        f(torch.randn(3, 16, dtype=torch.float64))                       # dtype of the input
    whole = f.packed
    f.packed = whole[:-1]
    with pytest.raises(ValueError, match="holds 255 values"):
        f(torch.randn(3, 16))                                            # a packed weight of another size
    f.packed = torch.stack([whole, whole], 1)[:, 0]
    with pytest.raises(ValueError, match="contiguous"):
        f(torch.randn(3, 16))
    from engine.cpu import quantize_weight

    q = kernels.GemmInt8Linear(*quantize_weight(w))
    scale, q.scale = q.scale, None
    with pytest.raises(ValueError, match="need column scales"):
        q(torch.randn(3, 16))                                            # int8 weights without their scales
    q.scale = scale[:15]
    with pytest.raises(ValueError, match="15 column scales for 16"):
        q(torch.randn(3, 16))
    with pytest.raises(ValueError, match="11 column scales for 12"):
        kernels.GemmInt8Linear(q.packed.new_zeros(12, 16), torch.ones(11))
    with pytest.raises(ValueError, match="int8"):
        kernels.GemmInt8Linear(w, torch.ones(12))                        # fp32 weights as int8
    with pytest.raises(ValueError, match="runs q8 or q8_512, not 'f32'"):
        kernels.GemmInt8Linear(*quantize_weight(w), "f32")               # a kind of another class
    with pytest.raises(ValueError, match="no kind 'f64'"):
        kernels.Packed(lib, w, "f64")


def test_decode_attention_refuses_slots_and_lengths_outside_the_cache(lin):
    g = torch.Generator().manual_seed(5)
    k, v = _cache(g)                                                     # 5 slots of 40 positions
    q = torch.randn(2, 4, 1, 16, generator=g)
    with pytest.raises(ValueError, match="length outside the cache"):
        kernels.decode_attention(torch.tensor([0, 1]), [3, 41])(q, k, v)          # would read past the buffer
    with pytest.raises(ValueError, match="length outside the cache"):
        kernels.decode_attention(torch.tensor([0, 1]), [3, -1])(q, k, v)
    with pytest.raises(ValueError, match="slot outside the cache"):
        kernels.decode_attention(torch.tensor([0, 5]), [3, 4])(q, k, v)
    attend = kernels.decode_attention(torch.tensor([0, 1]), [3, 4])
    with pytest.raises(ValueError, match="float64"):
        attend(q, k.double(), v.double())
    with pytest.raises(ValueError, match="v_cache"):
        attend(q, k, v[:, :, :39].contiguous())
    with pytest.raises(ValueError, match="cache's D"):
        attend(torch.randn(2, 4, 1, 8), k, v)
    with pytest.raises(ValueError, match="a slot and a length each"):
        attend(torch.randn(3, 4, 1, 16), k, v)
    with pytest.raises(ValueError, match="integers"):
        kernels.decode_attention(torch.tensor([0, 1]), [3.0, 4])


def test_the_decode_step_refuses_a_length_past_the_cache_and_a_foreign_cache(lin):
    from engine.llama import KVCache

    model = _llama()
    x, pos, cache, slots, lens = _step_inputs(model)                     # S = 40
    with pytest.raises(ValueError, match="length outside the cache"):
        _run(model, x, pos, cache, slots, [7, 1, 41, 12, 0])             # would attend past the buffer
    with pytest.raises(ValueError, match="float64"):
        _run(model, x.double(), pos, cache, slots, lens)
    with pytest.raises(ValueError, match="positions"):
        model.attention.decode(x, pos.float(), cache, slots, lens)
    other = KVCache(model.s, 6, 40, "cpu", torch.float32)
    other.k = other.k[:2]                                                # a cache of 2 layers for 3
    with pytest.raises(ValueError, match="2 layers"):
        _run(model, x, pos, other, slots, lens)
    other = KVCache(model.s, 6, 40, "cpu", torch.float32)
    other.slots = 7                                                      # geometry that lies about its slots
    with pytest.raises(ValueError, match=r"cache\.k has shape"):
        _run(model, x, pos, other, slots, lens)
    other = KVCache(model.s, 6, 40, "cpu", torch.float32)
    other.v[1] = other.v[1].transpose(2, 3).contiguous().transpose(2, 3)
    with pytest.raises(ValueError, match="contiguous"):
        _run(model, x, pos, other, slots, lens)


# ------------------------------------------------------------------------------------- the engine's name for it
def _version_in_a_process(**env) -> str:
    code = ("from engine.api import EngineOptions; from engine.engine import engine_version; "
            "print(engine_version('fp', EngineOptions(), 'fp32'))")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_cpu_engine_version_names_its_back_end_and_isa(lin):
    """Our kernel and oneDNN make different bits: different versions (so content keys); oneDNN's name carries
    the ISA it dispatches to, ONEDNN_MAX_CPU_ISA honoured."""
    ours = _version_in_a_process()
    off = _version_in_a_process(**{kernels.ENV: "off"})
    avx2 = _version_in_a_process(**{kernels.ENV: "off", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert ours.startswith("ours6-fp-fp32-cpu-kernels-aten_") and ours != off
    if onednn_available():
        assert "-cpu-onednn-avx2-aten_" in avx2
        assert off.startswith("ours6-fp-fp32-cpu-onednn-")
    else:
        assert "-cpu-mkl-" in off


# ----------------------------------------------------------------------------------------------- the wheel
SETUPTOOLS_LICENSE = 77              # the first setuptools that reads pyproject's license expression (PEP 639)


@pytest.mark.slow      # builds a wheel and a venv; the build and its cache in CI: the tests above
def test_the_wheel_ships_the_kernel_source_and_an_installed_engine_builds_it(lin, tmp_path):
    """A wheel built from the project (offline, no build isolation) and installed into a fresh venv: imported
    from outside the source tree, engine/kernels.c is inside the installed package and the kernel loads."""
    r = subprocess.run([sys.executable, "-c", "import setuptools; print(setuptools.__version__)"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or int(r.stdout.split(".")[0]) < SETUPTOOLS_LICENSE:
        unavailable(f"setuptools >= {SETUPTOOLS_LICENSE} (the test extra) is not installed: {r.stdout.strip()}")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    for pkg in ("engine", "flows", "tasks", "manifests"):
        subprocess.run(["cp", "-r", str(ROOT / pkg), str(src / pkg)], check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    r = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
                              str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    r = subprocess.run(pip + ["--python", str(py), "install", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    site = next((venv / "lib").glob("python*/site-packages"))
    import sysconfig

    (site / "parent_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")   # torch & co, not our tree
    code = ("import engine, engine.kernelbuild as b, engine.kernels as k; from pathlib import Path; "
            "print(Path(engine.__file__).parent); print(b.SOURCE.is_file()); print(k.available())")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**env, "CHATTTS_RENDER_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    where, has_source, available = r.stdout.split()
    assert Path(where).is_relative_to(site) and has_source == "True" and available == "True", r.stderr[-2000:]
    assert list((tmp_path / "cache" / "kernels").glob("kernels-*.so"))    # built from the installed kernels.c
