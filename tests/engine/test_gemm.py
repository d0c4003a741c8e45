"""engine/gemm.c through engine/gemm.py: it agrees with torch, a row's bits never depend on the call (rows, chunk,
threads), the build is cached by content, and the engine falls back to oneDNN where it cannot be used."""
from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")

from engine import gemm  # noqa: E402
from engine.llama import PackedLinear, cpu_linear, onednn_available  # noqa: E402
from tests.conftest import unavailable  # noqa: E402


@pytest.fixture
def lin():
    if not gemm.available():
        unavailable("engine/gemm.c is not available here (no AVX2/FMA or no C compiler)")
    return gemm.GemmLinear


@pytest.mark.parametrize("n, k", [(48, 64), (40, 37), (13, 96), (2504, 64), (8, 1)])
def test_equals_torch_linear(lin, n, k):
    """16-column blocks, a last block of 8, N padded to 8 (13), the ChatTTS heads' 2504, odd and tiny K."""
    g = torch.Generator().manual_seed(n * 1000 + k)
    w, x = torch.randn(n, k, generator=g), torch.randn(2, 7, k, generator=g)   # [..., K] inputs keep their shape
    y = lin(w)(x)
    assert y.shape == (2, 7, n)
    torch.testing.assert_close(y, x @ w.t(), atol=1e-4, rtol=1e-4)


def test_a_rows_bits_depend_on_nothing_else_in_the_call(lin):
    """Every call size 1..14 (ragged chunks of 6), each row alone, and 1 or 2 threads: the same bits."""
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(200, 96, generator=g), torch.randn(14, 96, generator=g)
    f = lin(w)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = f(x)
        for m in range(1, 15):
            assert torch.equal(f(x[:m]), ref[:m]), m
            assert torch.equal(f(x[14 - m:]), ref[14 - m:]), m          # rows in other chunk positions
        for i in range(14):
            assert torch.equal(f(x[i:i + 1]), ref[i:i + 1]), i
        torch.set_num_threads(2)
        assert torch.equal(f(x), ref)
        assert torch.equal(f(x[3:8]), ref[3:8])
    finally:
        torch.set_num_threads(old)


def test_a_non_contiguous_input_is_taken_as_its_values(lin):
    g = torch.Generator().manual_seed(2)
    w, x = torch.randn(32, 24, generator=g), torch.randn(24, 5, generator=g)
    assert torch.equal(lin(w)(x.t()), lin(w)(x.t().contiguous()))


def test_the_build_is_cached_by_source_flags_and_compiler(lin, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "cc")
    first = gemm.build(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert gemm.build(tmp_path) == first and first.stat().st_mtime_ns == mtime      # not compiled again
    monkeypatch.setenv("CC", "gcc")                                     # another compiler: another library
    other = gemm.build(tmp_path)
    assert other != first and sorted(tmp_path.iterdir()) == sorted([first, other])


def test_a_failing_compiler_raises_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")                                   # exits 1
    with pytest.raises(RuntimeError, match="false"):
        gemm.build(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_without_the_kernel_the_engine_uses_onednn(tmp_path, monkeypatch, caplog):
    """No compiler (a warning, not an error) or CHATTTS_RENDER_GEMM=off: cpu_linear() is oneDNN's."""
    monkeypatch.setenv("CHATTTS_RENDER_CACHE", str(tmp_path))          # nothing built there yet
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(gemm, "_LIB", [])                              # forget this process's loaded kernel
    with caplog.at_level(logging.WARNING, logger="engine.gemm"):
        assert not gemm.available()
    assert "no C compiler" in caplog.text and list(tmp_path.iterdir()) == []
    assert cpu_linear() is (PackedLinear if onednn_available() else None)
    with pytest.raises(RuntimeError, match="not available"):
        gemm.GemmLinear(torch.ones(8, 8))
    monkeypatch.delenv("CC")
    monkeypatch.setenv(gemm.ENV, "off")
    monkeypatch.setattr(gemm, "_LIB", [])
    assert not gemm.available() and list(tmp_path.iterdir()) == []


def test_the_engine_runs_its_cpu_fp32_linears_on_the_kernel(lin):
    from engine.api import EngineOptions
    from engine.engine import Engine

    m = Engine.load(EngineOptions(model="random-tiny")).model
    assert cpu_linear() is lin
    assert all(isinstance(getattr(b, n), lin) for b in m.llama.layers for n in ("wqkv", "wo", "w13", "w2"))
    assert isinstance(m.head_linear, lin)
    assert m.call_size(1, 8) == 1 and m.call_size(3, 8) == 3        # every size invariant: no padding rows
