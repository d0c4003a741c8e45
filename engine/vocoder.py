"""GPT output -> waveform: ChatTTS's Decoder (or DVAE) to a 100-bin mel, then Vocos, in fp32.

Two inputs, as upstream `Chat._decode_to_wavs` takes them:
- hidden states, float (T, hidden): the GPT's last hidden state at each generated step -> `Decoder`
  (upstream's default, `use_decoder=True`; this is what the real model sounds best with);
- codes, integer (T, num_vq): the sampled audio codes -> `DVAE` (FSQ codebooks; `use_decoder=False`).
Each step becomes 2 mel frames; Vocos' centred ISTFT turns F frames into 256 * (F - 1) samples, so a row of T
steps is exactly (2T - 1) * 256 samples (engine.units.samples_for_tokens).  Nothing is deleted or padded.

**Every row is decoded alone, on every device.**  A segment's audio must not depend on its batch-mates, and
batching does change bits (GEMM/convolution blocking by batch size: equal-length rows decoded together differ
from the row alone in the last bits on CPU; cuDNN and cuBLAS pick algorithms by shape the same way); rows of
unequal length cannot share a call at all (convolutions would carry the padding into a shorter row's tail).
What batching would buy: benchmarks/README.md, `vocoder_batching.py`.
"""
from __future__ import annotations

from typing import Any

from engine.units import samples_for_tokens


def decode(model: Any, rows: list) -> list:
    """Waveforms (float32 numpy, mono, 24 kHz) for `rows`, in input order.  Each row is a tensor of shape
    (T, hidden) float (hidden states -> Decoder) or (T, num_vq) integer (codes -> DVAE); all rows of one
    call must be of the same kind.  `model`: a LoadedModel or a loaded ChatTTS.Chat.  Each row is decoded
    by itself (a batch of one): its samples depend on the row alone, on any device."""
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
    return [_decode_row(net, vocos, r, device, vocos_device, use_hidden) for r in rows]


def _decode_row(net, vocos, row, device, vocos_device, use_hidden: bool):
    """One row (T, features) -> float32 numpy of samples_for_tokens(T) samples; T = 0: empty."""
    import numpy as np
    import torch

    T = row.size(0)
    if T == 0:
        return np.zeros(0, dtype=np.float32)
    with torch.inference_mode():
        x = row.to(device, torch.float32 if use_hidden else torch.long)[None]         # (1, T, features)
        mel = net(x.transpose(1, 2).contiguous())                                     # (1, 100, 2T)
        wav = vocos.decode(mel.to(vocos_device, torch.float32))                       # (1, 256 (2T-1))
    n = samples_for_tokens(T)
    if wav.size(1) < n:
        raise RuntimeError(f"decode: Vocos returned {wav.size(1)} samples for {T} steps, expected {n}")
    return np.ascontiguousarray(wav[0, :n].float().cpu().numpy(), dtype=np.float32)
