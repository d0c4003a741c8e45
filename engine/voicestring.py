"""The voice string: what conditions ChatTTS's GPT, as one string that a book stores and a Request carries.

A voice string is either
- a spk_emb string: ChatTTS's own format, base16384 text of the raw-LZMA2-compressed float16 speaker vector
  (GPT hidden size values) — every voice before clips and anchors, unchanged; or
- a *prompt voice* (`Voice.to_string`): compact JSON `{"origin", "spk_emb", "spk_smp", "txt_smp"}` — a sample's
  audio codes (`spk_smp`, upstream's `Speaker.encode_prompt` string of DVAE codes) and its transcript
  (`txt_smp`), placed as upstream places them, with or without a speaker embedding: a recording (`clip:PATH`,
  no spk_emb) or an anchored voice (a spk_emb and its own rendering of a reference passage).
The string, not the seed or the recording, is what a book stores: it sounds the same everywhere and a later
run needs neither.

Form only, no model and no torch: engine/voice.py parses a user's spec into one and checks it against a model;
engine/clip.py makes prompt voices from recordings.
"""
from __future__ import annotations

import json
import lzma
from dataclasses import dataclass

# Raw LZMA2 at preset 9e: the filter chain ChatTTS (Speaker._encode / _decode) uses for spk_emb strings.
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
PROMPT_KEYS = ("origin", "spk_emb", "spk_smp", "txt_smp")


class VoiceError(ValueError):
    """A voice spec that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Voice:
    """A voice string decoded: what conditions the GPT (the prompt: engine/engine.py PROMPT)."""
    spk_emb: str | None = None        # speaker embedding string for [spk_emb]; None: upstream's [empty_spk]
    spk_smp: str | None = None        # a sample's DVAE codes (upstream's Speaker.encode_prompt string)
    txt_smp: str = ""                 # the sample's transcript (placed before the text)
    origin: str = ""                  # where the sample came from: "clip:<sha256 of the recording>" or "anchor"

    def to_string(self) -> str:
        """The voice string: the spk_emb string itself when there is no sample (every voice before clips and
        anchors), else the prompt voice's compact JSON (keys sorted: one string per voice)."""
        if self.spk_smp is None:
            return self.spk_emb or ""
        return json.dumps({k: getattr(self, k) for k in PROMPT_KEYS}, ensure_ascii=False, sort_keys=True,
                          separators=(",", ":"))


def decode_voice(text: str, where: str = "voice") -> Voice:
    """The Voice of a voice string (form only: no model); VoiceError naming `where` when it is not one."""
    if not text.startswith("{"):
        decode_spk_emb(text, where=where)
        return Voice(spk_emb=text)
    try:
        d = json.loads(text)
    except ValueError:
        raise VoiceError(f"{where}: not a voice string (broken JSON)") from None
    if not isinstance(d, dict) or set(d) != set(PROMPT_KEYS) or not isinstance(d["spk_smp"], str) \
            or not isinstance(d["txt_smp"], str) or not d["txt_smp"].strip() or not isinstance(d["origin"], str):
        raise VoiceError(f"{where}: not a voice string (a prompt voice has {', '.join(PROMPT_KEYS)})")
    if d["spk_emb"] is not None:
        decode_spk_emb(d["spk_emb"], where=where)
    decode_prompt(d["spk_smp"], where=where)
    return Voice(**d)


def decode_prompt(text: str, where: str = "voice"):
    """The codes [Q, P] (numpy uint16) of a spk_smp string, as upstream Speaker.decode_prompt reads it: base16384
    of a little-endian uint16 shape (Q, P), then the raw-LZMA2 uint16 codes."""
    import numpy as np
    import pybase16384 as b14

    try:
        raw = b14.decode_from_string(text)
        shape = tuple(int(x) for x in np.frombuffer(raw[:4], dtype="<u2"))
        codes = np.frombuffer(lzma.decompress(raw[4:], format=lzma.FORMAT_RAW, filters=LZMA_FILTERS), dtype="<u2")
        codes = codes.reshape(shape)
    except Exception as e:  # noqa: BLE001 — lzma, base16384, a size that is not Q x P: one line for any
        raise VoiceError(f"{where}: not a sample prompt (spk_smp) string ({type(e).__name__})") from None
    if 0 in shape:
        raise VoiceError(f"{where}: the sample prompt holds no codes")
    return codes


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
    except Exception as e:  # noqa: BLE001 — lzma, and pybase16384's own errors on bad input: one line for any
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string ({type(e).__name__})") from None
    if not raw or len(raw) % 2:
        raise VoiceError(f"{where}: not a ChatTTS speaker embedding string (odd length)")
    vec = np.frombuffer(raw, dtype=np.float16).copy()
    if not np.isfinite(vec).all():
        raise VoiceError(f"{where}: speaker embedding holds non-finite values")
    return vec
