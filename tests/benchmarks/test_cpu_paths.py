"""benchmarks/cpu_paths.py on one layer of the real shape: a step of every path this CPU has, split by the step's
own timers, and the bf16 linears beside torch's."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


def test_every_path_here_is_timed_with_its_split(tmp_path, capsys):
    from benchmarks import cpu_paths
    from engine import kernels
    from engine.cpupath import PATHS

    out = tmp_path / "paths.json"
    assert cpu_paths.main(["--layers", "1", "--rows", "2", "--keys", "9", "--rounds", "1", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    here = [p.name for p in PATHS if p.kind in kernels.kinds() and p.heads in kernels.kinds()]
    assert r["paths"] == here and [(s["rows"], s["keys"]) for s in r["steps"]] == [(2, 9)]
    for t in r["steps"][0]["paths"].values():
        assert t["step_ms"] > 0 and t["gemm_ms"] > 0 and t["attention_ms"] > 0
        assert t["gemm_ms"] + t["attention_ms"] + t["rest_ms"] <= t["step_ms"] * 1.05
    base = "fp32-avx512" if "fp32-avx512" in here else "fp32-avx2"
    vs = r["steps"][0]["vs_fp32"]
    assert vs["path"] == base and vs["ratio"][base] == 1.0 and set(vs["ratio"]) == set(here)
    [lin] = r["bf16_linears"]
    ours = {f"ours_{k}" for k in ("bf16", "amx_bf16") if k in kernels.kinds()}
    assert set(lin["ms_per_layer"]) == {"torch_bf16"} | ours
    out = capsys.readouterr().out
    assert "paths here:" in out and f"vs {base} (its step / each path's)" in out
