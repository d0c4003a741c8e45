"""The decode loop: ChatTTS's prompt embedding, code heads and logits processing over our Llama and KV cache.

A *row* is one request being decoded.  Rows live in cache *slots*; a slot is refilled as soon as its row ends
(continuous batching).  Step i of a row computes hidden_i (the GPT's last hidden state, which the Decoder turns
into 2 mel frames) and samples the 4 codes of token i from it:

    step 0  = prefill of the prompt `[Stts][spk_emb]text[Ptts]` (+ a sample's codes, engine.voice.Voice), run
              for this row alone (no padding)
    step i  = feed token i-1 (sum of the 4 code embeddings) at position L+i-1

A row ends with T tokens when step T samples EOS (625) in any codebook (hidden_T is dropped), or when it has
made `end_at` steps: its forced token count (EOS masked before it) or its cap of ~3x the expected length.

**Batch invariance.**  A row's result must not depend on its batch-mates.  On CPU an fp32 GEMM row can depend
on the number of rows M of the call and on the block of rows it lands in (MKL: gemv for M=1, another kernel for
M=2-3, every multiple of 4 the same bits; oneDNN's packed kernel on AVX2: rows go in blocks of 6, and a block of
1-3 rows takes another kernel, so M = 4, 5, 6, 10, 11, 12, 16, ... give the same bits; on AVX-512 every M does),
but, measured, not on its neighbours' values.  Which sizes hold is the CPU's and the library's business, never
assumed.  So on CPU (`exact=True`) the engine measures, once per (model, thread count, batch), the call
sizes M whose every row equals the canonical call of EXACT_ROWS rows in every linear layer (`invariant_sizes`),
and a decode step is one call over all active rows padded up to the smallest such size with a scratch slot;
where none fits it falls back to chunks of exactly EXACT_ROWS rows (the canonical shape: both ways give the same
bits).  Attention runs per row over its own prefix, and every per-row
op (logits processing, sampling) reduces over the row's own values only.  Sampling noise is counter-based — a
hash of (row seed, step, codebook, token) — so no RNG state is shared between rows or depends on the device.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch                      # imported lazily by engine.engine, never by engine.api
import torch.nn.functional as F

from engine.llama import KVCache, Llama

EXACT_ROWS = 4                     # the canonical rows per decode call on CPU (fixed GEMM shape => invariant rows)
MAX_NEW_TOKENS = 2048              # hard cap per row (upstream's default: 43.7 s)
CAP_FACTOR = 3.0                   # a row that never samples EOS stops at CAP_FACTOR x its expected tokens
EOS = 625                          # ChatTTS audio EOS id (num_audio_tokens - 1)
_M32 = 0xFFFF_FFFF


@dataclass(frozen=True)
class SamplingParams:
    """Upstream ChatTTS's InferCodeParams defaults."""
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    penalty_window: int = 16       # tokens of the row's own history the penalty looks at
    min_keep: int = 3              # top-P / top-K keep at least this many (upstream: min_tokens_to_keep=3)


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
               p: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's logits processing, in its order: /temperature, repetition penalty, top-P, top-K, EOS mask —
    computed on the K = top_k best tokens only (top-K keeps at most those; top-P keeps a prefix of them).
    logits [B, Q, V] fp32; history [B, Q, W] long, the row's last W codes (V = empty); eos_allowed [B] bool.
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
    keep &= (top_i != EOS) | eos_allowed[:, None, None]
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


# ------------------------------------------------------------------------------------------------ the model
class CodeModel:
    """ChatTTS's GPT for audio codes: text embedding, 4 code embeddings, our Llama, 4 weight-normed heads.
    Embeddings and heads stay fp32 (as upstream); the Llama runs in `dtype`."""

    def __init__(self, llama: Llama, emb_text: torch.Tensor, emb_code: torch.Tensor, head_code: torch.Tensor,
                 spk_emb_id: int):
        self.llama = llama                            # hidden C
        self.emb_text = emb_text                      # [V_text, C] fp32
        self.emb_code = emb_code                      # [Q, V, C] fp32
        self.head = head_code.reshape(-1, head_code.shape[-1])   # [Q·V, C] fp32, weight-norm applied once
        self.head_linear = lambda h: F.linear(h, self.head)      # [B, C] fp32 -> [B, Q·V] (pack(): oneDNN)
        self.Q, self.V = head_code.shape[0], head_code.shape[1]
        self.spk_emb_id = spk_emb_id
        self.dtype = next(llama.parameters()).dtype
        self.device = emb_text.device
        self.graphs = False                           # decode steps as CUDA graphs (enable_compile)
        self.cells = hash32(torch.arange(self.Q * self.V, device=self.device, dtype=torch.long) + 1)
        self._sizes: dict[tuple[int, int], tuple[int, ...]] = {}  # (threads, max_rows) -> invariant_sizes

    def linears(self) -> list:
        """One (fn, in_features) per distinct linear shape the decode step runs: the block projections, the heads."""
        b = self.llama.layers[0]
        out = [(getattr(b, n), getattr(b, n).in_features) for n in ("wqkv", "wo", "w13", "w2")]
        return out + [(lambda x: self.head_linear(x.float()), self.head.shape[1])]   # heads run fp32

    def call_size(self, rows: int, max_rows: int) -> int | None:
        """The smallest batch-invariant call size >= rows (`invariant_sizes` for this thread count and
        max_rows, measured once); None when there is none (then: canonical chunks)."""
        key = (torch.get_num_threads(), max_rows)
        if key not in self._sizes:
            self._sizes[key] = invariant_sizes(self, max_rows)
        return next((m for m in self._sizes[key] if m >= rows), None)

    @classmethod
    def from_chattts(cls, gpt, embed, spk_emb_id: int, device, dtype) -> "CodeModel":
        """From ChatTTS's loaded `GPT` (its `.gpt` is the HF LlamaModel) and `Embed` modules."""
        from engine.llama import LlamaShape, build_llama, share_weights_with_hf
        shape = LlamaShape.from_hf(gpt.gpt.config)
        llama = build_llama(shape, {k: v.detach() for k, v in gpt.gpt.state_dict().items()}, device, dtype)
        share_weights_with_hf(llama, gpt.gpt)        # one copy of the weights when dtype/device agree
        with torch.no_grad():
            emb_code = torch.stack([e.weight.detach().float() for e in embed.emb_code]).to(device)
            head = torch.stack([h.weight.detach().float() for h in embed.head_code]).to(device)  # g·v/|v|
        return cls(llama, embed.emb_text.weight.detach().float().to(device), emb_code, head, spk_emb_id)

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

    def pack(self, make=None) -> "CodeModel":
        """CPU fp32: the block projections (those still dense nn.Linear) and the heads through a packed-weight
        linear, make(weight): engine.llama.PackedLinear (oneDNN, the default) or engine.kernels.GemmLinear (the
        caller checks that it is available: engine.llama.cpu_linear).  Forget the call sizes measured for the old
        kernel."""
        from engine.llama import PackedLinear, pack_linears

        make = make or PackedLinear
        pack_linears(self.llama, make)
        self.head_linear = make(self.head)
        self._sizes.clear()
        return self

    def quantize_int8(self) -> "CodeModel":
        """The block projections in int8 (engine.llama.quantize_int8; before `pack`, which then packs only what is
        left in fp32: the heads).  Forget the call sizes measured for the old kernel."""
        from engine.llama import quantize_int8

        quantize_int8(self.llama)
        self._sizes.clear()
        return self


@torch.no_grad()
def invariant_sizes(model: CodeModel, max_rows: int) -> tuple[int, ...]:
    """The call sizes M (ascending, from 1 up to max_rows rounded up to EXACT_ROWS, plus EXACT_ROWS) for which
    every row of every linear layer of `model` comes out bit-identical to the canonical calls of EXACT_ROWS rows.
    Kernel choice depends on shapes (and the thread split), not on values, so random inputs settle it for this
    machine, library build and thread count (the caller keys it on those).  Measured on 1 and 2 threads: MKL
    4, 8, 12, ... (M = 1..3 take other kernels, M = 5..11 not multiples of 4 differ on 2 threads: each thread
    gets a ragged block); oneDNN packed on AVX2 (or ONEDNN_MAX_CPU_ISA=AVX2) 4, 5, 6, 10, 11, 12, ... (blocks of
    6 rows; a block of 1-3 differs), on AVX-512 every size; engine/kernels.c every size."""
    top = -(-max_rows // EXACT_ROWS) * EXACT_ROWS + EXACT_ROWS
    gen = torch.Generator(device="cpu").manual_seed(0)
    layers = []
    for fn, k in model.linears():
        x = torch.randn(top, k, generator=gen).to(model.device, model.dtype)
        layers.append((fn, x, torch.cat([fn(c) for c in x.split(EXACT_ROWS)])))   # every row in a canonical call
    return tuple(m for m in range(1, top + 1) if all(torch.equal(fn(x[:m]), ref[:m]) for fn, x, ref in layers))


def enable_compile(model: CodeModel) -> None:
    """Decode steps run as captured CUDA graphs (one per attention-length bucket); CUDA only."""
    if model.device.type != "cuda":
        raise ValueError("compile needs a CUDA device")
    model.graphs = True


# ------------------------------------------------------------------------------------------------ the rows
@dataclass
class Row:
    """One request being decoded."""
    key: str                       # the request key (returned with the result)
    ids: torch.Tensor              # [L] prompt token ids (embedded at admission: pending rows stay small)
    spk: torch.Tensor | None       # [C] speaker embedding, or None
    rng: int                       # row_key(seed)
    end_at: int                    # steps to run at most (forced count, or the cap)
    forced: bool                   # end_at is exact: EOS masked before it
    order: int = 0                 # arrival index (ties in scheduling)
    codes: torch.Tensor | None = None   # [P, Q] a sample's audio codes after the text ids (clip/anchor voices)
    slot: int = -1
    steps: int = 0                 # steps done
    tokens: int | None = None      # T once finished
    hiddens: torch.Tensor | None = field(default=None, repr=False)   # [T, C] fp32 once finished

    @property
    def prompt_len(self) -> int:
        """L + P: text ids and sample codes."""
        return self.ids.shape[0] + (0 if self.codes is None else self.codes.shape[0])


def eos_allowed(r: "Row") -> bool:
    """Forced rows never sample EOS (they end by count); others may from step 1 on (no empty rows)."""
    return r.steps >= r.end_at if r.forced else r.steps >= 1


class DecodeBatch:
    """Slots over one KV cache.  `admit` prefills a row into a free slot; `step` advances every active row by
    one token and returns the rows that finished (slot freed).  Prefill never touches other slots."""

    def __init__(self, model: CodeModel, slots: int, max_len: int, max_steps: int, exact: bool,
                 params: SamplingParams = SamplingParams()):
        dev, C, Q = model.device, model.llama.s.hidden, model.Q
        self.model, self.params, self.exact = model, params, exact
        self.slots, self.max_len, self.max_steps = slots, max_len, max_steps
        self.scratch = slots                                   # a spare slot that padding rows write into
        self.cache = KVCache(model.llama.s, slots + 1, max_len, dev, model.dtype)
        self.hid = torch.zeros(slots + 1, max_steps, C, device=dev, dtype=torch.float32)   # hidden_i per slot
        self.last = torch.zeros(slots + 1, Q, dtype=torch.long, device=dev)        # token of the last step
        self.hist = torch.full((slots + 1, Q, params.penalty_window), model.V, dtype=torch.long, device=dev)
        self.rows: dict[int, Row] = {}                          # slot -> row
        self.graphs = None if exact else GraphStep(self, capture=model.graphs and dev.type == "cuda")

    def free_slots(self) -> list[int]:
        return [s for s in range(self.slots) if s not in self.rows]

    def fits(self, row: Row) -> bool:
        return row.prompt_len + row.end_at <= self.max_len and row.end_at <= self.max_steps

    # ---- one row alone: prefill = step 0
    @torch.no_grad()
    def admit(self, row: Row, slot: int) -> Row | None:
        """Prefill `row` into free `slot` and sample its token 0.  Returns the row if it already finished."""
        assert slot not in self.rows and self.fits(row)
        dev, L = self.model.device, row.prompt_len
        row.slot, row.steps = slot, 0
        self.hist[slot].fill_(self.model.V)
        prompt = self.model.prompt_embedding(row.ids, row.spk, row.codes)        # [1, L, C]
        pos = torch.arange(L, device=dev)[None]                                   # [1, L]
        sl = torch.tensor([slot], device=dev)
        if self.exact:
            h = self.model.llama(prompt, pos, self.cache, sl, lengths=[L])
        else:
            mask = torch.ones(L, L, dtype=torch.bool, device=dev).tril()[None, None]
            h = self.model.llama(prompt, pos, self.cache, sl, mask=mask)
        self.rows[slot] = row
        done = self._sample([row], h[:, -1])                                      # h [1, L, C]
        return done[0] if done else None

    # ---- every active row: one decode step
    @torch.no_grad()
    def step(self) -> list[Row]:
        """Advance all active rows by one token; return the finished ones (their slots are free again)."""
        active = [self.rows[s] for s in sorted(self.rows)]
        if not active:
            return []
        if not self.exact:                                   # all slots in one call (CUDA graphs when compiled)
            h, tok = self.graphs.run(active)
            return self._record(active, h, tok)
        size = self.model.call_size(len(active), self.slots)
        if size is None:                                     # chunks of the canonical shape
            return [r for i in range(0, len(active), EXACT_ROWS)
                    for r in self._decode(active[i:i + EXACT_ROWS], EXACT_ROWS)]
        return self._decode(active, size)

    def _decode(self, rows: list[Row], size: int) -> list[Row]:
        """One exact decode call over `rows` padded to `size` rows with the scratch slot."""
        dev = self.model.device
        pad = size - len(rows)
        slots = torch.tensor([r.slot for r in rows] + [self.scratch] * pad, device=dev)          # [n]
        pos_list = [r.prompt_len + r.steps - 1 for r in rows] + [0] * pad                       # token i-1 at L+i-1
        pos = torch.tensor(pos_list, device=dev)[:, None]                                        # [n, 1]
        x = self.model.code_embedding(self.last[slots])                                          # [n, 1, C]
        lengths = [p + 1 for p in pos_list[:len(rows)]] + [0] * pad
        h = self.model.llama(x, pos, self.cache, slots, lengths=lengths)
        return self._sample(rows, h[:, 0], slots)

    def _sample(self, rows: list[Row], h: torch.Tensor, slots: torch.Tensor | None = None) -> list[Row]:
        """h [n, C] hidden of this step for `rows` (+ padding rows): sample, then record."""
        dev, n = self.model.device, h.shape[0]
        pad = n - len(rows)
        if slots is None:
            slots = torch.tensor([r.slot for r in rows], device=dev)
        steps = torch.tensor([r.steps for r in rows] + [0] * pad, device=dev)
        keys = torch.tensor([r.rng for r in rows] + [0] * pad, device=dev)
        eos_ok = torch.tensor([eos_allowed(r) for r in rows] + [False] * pad, device=dev)
        logits = self.model.logits(h)                                                            # [n, Q, V]
        with torch.profiler.record_function("sampling"):    # a range for benchmarks/limits.step_profile
            cx, ci = candidates(logits, self.hist[slots], eos_ok, self.params)                   # [n, Q, K]
            tok = sample_candidates(cx, ci, keys, steps, self.model.cells, self.model.V)          # [n, Q]
        return self._record(rows, h[:len(rows)], tok[:len(rows)])

    def _record(self, rows: list[Row], h: torch.Tensor, tok: torch.Tensor) -> list[Row]:
        """Store hidden_i [B, C] and token i [B, Q] of `rows`; retire the rows that finished."""
        dev = self.model.device
        live = torch.tensor([r.slot for r in rows], device=dev)
        steps = torch.tensor([r.steps for r in rows], device=dev)
        self.hid[live, steps] = h.float()
        self.last[live] = tok
        self.hist[live] = torch.cat([self.hist[live, :, 1:], tok[:, :, None]], 2)
        eos = tok.eq(EOS).any(1).tolist()
        finished = []
        for r, e in zip(rows, eos):
            r.steps += 1
            if e or r.steps >= r.end_at:
                r.tokens = r.steps - 1 if e else r.steps
                finished.append(self.release(r))
        return finished

    def release(self, row: Row) -> Row:
        """Take a finished row out of its slot, with a copy of its hidden states [T, C]."""
        row.hiddens = self.hid[row.slot, :row.tokens].clone()
        del self.rows[row.slot]
        return row


GRAPH_BUCKET = 256                 # attention length of captured graphs: multiples of this many positions


def graph_bucket(longest: int, max_len: int) -> int:
    """The attention length S of a non-exact (CUDA) decode step whose longest active row attends over `longest`
    positions: the next multiple of GRAPH_BUCKET, at most the cache's max_len.  It is the batch's, not the
    row's: on CUDA a row's rounding depends on (slot count, S) — docs/architecture.md, Determinism on CUDA."""
    return min(max_len, -(-longest // GRAPH_BUCKET) * GRAPH_BUCKET)


class GraphStep:
    """The non-exact decode step: *all* slots of a DecodeBatch in one call, attention over cache views of
    length S (a multiple of GRAPH_BUCKET).  Inactive slots are computed too (position 0 of their own unused
    cache row) and ignored.  With `capture` (CUDA + compile) each S is a captured CUDA graph: static inputs are
    filled before each replay and outputs copied out of static buffers; without, the same body runs eagerly."""

    def __init__(self, batch: DecodeBatch, capture: bool):
        dev, B = batch.model.device, batch.slots
        self.batch, self.B = batch, B
        self.pos = torch.zeros(B, 1, dtype=torch.long, device=dev)
        self.steps = torch.zeros(B, dtype=torch.long, device=dev)
        self.keys = torch.zeros(B, dtype=torch.long, device=dev)
        self.eos_ok = torch.zeros(B, dtype=torch.bool, device=dev)
        self.h = torch.zeros(B, batch.model.llama.s.hidden, dtype=torch.float32, device=dev)
        self.tok = torch.zeros(B, batch.model.Q, dtype=torch.long, device=dev)
        self.capture = capture
        self.graphs: dict[int, object] = {}
        self.pool = None

    def _body(self, S: int) -> None:
        b, m = self.batch, self.batch.model
        x = m.code_embedding(b.last[:self.B])                                          # [B, 1, C]
        mask = (torch.arange(S, device=m.device)[None, :] <= self.pos)[:, None, None, :]   # [B, 1, 1, S]
        h = m.llama(x, self.pos, b.cache, None, mask=mask)[:, 0]                        # [B, C]
        logits = m.logits(h)
        with torch.profiler.record_function("sampling"):
            cx, ci = candidates(logits, b.hist[:self.B], self.eos_ok, b.params)
            self.tok.copy_(sample_candidates(cx, ci, self.keys, self.steps, m.cells, m.V))
        self.h.copy_(h.float())

    def _graph(self, S: int):
        if not self.capture:
            return _Eager(lambda: self._body(S))
        if S not in self.graphs:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):                     # warm up kernels/workspaces (same inputs: idempotent)
                    self._body(S)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(g, pool=self.pool):
                self._body(S)
            self.graphs[S] = g
        return self.graphs[S]

    def run(self, rows: list[Row]) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden [n, C] and tokens [n, Q] of this step for `rows`."""
        dev = self.batch.model.device
        live = torch.tensor([r.slot for r in rows], device=dev)
        pos = [r.prompt_len + r.steps - 1 for r in rows]
        self.pos.zero_()
        self.pos[live, 0] = torch.tensor(pos, device=dev)
        self.steps[live] = torch.tensor([r.steps for r in rows], device=dev)
        self.keys[live] = torch.tensor([r.rng for r in rows], device=dev)
        self.eos_ok.zero_()
        self.eos_ok[live] = torch.tensor([eos_allowed(r) for r in rows], device=dev)
        S = graph_bucket(max(pos) + 1, self.batch.max_len)
        with torch.no_grad():
            self._graph(S).replay()
        return self.h[live], self.tok[live]


class _Eager:
    """Stands in for a CUDA graph when not capturing."""

    def __init__(self, fn):
        self.replay = fn
