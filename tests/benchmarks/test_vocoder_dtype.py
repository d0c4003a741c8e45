"""benchmarks/vocoder_dtype.py on random-tiny: bf16 against fp32 Decoder + Vocos on the engine's own rows, the SNR,
and the ASR check's verdicts on real speech with that error added."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable

pytest.importorskip("ChatTTS")


def test_drift_speed_and_the_asr_proxy(tmp_path, capsys):
    from benchmarks import vocoder_dtype as bench
    from tasks.qa.checker import checker_for
    from tasks.qa.options import QAOptions

    speech = corpus_path("speech", "transcripts.tsv").parent
    if not checker_for(QAOptions(mode="full")).available():
        unavailable("the QA extra or its Whisper base model is not installed (scripts/setup.sh test installs them)")
    out = tmp_path / "v.json"
    assert bench.main(["--model", "random-tiny", "--rows", "2", "--tokens", "20", "--repeat", "1", "--threads", "1",
                       "--corpus", str(corpus_path("txt", "gutenberg-zh", "27166-0.txt")), "--speech", str(speech),
                       "--clips", "2", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["rows"] == 2 and r["audio_s"] > 0 and set(r["s_per_audio_s"]) == {"fp32", "bf16"}
    assert r["fp32_over_bf16"] == pytest.approx(r["s_per_audio_s"]["fp32"] / r["s_per_audio_s"]["bf16"], rel=1e-2)
    snr = r["snr_db"]
    assert 15 < snr["min"] <= snr["median"] and len(snr["rows"]) == 2 and snr["min"] == min(snr["rows"])
    asr = r["asr"]
    assert asr["clips"] == 2 and list(asr["verdicts"]) == ["clean", f"snr_{snr['min']:.1f}dB",
                                                           f"snr_{snr['min'] - bench.MARGIN_DB:.1f}dB"]
    assert all(len(v) == 2 for v in asr["verdicts"].values())
    assert asr["unchanged"] == (not asr["changed"][f"snr_{snr['min']:.1f}dB"])
    assert "drift of bf16 against fp32: SNR" in capsys.readouterr().out


def test_perturbed_speech_has_the_snr_asked():
    np = pytest.importorskip("numpy")
    from benchmarks.vocoder_dtype import perturbed, snr_db

    g = np.random.default_rng(0)
    audio, error = g.standard_normal(16000).astype(np.float32), g.standard_normal(5000).astype(np.float32)
    for snr in (30.0, 12.5):
        assert snr_db(audio, perturbed(audio, 16000, error, snr)) == pytest.approx(snr, abs=0.05)
