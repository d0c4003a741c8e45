"""benchmarks/vocoder_batching.py on random-tiny: both sides decode the same rows, one JSON with the ratio."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("ChatTTS")


def test_alone_and_batched_decode_the_same_rows(tmp_path, capsys):
    from benchmarks import vocoder_batching as bench

    out = tmp_path / "v.json"
    assert bench.main(["--model", "random-tiny", "--rows", "3", "--tokens", "12", "--threads", "1",
                       "--repeat", "2", "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["rows"] == 3 and len(r["runs_s"]["alone"]) == len(r["runs_s"]["batched"]) == 2
    s = r["s_per_audio_s"]
    assert r["ratio_alone_over_batched"] == pytest.approx(s["alone"] / s["batched"], rel=0.05)
    assert 0 <= r["max_diff_batched_vs_alone"] < 1e-3                 # the same rows, rounded differently
    assert "alone / batched" in capsys.readouterr().out
