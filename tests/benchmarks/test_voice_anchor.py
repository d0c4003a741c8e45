"""The voice-anchor benchmark end to end on random-tiny: plain and anchored sides of one workload, one JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path

pytest.importorskip("ChatTTS")


def test_one_run_measures_plain_and_anchored(tmp_path, capsys):
    from benchmarks import voice_anchor as bench
    from tasks.synthesize.anchor import ANCHOR_TEXT

    book = corpus_path("txt", "gutenberg-zh", "27166-0.txt")
    out = tmp_path / "bench.json"
    assert bench.main(["--model", "random-tiny", "--n", "2", "--threads", "1", "--corpus", str(book),
                       "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["n"] == 2 and r["plain"]["audio_s"] == r["anchored"]["audio_s"] > 0     # the same workload
    assert r["anchor_text"] == ANCHOR_TEXT and r["anchor_once_s"] > 0
    extra = r["prompt_tokens_anchored_mean"] - r["prompt_tokens_plain_mean"]
    assert extra == r["anchor_prompt_tokens"] > len(ANCHOR_TEXT)                     # its text and its codes
    assert r["throughput_ratio"] == pytest.approx(
        r["anchored"]["audio_s_per_wall_s"] / r["plain"]["audio_s_per_wall_s"], rel=1e-2)
    assert "throughput anchored / plain" in capsys.readouterr().out
