"""benchmarks/kernels_vs_torch.py on a tiny GPT: every variant runs, agrees with ours, and gets its ratio."""
from __future__ import annotations

import json

import pytest

from engine import kernels

pytestmark = pytest.mark.skipif(not kernels.available(), reason="engine/kernels.c not built")
TINY = ["--shape", "64", "2", "4", "128", "--keys", "24", "--threads", "1", "--warmup", "1", "--reps", "2"]


def _check(r: dict, rows: list[int], compiled: bool) -> None:
    from benchmarks import kernels_vs_torch as bench
    from engine.cpu import onednn_available

    onednn = onednn_available()
    expect = {("linears", "fp32"): {"ours", "mkl"} | ({"onednn"} if onednn else set()),
              ("linears", "int8"): set(bench.INT8),
              ("step", "fp32"): {"ours", "eager"} | ({"eager_onednn"} if onednn else set())
              | ({"compile"} if compiled else set()),
              ("step", "int8"): set(bench.STEP8)}
    assert {(c["level"], c["kind"], c["rows"]) for c in r["cases"]} == {(lv, k, b) for lv, k in expect for b in rows}
    for c in r["cases"]:
        assert set(c["ms"]) == expect[c["level"], c["kind"]], c
        base = c["ms"]["ours_int8" if c["kind"] == "int8" else "ours"]
        for name, ms in c["ms"].items():
            assert ms > 0 and c["ratio"][name] == pytest.approx(ms / base, abs=0.01)
            assert len(c["runs_ms"][name]) == r["repeat"]
        for name, d in c["max_diff"].items():                   # bf16 activations: rounded, looser
            assert 0 <= d <= (bench.BF16_TOLERANCE if name.endswith("_bf16") else bench.TOLERANCE), (name, d)
        assert bool(c["compile_s"]) == (compiled and c["level"] == "step" and c["kind"] == "fp32")


def test_tiny_run_measures_every_variant_against_ours(tmp_path, capsys):
    from benchmarks import kernels_vs_torch as bench

    out = tmp_path / "k.json"
    assert bench.main([*TINY, "--rows", "1", "3", "--repeat", "2", "--no-compile", "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["shape"] == {"hidden": 64, "layers": 2, "heads": 4, "ffn": 128} and r["repeat"] == 2
    _check(r, [1, 3], compiled=False)
    printed = capsys.readouterr().out
    assert "step fp32: ms per call (ratio to ours)" in printed and "linears int8" in printed


def test_a_variant_that_disagrees_fails_the_run(monkeypatch, capsys):
    from benchmarks import kernels_vs_torch as bench

    real = bench.AtenInt8Linear.forward
    monkeypatch.setattr(bench.AtenInt8Linear, "forward", lambda self, x: real(self, x) + 1.0)
    assert bench.main([*TINY, "--rows", "2", "--no-compile", "--levels", "linears"]) == 1
    assert "disagree" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_run_with_torch_compile(tmp_path):
    """torch.compile of Block.forward (inductor: needs a C++ compiler; tens of seconds on a small machine)."""
    from benchmarks import kernels_vs_torch as bench

    out = tmp_path / "k.json"
    assert bench.main([*TINY, "--rows", "2", "--levels", "step", "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert [c["kind"] for c in r["cases"]] == ["fp32", "int8"]
    assert r["cases"][0]["compile_s"]["compile"] > 0 and "compile" in r["cases"][0]["ms"]
