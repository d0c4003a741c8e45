"""The engine benchmark end to end on random-tiny: sorted and document-order upstream, ours fp32, INT8 and bf16
at the same batch in one run, one JSON with the ratios, the limits and the per-step profile."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("ChatTTS")


@pytest.mark.slow      # a benchmark's whole run; token equality with upstream in CI: tests/engine
def test_one_run_measures_both_baselines_and_every_dtype(tmp_path, capsys):
    from benchmarks import engine_vs_upstream as bench

    book = tmp_path / "book.txt"         # three segments of 73, 184, 73 tokens (the corpus's first three: 1262)
    book.write_text("第一章　山川\n　　春眠不觉晓，处处闻啼鸟，夜来风雨声。\n\n"
                    "第二章　草木\n　　白日依山尽，黄河入海流。\n", encoding="utf-8")
    out = tmp_path / "bench.json"
    rc = bench.main(["--model", "random-tiny", "--n", "3", "--threads", "1", "--batch", "2", "--with-int8",
                     "--with-bf16", "--doc-order", "--corpus", str(book), "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["n"] == 3 and len(r["forced_tokens"]) == 3 and r["batch"] == 2
    sides = [r["upstream"], r["upstream_doc_order"], r["ours"], r["ours_int8"], r["ours_bf16"]]
    assert len({s["audio_s"] for s in sides}) == 1 and sides[0]["audio_s"] > 0      # the same workload
    assert r["upstream"]["batch"] == r["upstream_doc_order"]["batch"] == 2
    f = r["forced_tokens"]                       # sorted: [184, 73] then [73]; document order: [73, 184], [73]
    assert r["upstream"]["row_steps"] == 2 * max(f) + min(f)
    assert r["upstream_doc_order"]["row_steps"] == 2 * max(f[:2]) + f[2]
    for key, side, base in (("ratio", "ours", "upstream"), ("ratio_doc_order", "ours", "upstream_doc_order"),
                            ("ratio_int8", "ours_int8", "upstream"), ("ratio_bf16", "ours_bf16", "upstream")):
        want = r[side]["audio_s_per_wall_s"] / r[base]["audio_s_per_wall_s"]
        assert r[key] == pytest.approx(want, rel=1e-2)
    assert "+int8" not in r["ours"]["engine"] and r["ours_int8"]["engine"].endswith("+int8")
    assert "-bf16-cpu" in r["ours_bf16"]["engine"]
    for d in ("int8_drift", "bf16_drift"):
        assert 0.9 < r[d]["cosine_min"] <= 1.0 and r[d]["decoder_vocos_snr_db"] > 0
    from engine import kernels

    w8a8 = "int8-vnni" if kernels.available() else None           # weight-only INT8 multiplies in fp32 (limits.py)
    int8_peak = {"int8"} if r["ours_int8"]["path"] in (w8a8, None) else set()
    assert set(r["peak_gemm_gflops"]) == {"fp32", "bf16"} | int8_peak and min(r["peak_gemm_gflops"].values()) > 0
    assert r["memory_bandwidth_gbs"] > 0
    for side in ("ours", "ours_int8", "ours_bf16"):
        lim = r["limits"][side]
        assert lim["path"] == (r[side]["path"] or lim["path"])
        for key in ("", "path_"):        # against the best float dtype's roofline, and the side's own path's
            assert lim[f"{key}limit_fraction"] == pytest.approx(
                r[side]["audio_s_per_wall_s"] / lim[f"{key}ceiling_audio_s"], rel=1e-2)
        p = lim["profile"]
        parts = sum(p[k] for k in ("gemm_ms", "attention_ms", "sampling_ms", "other_ms"))
        assert p["gemm_ms"] > 0 and p["attention_ms"] > 0 and p["sampling_ms"] > 0
        assert parts == pytest.approx(p["step_ms"], rel=0.05)
    printed = capsys.readouterr().out
    for words in ("ratio_int8 (ours_int8 / upstream throughput", "ratio_doc_order (ours / upstream_doc_order",
                  "int8_drift", "bf16_drift", "per-step profile", "limit_fraction", "benchmark wall time",
                  "batch 2 on every side"):
        assert words in printed


def test_median_is_the_middle_run_with_every_wall_time():
    from benchmarks.engine_vs_upstream import _median

    runs = [{"audio_s_per_wall_s": v, "wall_s": w} for v, w in ((3.0, 1.0), (1.0, 3.0), (2.0, 1.5), (4.0, 0.7))]
    m = _median(runs)
    assert m["audio_s_per_wall_s"] == 2.0 and m["runs_wall_s"] == [1.0, 3.0, 1.5, 0.7]
    assert _median(runs[:3])["audio_s_per_wall_s"] == 2.0
