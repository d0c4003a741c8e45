"""The book benchmark on random-tiny: a real render (flac + m4b) against the engine alone, one JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable

pytest.importorskip("ChatTTS")


def test_render_against_engine_alone_with_split_and_limit(tmp_path, capsys):
    from benchmarks import book_throughput as bench

    book = corpus_path("txt", "gutenberg-zh", "27166-0.txt")
    out = tmp_path / "book.json"
    rc = bench.main(["--model", "random-tiny", "--threads", "1", "--batch", "2", "--corpus", str(book),
                     "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["batch"] == 2 and r["segments"] == bench.BATCHES * 2 == r["render_counts"]["rendered"]
    assert r["outputs"] == ["001 - 第一章.flac", "nahan.m4b"]
    assert sum(r["split"].values()) == pytest.approx(r["render_wall_s"], abs=0.05)
    assert 0 < r["split"]["engine_in_render_s"] < r["render_wall_s"]
    assert r["pipeline_overhead"] == pytest.approx(1 - r["engine_alone"]["wall_s"] / r["render_wall_s"], abs=1e-3)
    assert r["limit_fraction"] == pytest.approx(r["engine_alone"]["audio_s_per_wall_s"] / r["ceiling_audio_s"],
                                                rel=1e-2)
    assert r["path_limit_fraction"] == pytest.approx(r["engine_alone"]["audio_s_per_wall_s"]
                                                     / r["path_ceiling_audio_s"], rel=1e-2)
    assert r["engine_alone"]["audio_s"] == pytest.approx(r["audio_s"]) and r["audio_s"] > 0
    assert r["memory_bandwidth_gbs"] > 0 and r["decode_bound"] in ("memory", "compute")
    if "baseline" in r:                 # --dtype auto (the default) took another path than fp32 AVX2 here
        b = r["baseline"]
        assert b["path"] == bench.BASELINE_PATH and b["engine_alone"]["audio_s"] == pytest.approx(r["audio_s"])
        assert r["vs_fp32_avx2"] == pytest.approx(r["engine_alone"]["audio_s_per_wall_s"]
                                                  / b["engine_alone"]["audio_s_per_wall_s"], rel=1e-2)
    printed = capsys.readouterr().out
    assert "pipeline_overhead" in printed and "limit_fraction" in printed and "split:" in printed
    assert f"({r['path']}): roofline at the best float" in printed


def test_qa_full_measures_the_qa_share_on_the_readers_speech(tmp_path, capsys):
    """--qa full: the reader's book (4 segments of real speech) rendered with --qa off and --qa full by the same
    loaded engine; qa_fraction is full's best wall over off's, every take of full heard (all pass), none of off."""
    from benchmarks import book_throughput as bench
    from tasks.qa.checker import checker_for
    from tasks.qa.options import QAOptions

    if not checker_for(QAOptions(mode="full")).available():
        unavailable("the QA extra or its Whisper base model is not installed (scripts/setup.sh test installs them)")
    out = tmp_path / "book.json"
    assert bench.main(["--model", "random-tiny", "--threads", "1", "--batch", "2", "--segments", "4", "--corpus",
                       str(corpus_path("txt", "gutenberg-zh", "27166-0.txt")), "--qa", "full", "--speech",
                       str(corpus_path("speech", "transcripts.tsv").parent), "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    qa = r["qa"]
    assert qa["segments"] == 4 and qa["asr_model"] == "base" and qa["speech_s"] > 20
    best = {m: min(run["wall_s"] for run in qa["runs"][m]) for m in ("off", "full")}
    assert qa["best_wall_s"] == best and r["qa_fraction"] == pytest.approx(best["full"] / best["off"] - 1, abs=2e-4)
    off, full = qa["runs"]["off"][0], qa["runs"]["full"][0]
    assert off["asr_calls"] == off["encoder_calls"] == 0 and off["verdicts"] == {"-": 4} and off["takes"] == 4
    assert full["asr_calls"] >= 1 and full["encoder_calls"] >= 4 and full["verdicts"] == {"pass": 4}
    assert full["takes"] == 4                                      # right recordings: nothing re-taken
    assert f"qa_fraction {r['qa_fraction']:.4f}" in capsys.readouterr().out


def test_refine_share_is_measured_in_the_same_render(tmp_path, capsys):
    """--refine: the render runs the refine-text pass, and its wall time is its own line of the split."""
    from benchmarks import book_throughput as bench

    book = corpus_path("txt", "gutenberg-zh", "27166-0.txt")
    out = tmp_path / "book.json"
    assert bench.main(["--model", "random-tiny", "--threads", "1", "--batch", "2", "--segments", "3", "--refine",
                       "--corpus", str(book), "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert 0 < r["split"]["refine_s"] < r["render_wall_s"] and r["split"]["synthesize_outside_engine_s"] >= 0
    assert sum(r["split"].values()) == pytest.approx(r["render_wall_s"], abs=0.05)
    assert r["refine_share"] == pytest.approx(r["split"]["refine_s"] / r["render_wall_s"], abs=1e-3)
    assert r["refine_vs_speech"] == pytest.approx(r["split"]["refine_s"] / r["split"]["engine_in_render_s"], rel=1e-2)
    assert "refine_share" in capsys.readouterr().out
