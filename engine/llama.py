"""A minimal Llama forward (gpt-fast style) over a preallocated KV cache, for ChatTTS's GPT: the model only.

    call = llama.attention.begin(cache, pos, slots, lengths)      # engine/attention.py: the rows' slots, lengths
    h = llama(x, call)                                            # x [B, L, C] -> final-normed hidden [B, L, C]

The KV cache is [slots, H, S_max, D] per layer, one sequence a slot from index 0; positions are per row and
integer; how a call attends is a strategy object (engine/attention.py).  Weights come from the HF state dict (q/k/v
and gate/up fused); it equals transformers' LlamaModel (tests/engine/test_llama.py).  Why it exists and what
engine/cpu.py replaces in it: docs/modules.md, "A minimal Llama forward".
"""
from __future__ import annotations

from dataclasses import dataclass

import torch  # this module is imported lazily (by engine.engine.Engine.load), never by api
import torch.nn as nn
import torch.nn.functional as F

from engine.attention import Attention, Call, PerRow


@dataclass(frozen=True)
class LlamaShape:
    hidden: int            # C
    layers: int
    heads: int             # H (ChatTTS: no grouped-query attention, kv heads == heads)
    kv_heads: int
    ffn: int               # F
    rope_theta: float
    eps: float
    max_pos: int

    @property
    def head_dim(self) -> int:  # D
        return self.hidden // self.heads

    @classmethod
    def from_hf(cls, cfg) -> LlamaShape:
        """From a transformers LlamaConfig (only the default RoPE is supported, as ChatTTS uses)."""
        scaling = getattr(cfg, "rope_scaling", None)
        if scaling and scaling.get("rope_type", scaling.get("type", "default")) != "default":
            raise ValueError(f"unsupported rope_scaling {scaling}")
        if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            raise ValueError("biased Llama projections are not supported")
        theta = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
        return cls(hidden=cfg.hidden_size, layers=cfg.num_hidden_layers, heads=cfg.num_attention_heads,
                   kv_heads=cfg.num_key_value_heads or cfg.num_attention_heads, ffn=cfg.intermediate_size,
                   rope_theta=float(theta or 10_000.0), eps=float(cfg.rms_norm_eps),
                   max_pos=cfg.max_position_embeddings)


class KVCache:
    """Per-layer key/value buffers: k[l], v[l] are [slots, H_kv, S_max, D]."""

    def __init__(self, shape: LlamaShape, slots: int, max_len: int, device, dtype):
        dims = (slots, shape.kv_heads, max_len, shape.head_dim)
        self.k = [torch.zeros(dims, device=device, dtype=dtype) for _ in range(shape.layers)]
        self.v = [torch.zeros(dims, device=device, dtype=dtype) for _ in range(shape.layers)]
        self.slots, self.max_len = slots, max_len

    @staticmethod
    def bytes_per_token(shape: LlamaShape, dtype_bytes: int) -> int:
        """Cache bytes one token of one row occupies (all layers, k and v)."""
        return 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes


def _rms_norm(x, weight, eps: float):
    """HF LlamaRMSNorm: normalize in fp32, scale in the input dtype.  x [..., C]."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def _rope(x, cos, sin):
    """Rotate-half RoPE (HF layout).  x [B, L, H, D]; cos, sin [B, L, 1, D] fp32."""
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


class Block(nn.Module):
    def __init__(self, s: LlamaShape):
        super().__init__()
        self.s = s
        self.wqkv = nn.Linear(s.hidden, (s.heads + 2 * s.kv_heads) * s.head_dim, bias=False)
        self.wo = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)
        self.w13 = nn.Linear(s.hidden, 2 * s.ffn, bias=False)
        self.w2 = nn.Linear(s.ffn, s.hidden, bias=False)
        self.attn_norm = nn.Module()
        self.attn_norm.weight = nn.Parameter(torch.ones(s.hidden))
        self.ffn_norm = nn.Module()
        self.ffn_norm.weight = nn.Parameter(torch.ones(s.hidden))

    def forward(self, x, rope, kv, call):
        """x [B, L, C]; rope = (cos, sin) [B, L, 1, D] fp32; kv = (k_cache, v_cache) [slots, Hkv, S, D], this
        layer's; call: the attention's state for this call (engine.attention.Call) -> [B, L, C]."""
        q, k, v = self.project(x, *rope)                                    # [B, L, H(kv), D]
        call.write(kv, k, v)                                                # into the cache at the call's positions
        with torch.profiler.record_function("attention"):      # a range for benchmarks/limits.step_profile
            o = call.attend(q.transpose(1, 2), *kv)                         # [B, H, L, D]
        return self.finish(x, o)

    def project(self, x, cos, sin):
        """x [B, L, C] -> q [B, L, H, D], k, v [B, L, Hkv, D]: the attention norm, the fused projection and RoPE
        (shared with engine/onnxgraph.py's exported step, so both run the same ops)."""
        s = self.s
        B, L, _ = x.shape
        h = _rms_norm(x, self.attn_norm.weight, s.eps)
        qkv = self.wqkv(h).view(B, L, s.heads + 2 * s.kv_heads, s.head_dim)   # [B, L, H+2Hkv, D]
        qk = _rope(qkv[:, :, :s.heads + s.kv_heads], cos, sin)              # [B, L, H+Hkv, D]: q and k at once
        return qk[:, :, :s.heads], qk[:, :, s.heads:], qkv[:, :, s.heads + s.kv_heads:]

    def finish(self, x, o):
        """x [B, L, C] the block's input, o [B, H, L, D] attention output -> the block's output [B, L, C]."""
        s = self.s
        B, L, _ = x.shape
        x = x + self.wo(o.transpose(1, 2).reshape(B, L, s.heads * s.head_dim))
        h = _rms_norm(x, self.ffn_norm.weight, s.eps)
        gate, up = self.w13(h).chunk(2, -1)                                  # [B, L, F] each
        return x + self.w2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, s: LlamaShape):
        super().__init__()
        self.s = s
        self.layers = nn.ModuleList(Block(s) for _ in range(s.layers))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(s.hidden))
        self.register_buffer("cos", torch.empty(0), persistent=False)
        self.register_buffer("sin", torch.empty(0), persistent=False)
        self.attention: Attention = PerRow()   # how calls attend (engine/attention.py; engine/cpu.py sets it)

    def rope_tables(self, device) -> None:
        """cos/sin [max_pos, D] in fp32 from integer positions (as HF computes them)."""
        s = self.s
        inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, dtype=torch.int64,
                                                         device=device).float() / s.head_dim))
        pos = torch.arange(s.max_pos, device=device).float()
        freqs = pos[:, None] * inv_freq[None, :]                             # [P, D/2]
        emb = torch.cat((freqs, freqs), -1)                                  # [P, D]
        self.cos, self.sin = emb.cos(), emb.sin()

    def forward(self, x, call: Call):
        """x [B, L, C] input embeddings; call: where they go (self.attention.begin or another strategy's: the
        positions, the cache and each row's slot and keys) -> the final-normed hidden states [B, L, C] (HF's
        last_hidden_state)."""
        if call.step is not None:                                            # a back-end running the call whole
            return call.step(x)
        rope = self.cos[call.pos].unsqueeze(2), self.sin[call.pos].unsqueeze(2)   # [B, L, 1, D] each
        for layer, kv in zip(self.layers, zip(call.cache.k, call.cache.v)):
            x = layer(x, rope, kv, call)
        return _rms_norm(x, self.norm.weight, self.s.eps)


def build_llama(shape: LlamaShape, state: dict, device="cpu", dtype=None) -> Llama:
    """A Llama from an HF LlamaModel state dict (keys `layers.N.self_attn.q_proj.weight`, ..., `norm.weight`)."""
    with torch.device("meta"):                       # no random init: every parameter comes from `state`
        model = Llama(shape)
    own = {}
    for i in range(shape.layers):
        p = f"layers.{i}."
        own[f"layers.{i}.wqkv.weight"] = torch.cat([state[p + f"self_attn.{n}_proj.weight"] for n in "qkv"])
        own[f"layers.{i}.wo.weight"] = state[p + "self_attn.o_proj.weight"]
        own[f"layers.{i}.w13.weight"] = torch.cat([state[p + "mlp.gate_proj.weight"], state[p + "mlp.up_proj.weight"]])
        own[f"layers.{i}.w2.weight"] = state[p + "mlp.down_proj.weight"]
        own[f"layers.{i}.attn_norm.weight"] = state[p + "input_layernorm.weight"]
        own[f"layers.{i}.ffn_norm.weight"] = state[p + "post_attention_layernorm.weight"]
    own["norm.weight"] = state["norm.weight"]
    model.load_state_dict(own, strict=False, assign=True)   # rope tables are non-persistent buffers
    model.cos, model.sin = torch.empty(0), torch.empty(0)   # (still on meta: filled by rope_tables below)
    model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device=device)
    model.rope_tables(device)
    return model.eval().requires_grad_(False)
