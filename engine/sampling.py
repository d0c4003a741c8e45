"""Sampling a decode step's codes: upstream ChatTTS's logits processing, and counter-based Gumbel noise.

    x, idx = candidates(logits, history, eos_allowed, SamplingParams())    # [B, Q, K] processed logits, token ids
    tok = sample_candidates(x, idx, keys, steps, cells, V)                  # [B, Q]: one draw per codebook

Every op reduces over a row's own values only, and the noise is a hash of (row seed, step, codebook, token): no
RNG state is shared between rows or depends on the device (engine/generate.py's batch invariance).
"""
from __future__ import annotations

import torch  # imported lazily by engine.engine, never by engine.api

from engine.api import SamplingParams  # upstream's defaults (the code pass's; REFINE_SAMPLING the refine pass's)

EOS = 625                          # ChatTTS audio EOS id (num_audio_tokens - 1)
_M32 = 0xFFFF_FFFF


# ------------------------------------------------------------------------------------------- counter-based RNG
def _mul32(x, c: int):
    """(x * c) mod 2^32 for x in [0, 2^32) (int64 tensor or int) without int64 overflow."""
    return ((x & 0xFFFF) * c + ((((x >> 16) * c) & 0xFFFF) << 16)) & _M32


def hash32(x):
    """lowbias32 (Wellons): a full-avalanche 32-bit integer hash; works on ints and int64 tensors alike."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def row_key(seed: int) -> int:
    """A row's 32-bit RNG key from its (64-bit) segment seed."""
    seed &= (1 << 64) - 1
    return hash32(hash32(seed & _M32) ^ (seed >> 32))


def gumbel_noise(keys: torch.Tensor, steps: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Gumbel(0,1) noise [B, N] for rows with keys [B] at steps [B]; cells [N] or [B, N]: hash32(cell index + 1).
    Depends only on (key, step, cell): the same on any batch, slot or device (up to log's rounding)."""
    base = hash32(keys ^ hash32(steps + 0x9E3779B9 & _M32))                     # [B]
    bits = hash32(base[:, None] ^ (cells if cells.dim() == 2 else cells[None, :]))   # [B, N] in [0, 2^32)
    u = ((bits >> 8).float() + 0.5) * (1.0 / (1 << 24))                          # (0, 1), exact in fp32
    return -torch.log(-torch.log(u))


def candidates(logits: torch.Tensor, history: torch.Tensor, eos_allowed: torch.Tensor,
               p: SamplingParams, eos: int = EOS) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's logits processing, in its order: /temperature, repetition penalty, top-P, top-K, EOS mask —
    computed on the K = top_k best tokens only (top-K keeps at most those; top-P keeps a prefix of them).
    logits [B, Q, V] fp32; history [B, Q, W] long, the row's last W codes (V = empty); eos_allowed [B] bool;
    `eos` the pass's end token (the code pass's EOS; the refine pass's [Ebreak], with Q = 1).
    Returns (x [B, Q, K] processed logits, descending, -inf = removed; idx [B, Q, K] their token ids)."""
    B, Q, V = logits.shape
    x = logits / p.temperature
    if p.repetition_penalty != 1.0:
        freq = torch.zeros(B, Q, V + 1, device=x.device, dtype=x.dtype)
        freq.scatter_add_(2, history, torch.ones_like(history, dtype=x.dtype))
        alpha = torch.pow(p.repetition_penalty, freq[..., :V])
        x = torch.where(x < 0, x * alpha, x / alpha)
    K = min(max(p.top_k, p.min_keep), V) if p.top_k is not None else V
    top_x, top_i = torch.topk(x, K, dim=-1)                                      # [B, Q, K] descending
    keep = torch.ones_like(top_x, dtype=torch.bool)
    if p.top_p is not None and p.top_p < 1.0:
        # HF TopPLogitsWarper removes a token when the ascending cumulative probability up to it is
        # <= 1 - top_p, i.e. when the probability mass strictly above it is >= top_p; it keeps min_keep.
        prob = (top_x - x.logsumexp(-1, keepdim=True)).exp()
        keep = (prob.cumsum(-1) - prob) < p.top_p
        keep[..., :p.min_keep] = True
    keep &= (top_i != eos) | eos_allowed[:, None, None]
    return top_x.masked_fill(~keep, -torch.inf), top_i


def sample_candidates(x: torch.Tensor, idx: torch.Tensor, keys: torch.Tensor, steps: torch.Tensor,
                      cells: torch.Tensor, V: int) -> torch.Tensor:
    """Gumbel-max sampling over the candidates: tokens [B, Q] ~ softmax(x).  Each cell (codebook, token) gets the
    noise it would get in the whole vocabulary, so the draw equals Gumbel-max over all V tokens with the removed
    ones at -inf; noise is made for K cells, not V.  x, idx [B, Q, K] from `candidates`; cells [Q·V]."""
    B, Q, K = x.shape
    cell = idx + torch.arange(Q, device=idx.device)[None, :, None] * V           # [B, Q, K] cell index
    g = gumbel_noise(keys, steps, cells[cell].view(B, Q * K)).view(B, Q, K)
    j = (x + g).argmax(-1, keepdim=True)                                         # [B, Q, 1]
    return idx.gather(-1, j)[..., 0]
