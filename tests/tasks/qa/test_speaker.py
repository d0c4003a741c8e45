"""The speaker encoder: resemblyzer's model fed by our own preprocessing.  The torchaudio mel spectrogram equals
librosa's (the one resemblyzer computes), the embedding equals resemblyzer's own on a 16 kHz recording, too little
speech gives no vector, and the manifest's text form round-trips."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("resemblyzer")                   # the qa extra

from tasks.qa.speaker import (
    DIM,
    N_MELS,
    SPEAKER_RATE,
    decode_vector,
    encode_vector,
    load_encoder,
    similarity,
    speech_only,
)
from tests.conftest import corpus_path

MEL_TOLERANCE = 1e-5              # relative to the spectrogram's peak (measured here: ~4e-6)


@pytest.fixture(scope="module")
def encoder():
    import torch

    torch.set_num_threads(1)
    return load_encoder("cpu")


def _voice_like(seconds: float, seed: int = 7) -> np.ndarray:
    """A seeded harmonic tone with vibrato and noise: speech-band energy, any length."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SPEAKER_RATE)) / SPEAKER_RATE
    f0 = 180 + 30 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SPEAKER_RATE
    x = sum(np.sin(k * phase) / k for k in range(1, 8)) + 0.05 * rng.standard_normal(t.size)
    return (0.1 * x / np.abs(x).max()).astype(np.float32)


@pytest.mark.slow      # a one-off equivalence with librosa; the embedding itself in CI
def test_the_torchaudio_mel_equals_librosas(encoder):
    from resemblyzer.audio import wav_to_mel_spectrogram  # librosa.feature.melspectrogram inside

    wav = _voice_like(2.3)
    ours, theirs = encoder.mel(wav), wav_to_mel_spectrogram(wav)
    assert ours.shape == theirs.shape and ours.shape[1] == N_MELS
    assert np.abs(ours - theirs).max() <= MEL_TOLERANCE * theirs.max()


@pytest.mark.slow      # a one-off equivalence with resemblyzer's own pipeline; the embedding's uses in CI
def test_the_embedding_equals_resemblyzers_own_on_a_16_khz_recording(encoder):
    import soundfile as sf
    from resemblyzer import preprocess_wav

    wav, rate = sf.read(corpus_path("speech", "zh_aishell1_S0764_W0121.wav"), dtype="float32")
    assert rate == SPEAKER_RATE                                  # no resampler in the comparison
    ours = encoder.embed(wav, rate)
    theirs = encoder._model.embed_utterance(preprocess_wav(wav))
    assert ours.vector.shape == (DIM,) and ours.vector.dtype == np.float32
    assert np.linalg.norm(ours.vector) == pytest.approx(1.0, abs=1e-5)
    assert similarity(ours.vector, theirs) > 0.9999
    assert ours.speech_s == pytest.approx(len(preprocess_wav(wav)) / SPEAKER_RATE)
    assert 3.0 < ours.speech_s <= len(wav) / rate


def test_a_resampled_recording_embeds_like_the_original(encoder):
    import soundfile as sf
    from scipy.signal import resample_poly

    wav, rate = sf.read(corpus_path("speech", "zh_aishell1_S0764_W0122.wav"), dtype="float32")
    at_24k = resample_poly(wav, 3, 2).astype(np.float32)
    a, b = encoder.embed(wav, rate), encoder.embed(at_24k, 24_000)
    assert abs(a.speech_s - b.speech_s) < 0.5                # the VAD's 30 ms windows fall a little differently
    assert similarity(a.vector, b.vector) > 0.95             # measured 0.978: far above any drift floor


def test_too_little_speech_gives_no_vector(encoder):
    short = encoder.embed(_voice_like(2.0), SPEAKER_RATE)
    assert short.vector is None and 0 < short.speech_s < 3.0
    assert encoder.embed(np.zeros(SPEAKER_RATE * 5, np.float32), SPEAKER_RATE).vector is None
    assert speech_only(np.zeros(0, np.float32), SPEAKER_RATE).size == 0
    longer = encoder.embed(_voice_like(2.0), SPEAKER_RATE, min_speech_s=1.0)
    assert longer.vector is not None


def test_vectors_round_trip_through_text():
    v = np.random.default_rng(1).standard_normal(DIM).astype(np.float32)
    v /= np.linalg.norm(v)
    s = encode_vector(v)
    assert isinstance(s, str) and len(s) == 4 * ((2 * DIM + 2) // 3)      # base64 of 512 bytes
    back = decode_vector(s)
    assert back.dtype == np.float32 and back.shape == (DIM,)
    assert np.abs(back - v).max() < 1e-3 and similarity(back, v) > 0.99999
    with pytest.raises(ValueError):
        decode_vector("not base64!")
