"""Speaker embeddings for the drift gate: resemblyzer 0.1.4's VoiceEncoder (a 3-layer LSTM over 40-band mel frames,
weights pretrained.pt inside the package, 256-dim, 16 kHz), fed the way its preprocess_wav feeds it but without
its librosa path (librosa's first call costs ~15 s of numba JIT):

    resample to 16 kHz (polyphase) -> normalize_volume to -30 dBFS (increase only) -> webrtcvad trim of long
    silences (resemblyzer.audio.trim_long_silences) -> mel power spectrogram with torchaudio (librosa's filters:
    slaney scale and norm; matches librosa.feature.melspectrogram to ~4e-6, tested) -> the model on 1.6 s partial
    slices (VoiceEncoder.compute_partial_slices, rate 1.3/s, min coverage 0.75) -> mean -> L2-normalized.

A recording with less than MIN_SPEECH_S of speech after the trim gets no vector (Embedding.vector is None)."""
from __future__ import annotations

import base64
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasks.errors import QAUnavailable
from tasks.qa.asr import to_asr_rate
from tasks.qa.options import MIN_SPEECH_S

if TYPE_CHECKING:
    import numpy as np

SPEAKER_RATE = 16_000             # Hz: the encoder's input rate
N_FFT = 400                       # samples: 25 ms windows
HOP = 160                         # samples: 10 ms steps
N_MELS = 40
TARGET_DBFS = -30                 # dBFS: resemblyzer's volume normalization target (raised only)
PARTIAL_RATE = 1.3                # partial slices per second (resemblyzer's embed_utterance default)
MIN_COVERAGE = 0.75               # the last partial slice is kept when at least this much of it is audio
DIM = 256                         # the embedding's size
INSTALL_HINT = "pip install 'chattts-render[qa]'"


@dataclass(frozen=True)
class Embedding:
    vector: np.ndarray | None         # float32 [DIM], unit norm; None when speech_s < min_speech_s
    speech_s: float                   # s of speech after the VAD trim


class SpeakerEncoder:
    def __init__(self, model, device: str):
        import torchaudio

        self._model = model
        self.device = device
        self._mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=SPEAKER_RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS, norm="slaney",
            mel_scale="slaney", power=2.0, center=True, pad_mode="constant")

    def embed(self, audio: np.ndarray, sample_rate: int, min_speech_s: float = MIN_SPEECH_S) -> Embedding:
        """audio: float32 mono [samples] at sample_rate Hz."""
        import numpy as np
        import torch

        wav = speech_only(audio, sample_rate)
        speech_s = len(wav) / SPEAKER_RATE
        if speech_s < min_speech_s:
            return Embedding(vector=None, speech_s=speech_s)
        wav_slices, mel_slices = self._model.compute_partial_slices(len(wav), PARTIAL_RATE, MIN_COVERAGE)
        if wav_slices[-1].stop >= len(wav):
            wav = np.pad(wav, (0, wav_slices[-1].stop - len(wav)))
        mel = self.mel(wav)                                                      # [frames, N_MELS]
        mels = torch.from_numpy(np.stack([mel[s] for s in mel_slices])).to(self.device)   # [partials, 160, 40]
        with torch.no_grad():
            partials = self._model(mels).cpu().numpy()                           # [partials, DIM]
        raw = partials.mean(axis=0)
        return Embedding(vector=(raw / np.linalg.norm(raw)).astype(np.float32), speech_s=speech_s)

    def mel(self, wav: np.ndarray) -> np.ndarray:
        """float32 [frames, N_MELS] power mel spectrogram of a 16 kHz waveform (resemblyzer's, via torchaudio)."""
        import torch

        with torch.no_grad():
            return self._mel(torch.from_numpy(wav.astype("float32"))).T.contiguous().numpy()


def speech_only(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """float32 [samples] at 16 kHz: volume-normalized, long silences trimmed (resemblyzer's preprocess_wav)."""
    import numpy as np

    wav = to_asr_rate(audio, sample_rate)
    if not wav.size or not np.any(wav):
        return wav[:0]
    trim_long_silences, normalize_volume = _resemblyzer_audio()
    wav = normalize_volume(wav, TARGET_DBFS, increase_only=True)
    return np.asarray(trim_long_silences(wav), dtype=np.float32)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two embeddings."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def encode_vector(v: np.ndarray) -> str:
    """An embedding as text for the manifest: base64 of its float16 little-endian values."""
    import numpy as np

    return base64.b64encode(np.asarray(v, dtype="<f2").tobytes()).decode("ascii")


def decode_vector(s: str) -> np.ndarray:
    """encode_vector's text -> float32 [DIM]."""
    import numpy as np

    raw = base64.b64decode(s.encode("ascii"), validate=True)
    if len(raw) % 2:
        raise ValueError(f"a speaker vector is float16 values: {len(raw)} bytes is not a whole number of them")
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def load_encoder(device: str = "cpu") -> SpeakerEncoder:
    """resemblyzer's VoiceEncoder with its bundled weights.  Missing resemblyzer: QAUnavailable."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"speaker encoder device {device!r} must be cpu or cuda")
    _resemblyzer_audio()
    from resemblyzer import VoiceEncoder

    model = VoiceEncoder(device=device, verbose=False)
    model.eval()
    return SpeakerEncoder(model, device)


def _resemblyzer_audio():
    try:
        with warnings.catch_warnings():           # webrtcvad 2.0.10 imports pkg_resources (deprecated): noise
            warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
            from resemblyzer.audio import normalize_volume, trim_long_silences
    except ImportError:
        raise QAUnavailable("resemblyzer", f"the drift gate needs the qa extra: {INSTALL_HINT}") from None
    return trim_long_silences, normalize_volume
