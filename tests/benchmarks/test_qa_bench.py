"""The QA cost benchmark on random-tiny, one round of the reader's sentences (4 segments): one run, three modes, one
JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable

pytest.importorskip("ChatTTS")


def test_one_run_renders_the_book_with_qa_off_suspect_and_full(tmp_path, capsys):
    from benchmarks import qa_bench as bench
    from tasks.qa.checker import checker_for
    from tasks.qa.options import QAOptions

    speech = corpus_path("speech", "transcripts.tsv").parent
    if not checker_for(QAOptions(mode="full")).available():
        unavailable("the QA extra or its Whisper base model is not installed (scripts/setup.sh test installs them)")
    out = tmp_path / "qa.json"
    assert bench.main(["--model", "random-tiny", "--threads", "1", "--copies", "1", "--speech", str(speech),
                       "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    modes = r["modes"]
    assert r["segments"] == 4 and set(modes) == {"off", "suspect", "full"}
    for m, got in modes.items():
        run = got["runs"][0]
        assert run["segments"] == 4 and run["counts"]["rendered"] == 4 and run["takes"] >= 4
        assert r["wall_ratio"][m] == pytest.approx(got["wall_s"] / modes["off"]["wall_s"], rel=1e-2)
        assert run["audio_s"] == pytest.approx(r["speech_s"], abs=0.2)       # the recordings' lengths, padded
    assert modes["off"]["asr_s"] == 0 and modes["off"]["encoder_s"] == 0 and modes["off"]["runs"][0]["verdicts"] == {
        "-": 4}
    full = modes["full"]["runs"][0]
    assert full["asr_calls"] >= 4 and full["asr_audio_s"] >= r["speech_s"]    # every take heard
    assert full["encoder_calls"] >= 4 and sum(full["verdicts"].values()) == 4 and "-" not in full["verdicts"]
    assert full["verdicts"].get("inconclusive", 0) >= 1                      # the title: too short to judge
    assert modes["suspect"]["runs"][0]["asr_calls"] <= full["asr_calls"]
    assert 0 < r["alone"]["asr_s_per_audio_s"] and 0 < r["alone"]["encoder_s_per_audio_s"]
    printed = capsys.readouterr().out
    assert "of off" in printed and "alone: ASR" in printed
