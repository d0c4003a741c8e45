"""How a Llama call attends: the seam between the model (engine/llama.py) and its back-ends, chosen once.

The model's strategy is chosen when it is built (`Llama.attention`: PerRow, or engine/cpu.py's choice once the
projections are engine/kernels.c's); the decode loop takes it for exact decoding and Batched otherwise
(engine/generate.py DecodeBatch).  Each call, the strategy makes the call's state, which the Llama hands to
every block:

    call = llama.attention.begin(cache, pos, slots, lengths)
    h = llama(x, call)                            # x [B, L, C] input embeddings -> final-normed hidden [B, L, C]

A back-end is one class, an `Attention`, and the `Call` its `begin` returns (shapes: B rows, L new positions per
row, C hidden, H heads, Hkv key/value heads, D head dim, S cache positions):

    class MyAttention(Attention):
        exact = True                  # a row's bits never depend on its batch-mates (engine/generate.py)
        kv_dtype = None               # the KV cache's dtype (None: the model's; CStep on bf16 kernels: bf16)
        def begin(self, cache, pos, slots, lengths) -> Call:
            # cache   engine.llama.KVCache: k[l], v[l] [slots, Hkv, S, D] per layer
            # pos     [B, L] long: the RoPE positions, and where in its slot each new key and value is written
            # slots   [B] long: the cache slot of each row (None: row b is slot b)
            # lengths list[int] [B]: the keys row b attends over once this call's are written, cache[slot, :, :n]
            #         (0: a padding row, whose output is ignored; Batched: every row over max(lengths) positions)
    class MyCall(Call):
        step = None                   # or a method x [B, 1, C] -> final-normed [B, 1, C]: the whole call at once
        def write(self, kv, k, v)     # kv = (k_cache, v_cache) of one layer; k, v [B, L, Hkv, D]
        def attend(self, q, k_cache, v_cache) -> o    # q [B, H, L, D] over one layer's cache -> o [B, H, L, D]

The back-ends:

    Batched     one SDPA call over cache[:, :, :S] (S = max(lengths)) masked to the keys at or before each
                query's position: GPUs, CUDA graphs (GraphStep gives every slot the same S); not exact.
    PerRow      one SDPA call per row over exactly its own prefix: exact on any device, no kernels of ours.
    CAttention  decode steps (L == 1) attend in one engine/kernels.c call per layer for all rows; prefill as
                PerRow.  The model's projections are kernels.GemmLinear or GemmInt8Linear.
    CStep       decode steps run whole in one engine/kernels.c call (kernels.DecodeStep: every layer and the
                final norm); prefill as PerRow.  On bf16 kernels its cache is bf16 (half the bytes a step reads).
    Attention   (the base) calls that carry the rows only: engine/ortengine.py, whose graphs attend and write.

Every exact strategy attends each (row, head) over the row's own prefix only, in an order fixed by its length,
so a row's bits do not depend on the rest of its call; the linears' side of that argument is engine/generate.py's.
"""
from __future__ import annotations

from collections.abc import Callable

import torch  # imported lazily (by engine.llama users), never by engine.api
import torch.nn.functional as F

from engine import kernels


def cache_rows(cache, rix, cache_idx):
    """Row numbers in cache.view(-1, D) (cache [slots, Hkv, S, D]) of cache[rix[b], h, cache_idx[b, l]], ordered
    [B, L, Hkv] and flattened: one index_copy_ writes a layer's new keys (index_put with a slice between two
    index tensors, cache[rix[:, None], :, cache_idx] = ..., takes ~10x longer at 16 rows on CPU).  Same bits."""
    _, heads, S, _ = cache.shape
    h = torch.arange(heads, device=cache.device)
    return ((rix[:, None, None] * heads + h[None, None, :]) * S + cache_idx[:, :, None]).reshape(-1)


def _slots(pos, slots):
    """The rows' cache slots [B] long: `slots`, or 0..B-1 when None."""
    return torch.arange(pos.shape[0], device=pos.device) if slots is None else slots


def _heads(t, rep: int):
    """[B, Hkv, S, D] -> [B, Hkv·rep, S, D]: each key/value head repeated for the queries it serves."""
    return t.repeat_interleave(rep, 1) if rep > 1 else t


class Call:
    """One Llama call's state: where its rows live.  The base writes this call's keys and values at `pos` of
    each row's slot; subclasses attend (or run the whole step: `step`)."""

    step: Callable[[torch.Tensor], torch.Tensor] | None = None   # x [B, 1, C] -> final-normed [B, 1, C] where a
                                                                  # back-end runs the call whole

    def __init__(self, cache, pos, slots, lengths):
        self.cache, self.pos, self.lengths = cache, pos, lengths
        self.slots = _slots(pos, slots)                                         # [B] long
        self.rows = cache_rows(cache.k[0], self.slots, pos)                     # [B·L·Hkv], every layer's

    def write(self, kv, k, v) -> None:
        """k, v [B, L, Hkv, D] into kv = (k_cache, v_cache) [slots, Hkv, S, D] at cache[slots[b], :, pos[b, l]]
        (rounded to the cache's dtype, where it is another: to nearest even)."""
        D = k.shape[-1]
        kv[0].view(-1, D).index_copy_(0, self.rows, k.reshape(-1, D).to(kv[0].dtype))
        kv[1].view(-1, D).index_copy_(0, self.rows, v.reshape(-1, D).to(kv[1].dtype))

    def attend(self, q, k_cache, v_cache):
        raise NotImplementedError(f"{type(self).__name__} does not attend in torch")


class Attention:
    """The protocol (module docstring).  The base's calls only carry the rows (a back-end whose graphs attend
    themselves: engine/ortengine.py)."""

    exact = True
    kv_dtype: torch.dtype | None = None   # the KV cache's dtype: None, the model's

    def begin(self, cache, pos, slots, lengths) -> Call:
        return Call(cache, pos, slots, lengths)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# ------------------------------------------------------------------------------------------- batched (GPUs)
class BatchedCall(Call):
    def __init__(self, cache, pos, slots, lengths):
        super().__init__(cache, pos, slots, lengths)
        self.views = slots is None                       # rows are slots 0..B-1: cache views, no gather
        S = max(lengths)
        self.mask = (torch.arange(S, device=pos.device) <= pos[:, :, None])[:, None]   # [B, 1, L, S]

    def attend(self, q, k_cache, v_cache):
        B, H, _, _ = q.shape
        S, rep = self.mask.shape[-1], H // k_cache.shape[1]
        if self.views:
            kk, vv = k_cache[:B, :, :S], v_cache[:B, :, :S]                     # [B, Hkv, S, D]
        else:
            kk, vv = k_cache[self.slots, :, :S], v_cache[self.slots, :, :S]
        kk, vv = kk.to(q.dtype), vv.to(q.dtype)                                 # a bf16 cache: widened exactly
        return F.scaled_dot_product_attention(q, _heads(kk, rep), _heads(vv, rep), attn_mask=self.mask)


class Batched(Attention):
    """Every row in one SDPA call over the same S = max(lengths) positions, masked to the keys at or before each
    query's position (so a row's rounding may depend on S and B: docs/architecture.md, Determinism on CUDA)."""

    exact = False

    def begin(self, cache, pos, slots, lengths) -> Call:
        return BatchedCall(cache, pos, slots, lengths)


# ------------------------------------------------------------------------------------------- per row (exact)
class PerRowCall(Call):
    def __init__(self, cache, pos, slots, lengths):
        super().__init__(cache, pos, slots, lengths)
        self.prefixes = list(zip(self.slots.tolist(), lengths))                  # (slot, valid length) per row

    def attend(self, q, k_cache, v_cache):
        _, H, L, _ = q.shape
        rep = H // k_cache.shape[1]
        out = []
        for b, (sl, n) in enumerate(self.prefixes):
            if n == 0:                                                           # a padding row: no keys
                out.append(torch.zeros_like(q[b:b + 1]))
                continue
            kk = _heads(k_cache[sl:sl + 1, :, :n].to(q.dtype), rep)              # [1, H, n, D], widened from a
            vv = _heads(v_cache[sl:sl + 1, :, :n].to(q.dtype), rep)              # bf16 cache exactly
            # queries are the last L positions of the row's prefix: causal within them
            causal = torch.ones(L, n, dtype=torch.bool, device=q.device).tril(n - L) if L > 1 else None
            out.append(F.scaled_dot_product_attention(q[b:b + 1], kk, vv, attn_mask=causal))
        return torch.cat(out)                                                    # [B, H, L, D]


class PerRow(Attention):
    """Each row in its own SDPA call over exactly its prefix: exact on any device."""

    def begin(self, cache, pos, slots, lengths) -> Call:
        return PerRowCall(cache, pos, slots, lengths)


# ------------------------------------------------------------------------------------------- engine/kernels.c
class CAttentionCall(Call):
    def __init__(self, cache, pos, slots, lengths):
        super().__init__(cache, pos, slots, lengths)
        self._attend = kernels.decode_attention(self.slots, lengths)          # checks slots and lengths once

    def attend(self, q, k_cache, v_cache):                                       # q [B, H, 1, D]
        return self._attend(q, k_cache, v_cache)


class CAttention(PerRow):
    """Decode steps attend through engine/kernels.c, all rows in one call per layer; prefill as PerRow."""

    def begin(self, cache, pos, slots, lengths) -> Call:
        if pos.shape[1] != 1:
            return super().begin(cache, pos, slots, lengths)
        return CAttentionCall(cache, pos, slots, lengths)


class CStepCall(Call):
    """The whole step in one C call, which writes the cache itself: no rows to compute (Call.__init__ not run)."""

    def __init__(self, cache, pos, slots, lengths, decode):
        self.cache, self.pos, self.lengths, self.decode = cache, pos, lengths, decode
        self.slots = _slots(pos, slots)

    def step(self, x):                                                           # x [B, 1, C] -> [B, 1, C]
        return self.decode(x, self.pos, self.cache, self.slots, self.lengths)


class CStep(PerRow):
    """Decode steps whole in engine/kernels.c (kernels.DecodeStep, made for `model`'s packed weights: a new one
    whenever the projections change); prefill as PerRow.  `decode.times` adds up its phases' seconds."""

    def __init__(self, model):
        self.decode = kernels.DecodeStep(model)
        self.kv_dtype = self.decode.kv_dtype

    @staticmethod
    def supports(model) -> bool:
        return kernels.DecodeStep.supports(model)

    def begin(self, cache, pos, slots, lengths) -> Call:
        if pos.shape[1] != 1:
            return super().begin(cache, pos, slots, lengths)
        return CStepCall(cache, pos, slots, lengths, self.decode)
