"""GPT output -> waveform: ChatTTS's Decoder (or DVAE) to a 100-bin mel, then Vocos, in fp32.

Two inputs, as upstream `Chat._decode_to_wavs` takes them:
- hidden states, float (T, hidden): the GPT's last hidden state at each generated step -> `Decoder`
  (upstream's default, `use_decoder=True`; this is what the real model sounds best with);
- codes, integer (T, num_vq): the sampled audio codes -> `DVAE` (FSQ codebooks; `use_decoder=False`).
Each step becomes 2 mel frames; Vocos' centred ISTFT turns F frames into 256 * (F - 1) samples, so a row of T
steps is exactly (2T - 1) * 256 samples (engine.units.samples_for_tokens).  Nothing is deleted or padded:
only rows of equal length share a batch (convolutions would carry padding into a shorter row's tail), and on
CPU every row is decoded alone: measured, even equal-length rows batched together differ from the row decoded
alone by ~5e-7 (batch-size-dependent GEMM blocking), and a segment's audio must not depend on its batch.
"""
from __future__ import annotations

from typing import Any

from engine.units import samples_for_tokens

MAX_GROUP = 16                     # CUDA: rows decoded together at most (equal lengths only); CPU: 1


def decode(model: Any, rows: list) -> list:
    """Waveforms (float32 numpy, mono, 24 kHz) for `rows`, in input order.  Each row is a tensor of shape
    (T, hidden) float (hidden states -> Decoder) or (T, num_vq) integer (codes -> DVAE); all rows of one
    call must be of the same kind.  `model`: a LoadedModel or a loaded ChatTTS.Chat.  Rows of equal length are
    decoded together, MAX_GROUP at most, on CUDA; on CPU each row alone (bit-exact per row)."""
    import numpy as np
    import torch

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
    max_group = 1 if device.type == "cpu" else MAX_GROUP

    out: list = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: (rows[i].size(0), i))
    groups: list[list[int]] = []
    for i in order:
        if groups and rows[groups[-1][0]].size(0) == rows[i].size(0) and len(groups[-1]) < max_group:
            groups[-1].append(i)
        else:
            groups.append([i])
    with torch.inference_mode():
        for g in groups:
            T = rows[g[0]].size(0)
            if T == 0:
                for i in g:
                    out[i] = np.zeros(0, dtype=np.float32)
                continue
            if use_hidden:
                x = torch.stack([rows[i].to(device, torch.float32) for i in g])       # (B, T, hidden)
            else:
                x = torch.stack([rows[i].to(device, torch.long) for i in g])          # (B, T, num_vq)
            x = x.transpose(1, 2).contiguous()                                         # (B, C, T)
            mel = net(x)                                                               # (B, 100, 2T)
            wav = vocos.decode(mel.to(vocos_device, torch.float32))                    # (B, 256 (2T-1))
            n = samples_for_tokens(T)
            if wav.size(1) < n:
                raise RuntimeError(f"decode: Vocos returned {wav.size(1)} samples for {T} steps, expected {n}")
            wav = wav[:, :n].float().cpu().numpy()
            for j, i in enumerate(g):
                out[i] = np.ascontiguousarray(wav[j], dtype=np.float32)
    return out
