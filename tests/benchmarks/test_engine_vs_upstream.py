"""The engine benchmark end to end on random-tiny: upstream, ours fp32 and ours INT8 in one run, one JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path

pytest.importorskip("ChatTTS")


def test_one_run_measures_upstream_fp32_and_int8(tmp_path, capsys):
    from benchmarks import engine_vs_upstream as bench

    book = corpus_path("txt", "gutenberg-zh", "27166-0.txt")
    out = tmp_path / "bench.json"
    rc = bench.main(["--model", "random-tiny", "--n", "3", "--threads", "1", "--batch", "2", "--with-int8",
                     "--corpus", str(book), "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["n"] == 3 and len(r["forced_tokens"]) == 3
    sides = [r["upstream"], r["ours"], r["ours_int8"]]
    assert len({s["audio_s"] for s in sides}) == 1 and sides[0]["audio_s"] > 0      # the same workload
    assert r["upstream"]["batch"] == 2 and r["upstream"]["returned_audio_s"] >= r["upstream"]["audio_s"]
    for key, side in (("ratio", "ours"), ("ratio_int8", "ours_int8")):
        want = r[side]["audio_s_per_wall_s"] / r["upstream"]["audio_s_per_wall_s"]
        assert r[key] == pytest.approx(want, rel=1e-2)
    assert "+int8" not in r["ours"]["engine"] and r["ours_int8"]["engine"].endswith("+int8")
    assert 0.9 < r["int8_drift"]["cosine_min"] <= 1.0
    printed = capsys.readouterr().out
    assert "ratio_int8 (ours_int8 / upstream throughput)" in printed and "INT8 drift" in printed
