"""ChatTTS's GPT for audio codes (CodeModel: embeddings, our Llama, code heads) and the CPU's batch-invariant call
sizes (invariant_sizes).

    model = CodeModel.from_chattts(chat.gpt, embed, spk_emb_id, "cpu", torch.float32)
    model.pack(*engine.cpu.path_linears(path))                     # the CPU back-end (engine/cpu.py, cpupath.py)
    call = model.llama.attention.begin(cache, pos, slots, lens)     # engine/attention.py: chosen with the back-end
    h = model.llama(x, call)                                        # engine/generate.py's decode loop drives it
    logits = model.logits(h[:, -1])                                 # [B, Q, V]
    text = model.text_logits(h[:, -1])                              # [B, 1, V_text]: the refine pass's head
"""
from __future__ import annotations

import torch  # imported lazily by engine.engine, never by engine.api
import torch.nn as nn
import torch.nn.functional as F

from engine.cpu import PackedLinear, pack_linears, quantize_int8
from engine.llama import Llama, LlamaShape, build_llama
from engine.sampling import hash32

EXACT_ROWS = 4                     # the canonical rows per decode call on CPU (fixed GEMM shape => invariant rows)


class CodeModel:
    """ChatTTS's GPT for audio codes: text embedding, 4 code embeddings, our Llama, 4 weight-normed heads.
    Embeddings and heads stay fp32 (as upstream); the Llama runs in `dtype`."""

    def __init__(self, llama: Llama, emb_text: torch.Tensor, emb_code: torch.Tensor, head_code: torch.Tensor,
                 spk_emb_id: int, head_text=None):
        self.llama = llama                            # hidden C
        self.emb_text = emb_text                      # [V_text, C] fp32
        self.emb_code = emb_code                      # [Q, V, C] fp32
        self.head = head_code.reshape(-1, head_code.shape[-1])   # [Q·V, C] fp32, weight-norm applied once
        self.head_linear = lambda h: F.linear(h, self.head)      # [B, C] fp32 -> [B, Q·V] (pack(): oneDNN)
        self.Q, self.V = head_code.shape[0], head_code.shape[1]
        self.spk_emb_id = spk_emb_id
        self.dtype = next(llama.parameters()).dtype
        self.device = emb_text.device
        self.graphs = False                           # decode steps as CUDA graphs (enable_cuda_graphs)
        self.cells = hash32(torch.arange(self.Q * self.V, device=self.device, dtype=torch.long) + 1)
        self._sizes: dict[tuple, tuple[int, ...]] = {}   # (threads, max_rows[, "text"]) -> invariant_sizes
        self._head_text = head_text                  # [V_text, C] fp32, or a function making it (first use)
        self._text_cells: torch.Tensor | None = None

    # ---- the text head: upstream's refine-text pass (engine.engine.Engine.refine), made on first use
    @property
    def head_text(self) -> torch.Tensor:
        """[V_text, C] fp32: the weight-normed text head, evaluated once."""
        if callable(self._head_text):
            self._head_text = self._head_text()
        if self._head_text is None:
            raise ValueError("this model has no text head (the refine-text pass needs one)")
        return self._head_text

    @property
    def V_text(self) -> int:
        return self.emb_text.shape[0]

    @property
    def text_cells(self) -> torch.Tensor:
        """[V_text]: the noise cells of text tokens, numbered after the code cells (no draw shares a cell)."""
        if self._text_cells is None:
            self._text_cells = hash32(torch.arange(self.V_text, device=self.device, dtype=torch.long)
                                      + self.Q * self.V + 1)
        return self._text_cells

    def text_embedding(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B] text ids -> [B, 1, C] in the Llama dtype: the token fed back at a refine step."""
        return self.emb_text[tokens][:, None].to(self.dtype)

    def text_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, C] -> logits [B, 1, V_text] fp32 (upstream's head_text)."""
        return F.linear(hidden.float(), self.head_text)[:, None]

    def linears(self, text: bool = False) -> list:
        """One (fn, in_features) per distinct linear shape the decode step runs: the block projections, the heads
        (with `text`: the refine pass's text head too)."""
        b = self.llama.layers[0]
        out = [(getattr(b, n), getattr(b, n).in_features) for n in ("wqkv", "wo", "w13", "w2")]
        out.append((lambda x: self.head_linear(x.float()), self.head.shape[1]))   # heads run fp32
        if text:
            out.append((lambda x: self.text_logits(x)[:, 0], self.head_text.shape[1]))
        return out

    def call_size(self, rows: int, max_rows: int, text: bool = False) -> int | None:
        """The smallest batch-invariant call size >= rows (`invariant_sizes` for this thread count and
        max_rows, measured once; `text`: a refine step's, its text head included); None when there is none
        (then: canonical chunks)."""
        key = (torch.get_num_threads(), max_rows, *(("text",) if text else ()))
        if key not in self._sizes:
            self._sizes[key] = invariant_sizes(self, max_rows, text)
        return next((m for m in self._sizes[key] if m >= rows), None)

    @classmethod
    def from_chattts(cls, gpt, embed, spk_emb_id: int, device, dtype) -> CodeModel:
        """From ChatTTS's loaded `GPT` (its `.gpt` is the HF LlamaModel) and `Embed` modules."""
        shape = LlamaShape.from_hf(gpt.gpt.config)
        llama = build_llama(shape, {k: v.detach() for k, v in gpt.gpt.state_dict().items()}, device, dtype)
        share_weights_with_hf(llama, gpt.gpt)        # one copy of the weights when dtype/device agree
        with torch.no_grad():
            emb_code = torch.stack([e.weight.detach().float() for e in embed.emb_code]).to(device)
            head = torch.stack([h.weight.detach().float() for h in embed.head_code]).to(device)  # g·v/|v|

        def head_text() -> torch.Tensor:                 # 65 MB at the real size: only when a refine runs
            with torch.no_grad():
                return embed.head_text.weight.detach().float().to(device)
        return cls(llama, embed.emb_text.weight.detach().float().to(device), emb_code, head, spk_emb_id, head_text)

    def prompt_embedding(self, ids: torch.Tensor, spk: torch.Tensor | None,
                         codes: torch.Tensor | None = None) -> torch.Tensor:
        """ids [L] text token ids; spk [C] speaker embedding (unnormalized); codes [P, Q] a sample's audio codes
        (a clip or anchor voice), placed after the text -> [1, L + P, C] in the Llama dtype.
        As upstream Speaker.apply: [spk_emb] positions get the L2-normalized speaker vector; as upstream
        Tokenizer.encode + Embed: code positions get the sum of their Q code embeddings."""
        emb = self.emb_text[ids.to(self.device)]                                    # [L, C]
        if spk is not None:
            n = F.normalize(spk.float().to(self.device), p=2.0, dim=0, eps=1e-12)
            emb = torch.where((ids.to(self.device) == self.spk_emb_id)[:, None], n[None, :], emb)
        if codes is not None:
            emb = torch.cat([emb, self._code_sum(codes.to(self.device))])            # [L + P, C]
        return emb[None].to(self.dtype)

    def _code_sum(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, Q] -> [B, C] fp32: the sum of the Q code embeddings (upstream: stack then sum)."""
        parts = [self.emb_code[q][tokens[:, q]] for q in range(self.Q)]             # Q x [B, C]
        return torch.stack(parts, 2).sum(2)

    def code_embedding(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, Q] -> [B, 1, C] in the Llama dtype: the token fed back at a decode step."""
        return self._code_sum(tokens)[:, None].to(self.dtype)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, C] -> logits [B, Q, V] fp32."""
        return self.head_linear(hidden.float()).view(-1, self.Q, self.V)

    def pack(self, make=None, heads=None) -> CodeModel:
        """CPU: the block projections (those still dense nn.Linear) through a packed-weight linear, make(weight)
        — engine.cpu.PackedLinear (oneDNN, the default), engine.kernels.GemmLinear (the caller checks that it is
        available: engine.cpu.cpu_linear), or a path's (engine.cpu.path_linears) — and the heads through
        heads(weight) (default: make).  Forget the call sizes measured for the old kernel."""
        make = make or PackedLinear
        pack_linears(self.llama, make)
        self.head_linear = (heads or make)(self.head)
        self._sizes.clear()
        return self

    def quantize_int8(self) -> CodeModel:
        """The block projections in int8 (engine.cpu.quantize_int8; before `pack`, which then packs only what is
        left in fp32: the heads).  Forget the call sizes measured for the old kernel."""
        quantize_int8(self.llama)
        self._sizes.clear()
        return self


@torch.no_grad()
def invariant_sizes(model: CodeModel, max_rows: int, text: bool = False) -> tuple[int, ...]:
    """The call sizes M (ascending, from 1 up to max_rows rounded up to EXACT_ROWS, plus EXACT_ROWS) for which
    every row of every linear layer of `model` comes out bit-identical to the canonical calls of EXACT_ROWS rows.
    Kernel choice depends on shapes (and the thread split), not on values, so random inputs settle it for this
    machine, library build and thread count (the caller keys it on those).  Measured on 1 and 2 threads on this
    project's machines (other CPUs differ: never assumed, and the tests run it on test doubles): MKL
    4, 8, 12, ... (M = 1..3 take other kernels, M = 5..11 not multiples of 4 differ on 2 threads: each thread
    gets a ragged block); oneDNN packed on AVX2 (or ONEDNN_MAX_CPU_ISA=AVX2) 4, 5, 6, 10, 11, 12, ... (blocks of
    6 rows; a block of 1-3 differs), on AVX-512 every size; engine/kernels.c every size."""
    top = -(-max_rows // EXACT_ROWS) * EXACT_ROWS + EXACT_ROWS
    gen = torch.Generator(device="cpu").manual_seed(0)
    layers = []
    for fn, k in (model.linears(text=True) if text else model.linears()):
        x = torch.randn(top, k, generator=gen).to(model.device, model.dtype)
        layers.append((fn, x, torch.cat([fn(c) for c in x.split(EXACT_ROWS)])))   # every row in a canonical call
    return tuple(m for m in range(1, top + 1) if all(torch.equal(fn(x[:m]), ref[:m]) for fn, x, ref in layers))


def enable_cuda_graphs(model: CodeModel) -> None:
    """Decode steps run as captured CUDA graphs (engine.generate.GraphStep: one graph per attention-length bucket,
    replayed each step); CUDA only.  What `--cuda-graphs` (EngineOptions.cuda_graphs) turns on."""
    if model.device.type != "cuda":
        raise ValueError("CUDA graphs (--cuda-graphs) need a CUDA device")
    model.graphs = True


def share_weights_with_hf(model: Llama, hf) -> None:
    """Point the HF LlamaModel's projection weights (built from the same state dict) at views of our fused
    ones (same device and dtype only), so the process holds one copy of the GPT weights while the upstream
    path keeps working.  (HF's own copies are often file-backed safetensors pages the OS can drop.)"""
    s = model.s
    for blk, layer in zip(model.layers, hf.layers):
        wqkv, wo, w13, w2 = blk.wqkv, blk.wo, blk.w13, blk.w2
        if not (isinstance(wqkv, nn.Linear) and isinstance(wo, nn.Linear) and isinstance(w13, nn.Linear)
                and isinstance(w2, nn.Linear)):                          # packed or quantized: nothing to share
            return
        q, k, v = wqkv.weight.split([s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim])
        gate, up = w13.weight.split([s.ffn, s.ffn])
        pairs = ((layer.self_attn.q_proj, q), (layer.self_attn.k_proj, k), (layer.self_attn.v_proj, v),
                 (layer.self_attn.o_proj, wo.weight), (layer.mlp.gate_proj, gate), (layer.mlp.up_proj, up),
                 (layer.mlp.down_proj, w2.weight))
        for lin, w in pairs:
            if lin.weight.shape != w.shape or lin.weight.dtype != w.dtype or lin.weight.device != w.device:
                return
            lin.weight = nn.Parameter(w, requires_grad=False)
