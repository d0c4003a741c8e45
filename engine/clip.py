"""Voices from a recording (`--voice clip:PATH`): decode, check, resample, encode into a sample prompt.

    samples, rate = read_clip(path)            # at the edge (parse_voice_spec): decode and check, no model
    voice = clip_voice(model, path, text)      # once the model is loaded: a prompt voice string

The recording may be in any format ffmpeg decodes: pydub reads it (WAV itself, everything else through
ffmpeg, `$FFMPEG` or PATH) — a user's one short file, where pydub's whole-file `AudioSegment` is the right
tool (chapter audio streams through tasks/audio/ffmpeg.py instead).  Channels are averaged, the rate is
brought to 24 kHz with torchaudio's sinc resampler, and ChatTTS's DVAE encoder turns the waveform into audio
codes exactly as upstream `Chat.sample_audio_speaker` does (it is called).  The codes and the transcript
become a prompt voice (engine.voicestring.Voice: no speaker embedding, `[empty_spk]`, as upstream without spk_emb);
the same encoding turns the engine's own rendering of a reference passage into an anchored voice.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from engine.units import SAMPLE_RATE
from engine.voicestring import Voice, VoiceError

MIN_SECONDS = 3.0                  # s: a shorter clip carries too little of a voice
MAX_SECONDS = 30.0                 # s: a longer one costs ~47 prompt tokens per second on every segment
SILENT_PEAK_DBFS = -50.0           # dBFS: a clip whose peak stays below this is silent
ORIGIN_HASH_CHARS = 16             # hex chars of the recording's sha256 in a clip voice's origin


def read_clip(path: Path):
    """(samples float32 mono (n,), sample rate) of a recording; VoiceError naming the file when it cannot be
    decoded, lasts under MIN_SECONDS or over MAX_SECONDS, or is silent.  At most MAX_SECONDS + 1 s is decoded
    from a compressed file (a long file is not read whole)."""
    import numpy as np
    from pydub import AudioSegment

    AudioSegment.converter = os.environ.get("FFMPEG") or shutil.which("ffmpeg") or "ffmpeg"
    try:
        seg = AudioSegment.from_file(str(path), duration=MAX_SECONDS + 1)
        pcm = np.asarray(seg.get_array_of_samples(), dtype=np.float64).reshape(-1, seg.channels)   # (n, ch)
    except FileNotFoundError as e:                # the file went away, or ffmpeg is not installed
        gone = not Path(path).exists()
        raise VoiceError(f"{path}: {'no such recording' if gone else f'cannot decode it: {e.filename} not found'}"
                         ) from None
    except Exception as e:  # noqa: BLE001 — pydub/ffmpeg raise many types: CouldntDecodeError, bad WAVs, 64-bit
        first = (str(e).strip().splitlines() or [""])[0][:120]
        raise VoiceError(f"{path}: cannot decode the recording ({type(e).__name__}{': ' + first if first else ''})"
                         ) from None
    if pcm.size == 0:
        raise VoiceError(f"{path}: the recording holds no audio")
    samples = (pcm.mean(axis=1) / float(1 << (8 * seg.sample_width - 1))).astype(np.float32)     # (n,)
    seconds = samples.size / seg.frame_rate
    if seconds < MIN_SECONDS:
        raise VoiceError(f"{path}: the recording lasts {seconds:.1f} s; a voice clip must last "
                         f"{MIN_SECONDS:g}-{MAX_SECONDS:g} s")
    if seconds > MAX_SECONDS:
        raise VoiceError(f"{path}: the recording lasts over {MAX_SECONDS:g} s; a voice clip must last "
                         f"{MIN_SECONDS:g}-{MAX_SECONDS:g} s (cut it)")
    peak = float(np.abs(samples).max())
    if peak <= 10 ** (SILENT_PEAK_DBFS / 20):
        level = f"{20 * np.log10(peak):.0f} dBFS" if peak > 0 else "digital silence"
        raise VoiceError(f"{path}: the recording is silent (peak {level})")
    return samples, seg.frame_rate


def clip_audio(path: Path):
    """The recording as float32 mono at SAMPLE_RATE (n,), checked (read_clip)."""
    import numpy as np
    import torch
    import torchaudio.functional as AF

    samples, rate = read_clip(path)
    if rate == SAMPLE_RATE:
        return samples
    x = torch.from_numpy(samples)[None]                                   # (1, n)
    return AF.resample(x, rate, SAMPLE_RATE)[0].numpy().astype(np.float32)   # (n * 24000 / rate,)


def clip_origin(path: Path) -> str:
    """`clip:<sha256 of the recording's bytes>`: a stored clip voice names the file it was made from."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return f"clip:{digest[:ORIGIN_HASH_CHARS]}"


def sample_prompt(model: Any, wav) -> str:
    """The spk_smp string of a 24 kHz waveform: upstream `Chat.sample_audio_speaker` (DVAE encoder, then
    `Speaker.encode_prompt`).  `model`: a LoadedModel or a loaded Chat."""
    chat = getattr(model, "chat", model)
    return chat.sample_audio_speaker(wav)


def clip_voice(model: Any, path: Path, text: str) -> str:
    """The prompt voice string of a recording and its transcript (no speaker embedding)."""
    wav = clip_audio(path)
    return Voice(spk_emb=None, spk_smp=sample_prompt(model, wav), txt_smp=text,
                 origin=clip_origin(path)).to_string()
