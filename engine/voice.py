"""Voices: ChatTTS speaker-embedding strings ("spk_emb"), sampled deterministically or given by the user.

A spk_emb string is ChatTTS's own format: pybase16384 text of the lzma-compressed float16 speaker vector
(GPT hidden size values).  The string, not the seed, is what a book stores: it sounds the same everywhere.
"""
from __future__ import annotations

import lzma
from pathlib import Path
from typing import Any

SEED_PREFIX = "seed:"


class VoiceError(ValueError):
    """A voice spec that cannot be used; the message is one line for the user."""


def _speaker(model: Any):
    """The ChatTTS Speaker of a LoadedModel or a loaded Chat."""
    spk = getattr(model, "speaker", None)
    if spk is None:
        raise TypeError("expected a loaded ChatTTS Chat or engine.loader.LoadedModel")
    return spk


def sample_voice(model: Any, seed: int) -> str:
    """A spk_emb string drawn from the model's speaker statistics: mean + std * N(0, 1) with a local CPU
    torch.Generator seeded by `seed`.  The same seed gives the same string on CPU and GPU; the global RNG is
    untouched.  `model`: a LoadedModel or a loaded ChatTTS.Chat."""
    import torch
    from ChatTTS.model.speaker import Speaker

    spk = _speaker(model)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    z = torch.randn(int(spk.dim), generator=gen, dtype=torch.float32)            # (hidden,)
    vec = z * spk.std.detach().float().cpu() + spk.mean.detach().float().cpu()   # (hidden,)
    return Speaker._encode(vec)


def parse_voice_spec(spec: str, model: Any) -> str:
    """The spk_emb string for a user's voice spec:

    - "seed:1234"            a voice sampled with sample_voice(model, 1234)
    - "path/to/voice.txt"    a UTF-8 text file holding one spk_emb string (surrounding whitespace ignored)
    - anything else          a spk_emb string itself

    The result is checked: it must decode to exactly one speaker vector of the model's hidden size.
    Raises VoiceError with a one-line message otherwise."""
    s = (spec or "").strip()
    if not s:
        raise VoiceError("empty voice: use seed:<n>, a spk_emb string, or a .txt file holding one")
    if s.lower().startswith(SEED_PREFIX):
        num = s[len(SEED_PREFIX):].strip()
        try:
            seed = int(num)
        except ValueError:
            raise VoiceError(f"voice {s!r}: seed must be an integer") from None
        if not 0 <= seed < 2**63:
            raise VoiceError(f"voice {s!r}: seed must be in 0..2**63-1")
        return sample_voice(model, seed)
    if s.lower().endswith(".txt"):
        p = Path(s).expanduser()
        try:
            text = p.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise VoiceError(f"{p}: no such voice file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise VoiceError(f"{p}: cannot read voice file ({type(e).__name__})") from None
        if not text:
            raise VoiceError(f"{p}: voice file is empty")
        check_spk_emb(text, model, where=str(p))
        return text
    check_spk_emb(s, model)
    return s


def check_spk_emb(text: str, model: Any, where: str = "voice") -> None:
    """Raise VoiceError unless `text` decodes to a float16 vector of the model's hidden size, all finite."""
    import numpy as np
    from ChatTTS.model.speaker import Speaker

    dim = int(_speaker(model).dim)
    try:
        vec = Speaker._decode(text)
    except (ValueError, lzma.LZMAError, TypeError, RuntimeError) as e:
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string ({type(e).__name__})") from None
    except Exception as e:                     # pybase16384 raises its own errors on bad input
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string ({type(e).__name__})") from None
    if vec.shape != (dim,):
        raise VoiceError(f"{where}: speaker embedding has {vec.size} values, this model needs {dim}")
    if not np.isfinite(vec).all():
        raise VoiceError(f"{where}: speaker embedding holds non-finite values")
