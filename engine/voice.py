"""Voices: ChatTTS speaker-embedding strings ("spk_emb"), sampled deterministically or given by the user.

A spk_emb string is ChatTTS's own format: base16384 text of the raw-LZMA2-compressed float16 speaker vector
(GPT hidden size values).  The string, not the seed, is what a book stores: it sounds the same everywhere.

A user's voice goes through two steps, the one parser of the project:

    spec = parse_voice_spec("seed:1234")        # at the edge (CLI, flow parameters): form only, no model
    spk_emb = resolve_voice(spec, model)        # once the model is loaded: sample, or check the size
"""
from __future__ import annotations

import lzma
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED_PREFIX = "seed:"                     # case-insensitive: "seed:7", "SEED: 7"
MAX_SEED = 2**63 - 1
# Raw LZMA2 at preset 9e: the filter chain ChatTTS (Speaker._encode / _decode) uses for spk_emb strings.
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
# A spec that names a file: it holds a path separator, starts with "~" or ends in a file suffix.  A spk_emb
# string is base16384 text (CJK-range characters), so it never looks like this.
_PATH_LIKE = re.compile(r"[/\\]|^~|\.[A-Za-z0-9]{1,8}$")


class VoiceError(ValueError):
    """A voice spec that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class VoiceSpec:
    """A user's voice, checked for form: a seed to sample a voice with, or a spk_emb string (typed, or read from
    a file).  `source` is what the user wrote, for messages."""
    source: str
    seed: int | None = None
    spk_emb: str | None = None


def parse_voice_spec(spec: str) -> VoiceSpec:
    """The one parser of voice specs (no model needed):

    - "seed:1234"           a voice sampled with sample_voice(model, 1234); the seed is in 0..2**63-1
    - "path/to/voice.txt"   a UTF-8 text file holding one spk_emb string (surrounding whitespace ignored);
                            any spec with a path separator, a leading "~" or a file suffix is a path
    - anything else         a spk_emb string itself

    A spk_emb string must decode to finite float16 values.  Raises VoiceError with one line otherwise."""
    s = (spec or "").strip()
    if not s:
        raise VoiceError("empty voice: use seed:<n>, a spk_emb string, or a file holding one")
    if s.lower().startswith(SEED_PREFIX):
        num = s[len(SEED_PREFIX):].strip()
        try:
            seed = int(num)
        except ValueError:
            raise VoiceError(f"voice {s!r}: the seed must be an integer") from None
        if not 0 <= seed <= MAX_SEED:
            raise VoiceError(f"voice {s!r}: the seed must be in 0..2**63-1")
        return VoiceSpec(s, seed=seed)
    if _PATH_LIKE.search(s):
        p = Path(s).expanduser()
        try:
            text = p.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise VoiceError(f"{p}: no such voice file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise VoiceError(f"{p}: cannot read voice file ({type(e).__name__})") from None
        if not text:
            raise VoiceError(f"{p}: voice file is empty")
        decode_spk_emb(text, where=str(p))
        return VoiceSpec(s, spk_emb=text)
    decode_spk_emb(s)
    return VoiceSpec(s, spk_emb=s)


def resolve_voice(spec: VoiceSpec, model: Any) -> str:
    """The spk_emb string of a parsed spec for this model: sampled from the seed, or the given string once its
    size matches the model's hidden size (VoiceError otherwise).  `model`: a LoadedModel or a loaded Chat."""
    if spec.seed is not None:
        return sample_voice(model, spec.seed)
    speaker_vector(spec.spk_emb or "", model, where=spec.source[:40])
    return spec.spk_emb or ""


def speaker_vector(spk_emb: str, model: Any, where: str = "voice"):
    """The float16 speaker vector of a spk_emb string (numpy, (hidden,)), checked against the model's hidden size
    (VoiceError otherwise)."""
    dim = int(_speaker(model).dim)
    vec = decode_spk_emb(spk_emb, where=where)
    if vec.shape != (dim,):
        raise VoiceError(f"{where}: speaker embedding has {vec.size} values, this model needs {dim}")
    return vec


def encode_spk_emb(vec) -> str:
    """A float vector (numpy or torch, any float dtype) as a spk_emb string, byte for byte as ChatTTS writes it."""
    import numpy as np
    import pybase16384 as b14

    arr = np.asarray(vec.detach().cpu().numpy() if hasattr(vec, "detach") else vec, dtype=np.float16)
    return b14.encode_to_string(lzma.compress(arr.tobytes(), format=lzma.FORMAT_RAW, filters=LZMA_FILTERS))


def decode_spk_emb(text: str, where: str = "voice"):
    """The float16 vector of a spk_emb string (numpy, (hidden,)); VoiceError when it is not one or holds
    non-finite values."""
    import numpy as np
    import pybase16384 as b14

    try:
        raw = lzma.decompress(b14.decode_from_string(text), format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
    except Exception as e:                     # lzma, and pybase16384's own errors on bad input
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string ({type(e).__name__})") from None
    if not raw or len(raw) % 2:
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string (odd length)")
    vec = np.frombuffer(raw, dtype=np.float16).copy()
    if not np.isfinite(vec).all():
        raise VoiceError(f"{where}: speaker embedding holds non-finite values")
    return vec


def _speaker(model: Any):
    """The ChatTTS Speaker of a LoadedModel or a loaded ChatTTS.Chat."""
    spk = getattr(model, "speaker", None)
    if spk is None:
        raise TypeError("expected a loaded ChatTTS Chat or engine.loader.LoadedModel")
    return spk


def sample_voice(model: Any, seed: int) -> str:
    """A spk_emb string drawn from the model's speaker statistics: mean + std * N(0, 1) with a local CPU
    torch.Generator seeded by `seed`.  The same seed gives the same string on CPU and GPU; the global RNG is
    untouched.  `model`: a LoadedModel or a loaded ChatTTS.Chat."""
    import torch

    spk = _speaker(model)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    z = torch.randn(int(spk.dim), generator=gen, dtype=torch.float32)            # (hidden,)
    vec = z * spk.std.detach().float().cpu() + spk.mean.detach().float().cpu()   # (hidden,)
    return encode_spk_emb(vec)
