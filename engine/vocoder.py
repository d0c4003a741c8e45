"""GPT output -> waveform: ChatTTS's Decoder (or DVAE) to a 100-bin mel, then Vocos, in fp32 or, on a bf16 CPU path,
in bf16 (`vocoder_dtype`; the engine version names it).

A row of T steps is exactly (2T - 1) * 256 samples (engine.units.samples_for_tokens), nothing deleted or padded.
Every row is decoded alone, on every device: a segment's audio never depends on its batch-mates.  The two inputs,
why rows are never batched, and the bf16 dtype: docs/modules.md, "GPT output to a waveform".
"""
from __future__ import annotations

import copy
import threading
import weakref
from typing import Any

from engine.units import samples_for_tokens

DTYPES = ("fp32", "bf16")

_LOCK = threading.Lock()
_BF16: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # an fp32 module -> its bf16 copy


def vocoder_dtype(path) -> str:
    """Decoder + Vocos's dtype for an engine on CPU path `path` (engine/cpupath.py's, None elsewhere): bf16 where
    the path is bf16, else fp32."""
    return "bf16" if path is not None and path.dtype == "bf16" else "fp32"


def decode(model: Any, rows: list, dtype: str = "fp32") -> list:
    """Waveforms (float32 numpy, mono, 24 kHz) for `rows`, in input order.  Each row is a tensor of shape
    (T, hidden) float (hidden states -> Decoder) or (T, num_vq) integer (codes -> DVAE); all rows of one
    call must be of the same kind.  `model`: a LoadedModel or a loaded ChatTTS.Chat; `dtype` (DTYPES): the
    Decoder's and Vocos' (code rows: fp32 always).  Each row is decoded by itself (a batch of one): its samples
    depend on the row alone, on any device."""
    if dtype not in DTYPES:
        raise ValueError(f"decode: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if not rows:
        return []
    kinds = {bool(r.dtype.is_floating_point) for r in rows}
    if len(kinds) != 1:
        raise ValueError("decode: mix of hidden-state rows and code rows in one call")
    use_hidden = kinds.pop()
    for r in rows:
        if r.dim() != 2:
            raise ValueError(f"decode: each row must be 2-D (T, features), got shape {tuple(r.shape)}")
    net = model.decoder if use_hidden else model.dvae
    vocos = model.vocos
    device = next(net.parameters()).device
    vocos_device = next(vocos.parameters()).device
    if dtype == "bf16" and use_hidden:
        net, vocos = bf16_modules(net, vocos)
    return [_decode_row(net, vocos, r, device, vocos_device, use_hidden) for r in rows]


def bf16_modules(decoder, vocos) -> tuple:
    """(decoder, vocos) in bf16: copies made once per module (the fp32 ones stay as they are), Vocos' output linear
    giving fp32 to its head's magnitudes, phases and ISTFT (which stay fp32)."""
    import torch

    with _LOCK:
        if decoder not in _BF16:
            _BF16[decoder] = copy.deepcopy(decoder).to(torch.bfloat16).eval()
        if vocos not in _BF16:
            v = copy.deepcopy(vocos).eval()
            v.backbone.to(torch.bfloat16)
            v.head.out.to(torch.bfloat16)             # its output widened: exp, cos, sin, the complex spectrum and
            v.head.out.register_forward_hook(_widen)  # the ISTFT after it have no bf16 kernels
            _BF16[vocos] = v
        return _BF16[decoder], _BF16[vocos]


def _widen(module, inputs, out):
    return out.float()


def _decode_row(net, vocos, row, device, vocos_device, use_hidden: bool):
    """One row (T, features) -> float32 numpy of samples_for_tokens(T) samples; T = 0: empty."""
    import numpy as np
    import torch

    T = row.size(0)
    if T == 0:
        return np.zeros(0, dtype=np.float32)
    dtype = next(net.parameters()).dtype if use_hidden else torch.long         # the Decoder's: fp32 or bf16
    with torch.inference_mode():
        x = row.to(device, dtype)[None]                                       # (1, T, features)
        mel = net(x.transpose(1, 2).contiguous())                             # (1, 100, 2T)
        wav = vocos.decode(mel.to(vocos_device, next(vocos.backbone.parameters()).dtype))   # (1, 256 (2T-1))
    n = samples_for_tokens(T)
    if wav.size(1) < n:
        raise RuntimeError(f"decode: Vocos returned {wav.size(1)} samples for {T} steps, expected {n}")
    return np.ascontiguousarray(wav[0, :n].float().cpu().numpy(), dtype=np.float32)
