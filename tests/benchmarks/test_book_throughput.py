"""The book benchmark on random-tiny: a real render (flac + m4b) against the engine alone, one JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable

pytest.importorskip("ChatTTS")


@pytest.mark.slow      # a benchmark's whole run on random-tiny
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
    assert r["memory_bandwidth_gbs"] > 0 and r["read_bandwidth_gbs"] > 0 and r["decode_bound"] in ("memory", "compute")
    for key in ("", "path_"):           # the KV cache's bytes only lower the ceiling
        assert r[f"{key}ceiling_audio_s"] <= r[f"{key}ceiling_audio_s_weights_only"]
        assert r[f"{key}limit_fraction_weights_only"] == pytest.approx(
            r["engine_alone"]["audio_s_per_wall_s"] / r[f"{key}ceiling_audio_s_weights_only"], rel=1e-2)
        assert r[f"{key}step_mb"]["kv"] > 0 and r[f"{key}step_mb"]["weights"] > 0
    p = r["profile"]
    assert p["rows"] == 2 and p["step_ms"] > 0 and p["decoder_vocos_s_per_audio_s"] > 0
    if r["path"] != "none" and "step_gemm_gflops" in p:   # the step is one call of our kernels: its rates
        assert p["step_gemm_gflops"] > 0 and p["step_attention_gbs"] > 0
    assert r["vocoder"] == ("bf16" if "+vocoder_bf16" in r["engine"] else "fp32")
    assert ("vs_fp32_vocoder" in r) == (r["vocoder"] == "bf16")
    if "baseline" in r:                 # --dtype auto (the default) took another path than fp32 AVX2 here
        b = r["baseline"]
        assert b["path"] == bench.BASELINE_PATH and b["engine_alone"]["audio_s"] == pytest.approx(r["audio_s"])
        assert r["vs_fp32_avx2"] == pytest.approx(r["engine_alone"]["audio_s_per_wall_s"]
                                                  / b["engine_alone"]["audio_s_per_wall_s"], rel=1e-2)
    printed = capsys.readouterr().out
    assert "pipeline_overhead" in printed and "limit_fraction" in printed and "split:" in printed
    assert f"({r['path']}): roofline at the best float" in printed and "weights only" in printed
    assert "per-step profile (2 rows" in printed and "read-only" in printed


def test_a_baseline_that_is_not_an_fp32_path_is_refused(capsys):
    from benchmarks import book_throughput as bench

    assert bench.main(["--baseline", "int8-vnni", "--corpus", str(corpus_path("txt", "gutenberg-zh",
                                                                              "27166-0.txt"))]) == 2
    assert "--baseline int8-vnni: not an fp32 path" in capsys.readouterr().err


@pytest.mark.slow      # a benchmark's QA run on real speech; packing in CI: tests/tasks/qa
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


def test_chapter_clock_sees_the_stage_commit_chapter_one_while_rows_are_left(tmp_path):
    """ChapterClock wraps the synthesize stage's own commits: under "chapters" with two rows a batch, chapter 1
    of three is whole in the manifest while the other chapters' rows are still to render, and every chapter's
    time is inside the render (a clock that wraps a name the stage does not call sees every chapter at the end)."""
    import time

    from benchmarks.book_throughput import ChapterClock
    from engine.api import EngineOptions
    from flows.options import options_from_params
    from tasks import stages
    from tasks.synthesize.render import synthesize_book

    book = tmp_path / "book.txt"
    book.write_text("".join(f"第{n}章\n\n{n}月的春眠不觉晓。\n\n处处闻啼鸟，{n}日夜来风雨声。\n\n" for n in "一二三"),
                    encoding="utf-8")
    book_dir = stages.prepare(options_from_params(str(book), out=str(tmp_path / "out"), model="random-tiny",
                                                  max_batch=2))
    t0 = time.perf_counter()
    with ChapterClock(t0) as clock:
        counts = synthesize_book(book_dir, stages.get_engine(EngineOptions(model="random-tiny", max_batch=2)),
                                 schedule="chapters")
    wall = time.perf_counter() - t0
    assert counts["rendered"] == counts["total"] == 6 and clock.commits >= 3         # a heading and a segment each
    assert sorted(clock.whole, key=clock.whole.__getitem__) == [0, 1, 2]
    assert clock.left_at[0] >= 2 and clock.left_at[2] == 0          # chapter 1 whole, chapter 3 still to render
    assert 0 < clock.whole[0] < clock.whole[2] <= wall


@pytest.mark.slow      # two whole renders; the chapter schedule in CI: tests/tasks/synthesize, the studio
def test_listen_renders_both_schedules_and_reports_chapter_ones_share(tmp_path, capsys):
    """--listen-only: the segments as chapters, rendered with each schedule by the same engine; the shares and the
    cost are what the runs' numbers say (no timing is asserted: they are measurements)."""
    from benchmarks import book_throughput as bench

    out = tmp_path / "listen.json"
    assert bench.main(["--model", "random-tiny", "--threads", "1", "--batch", "2", "--segments", "6",
                       "--chapter-segments", "2", "--listen-only", "--corpus",
                       str(corpus_path("txt", "gutenberg-zh", "27166-0.txt")), "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    listen = r["listen"]
    assert (listen["chapter_count"], listen["chapter_segments"], r["segments"]) == (3, 2, 6)
    medians = listen["schedules"]
    for schedule in ("length", "chapters"):
        run = medians[schedule]
        assert 0 < run["first_chapter_s"] <= run["wall_s"]
        assert run["first_chapter_share"] == pytest.approx(run["first_chapter_s"] / run["wall_s"], abs=2e-3)
    assert medians["chapters"]["rows_left_at_first_chapter"] > 0    # chapter 1 whole before the book (batch 2)
    assert r["first_chapter_share"] == medians["chapters"]["first_chapter_share"]
    assert r["chapter_order_cost"] == pytest.approx(
        1 - medians["chapters"]["audio_s_per_wall_s"] / medians["length"]["audio_s_per_wall_s"], abs=1e-3)
    assert f"chapter_order_cost {r['chapter_order_cost']:+.4f}" in capsys.readouterr().out


@pytest.mark.slow      # a benchmark's refine run; the refine pass in CI: tests/engine, tests/flows/test_controls.py
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
    # The JSON rounds the split to 4 decimals and the wall to 2: the ratios recomputed from it agree within that.
    refine, speech, wall = r["split"]["refine_s"], r["split"]["engine_in_render_s"], r["render_wall_s"]
    assert r["refine_share"] == pytest.approx(refine / wall, abs=(5e-5 + refine / wall * 5e-3) / wall + 1e-4)
    assert r["refine_vs_speech"] == pytest.approx(refine / speech, abs=5e-5 * (1 + refine / speech) / speech + 1e-4)
    assert "refine_share" in capsys.readouterr().out
