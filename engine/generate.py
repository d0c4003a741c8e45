"""The decode loop: rows in the KV cache's slots, prefill and decode steps over engine.codemodel.CodeModel.

A *row* is one request being decoded; rows live in cache *slots*, and a slot is refilled as soon as its row ends
(continuous batching).  Step 0 prefills the row's prompt alone; step i feeds token i-1 and samples the 4 codes of
token i.  A row ends at EOS or after `end_at` steps (its forced count, or its cap).  A *text row* (`text_eos`: the
refine-text pass) runs the same loop with the text head and keeps its ids; a batch holds rows of one kind and one
SamplingParams.  A row's result never depends on its batch-mates on CPU (`exact=True`): each step's call size is
one measured to give every row the canonical bits, attention and sampling are per row, and sampling noise is
counter-based.  How and why: docs/modules.md, "The decode loop and batch invariance".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch  # imported lazily by engine.engine, never by engine.api

from engine.attention import Batched
from engine.codemodel import EXACT_ROWS, CodeModel
from engine.llama import KVCache
from engine.sampling import EOS, SamplingParams, candidates, sample_candidates

CODE_SAMPLING = SamplingParams()   # upstream's InferCodeParams: every row's unless its controls say otherwise

MAX_NEW_TOKENS = 2048              # hard cap per row (upstream's default: 43.7 s)
CAP_FACTOR = 3.0                   # a row that never samples EOS stops at CAP_FACTOR x its expected tokens


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
    rank: int = 0                  # the request's rank: lower ranks are admitted first (engine.scheduler)
    codes: torch.Tensor | None = None   # [P, Q] a sample's audio codes after the text ids (clip/anchor voices)
    params: SamplingParams = CODE_SAMPLING   # its logits processing (rows of one batch share it)
    text_eos: int | None = None    # a text row (the refine pass): its end id, [Ebreak]; None: a code row
    slot: int = -1
    steps: int = 0                 # steps done
    tokens: int | None = None      # T once finished
    hiddens: torch.Tensor | None = field(default=None, repr=False)   # [T, C] fp32 once finished (a code row)
    out_ids: list[int] | None = None   # the T generated text ids once finished (a text row)

    @property
    def prompt_len(self) -> int:
        """L + P: text ids and sample codes."""
        return self.ids.shape[0] + (0 if self.codes is None else self.codes.shape[0])


def eos_allowed(r: Row) -> bool:
    """Forced rows never sample EOS (they end by count); others may from step 1 on (no empty rows)."""
    return r.steps >= r.end_at if r.forced else r.steps >= 1


class DecodeBatch:
    """Slots over one KV cache.  `admit` prefills a row into a free slot; `step` advances every active row by
    one token and returns the rows that finished (slot freed).  Prefill never touches other slots."""

    def __init__(self, model: CodeModel, slots: int, max_len: int, max_steps: int, exact: bool,
                 params: SamplingParams = CODE_SAMPLING, text_eos: int | None = None):
        dev, C = model.device, model.llama.s.hidden
        self.model, self.params, self.exact, self.text_eos = model, params, exact, text_eos
        text = text_eos is not None                            # a refine pass: text head, one id per step
        Q, self.V = (1, model.V_text) if text else (model.Q, model.V)
        self.eos = EOS if text_eos is None else text_eos
        self.cells = model.text_cells if text else model.cells
        self.slots, self.max_len, self.max_steps = slots, max_len, max_steps
        self.scratch = slots                                   # a spare slot that padding rows write into
        self.attention = model.llama.attention if exact else Batched()     # engine/attention.py, for every call
        kv_dtype = self.attention.kv_dtype or model.dtype                   # (bf16 kernels: a bf16 cache)
        self.cache = KVCache(model.llama.s, slots + 1, max_len, dev, kv_dtype)
        self.hid = None if text else torch.zeros(slots + 1, max_steps, C, device=dev, dtype=torch.float32)  # hidden_i
        self.ids = torch.zeros(slots + 1, max_steps, dtype=torch.long, device=dev) if text else None    # text id i
        self.last = torch.zeros(slots + 1, Q, dtype=torch.long, device=dev)        # token of the last step
        self.hist = torch.full((slots + 1, Q, params.penalty_window), self.V, dtype=torch.long, device=dev)
        self.rows: dict[int, Row] = {}                          # slot -> row
        if exact and not self.attention.exact:
            raise ValueError(f"exact decoding needs an exact attention strategy, not {self.attention!r}")
        self.graphs = None if exact else GraphStep(self, capture=model.graphs and dev.type == "cuda")

    def free_slots(self) -> list[int]:
        return [s for s in range(self.slots) if s not in self.rows]

    def fits(self, row: Row) -> bool:
        return (row.prompt_len + row.end_at <= self.max_len and row.end_at <= self.max_steps
                and row.text_eos == self.text_eos and row.params == self.params)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The last step's tokens [n, Q] -> the next input [n, 1, C]."""
        return self.model.code_embedding(tokens) if self.hid is not None else self.model.text_embedding(tokens[:, 0])

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [n, C] -> logits [n, Q, V] fp32 (the code heads, or the text head)."""
        return self.model.logits(h) if self.hid is not None else self.model.text_logits(h)

    # ---- one row alone: prefill = step 0
    @torch.no_grad()
    def admit(self, row: Row, slot: int) -> Row | None:
        """Prefill `row` into free `slot` and sample its token 0.  Returns the row if it already finished."""
        assert slot not in self.rows and self.fits(row)
        dev, L = self.model.device, row.prompt_len
        row.slot, row.steps = slot, 0
        self.hist[slot].fill_(self.V)
        prompt = self.model.prompt_embedding(row.ids, row.spk, row.codes)        # [1, L, C]
        pos = torch.arange(L, device=dev)[None]                                   # [1, L]
        sl = torch.tensor([slot], device=dev)
        h = self.model.llama(prompt, self.attention.begin(self.cache, pos, sl, [L]))   # [1, L, C]
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
        if self.graphs is not None:                          # not exact: all slots in one call (CUDA graphs
            h, tok = self.graphs.run(active)                 # when compiled)
            return self._record(active, h, tok)
        size = (self.model.call_size(len(active), self.slots) if self.hid is not None        # a code step
                else self.model.call_size(len(active), self.slots, text=True))                # a refine step
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
        x = self._embed(self.last[slots])                                                        # [n, 1, C]
        lengths = [p + 1 for p in pos_list[:len(rows)]] + [0] * pad
        h = self.model.llama(x, self.attention.begin(self.cache, pos, slots, lengths))
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
        logits = self._logits(h)                                                                 # [n, Q, V]
        with torch.profiler.record_function("sampling"):    # a range for benchmarks/limits.step_profile
            cx, ci = candidates(logits, self.hist[slots], eos_ok, self.params, self.eos)         # [n, Q, K]
            tok = sample_candidates(cx, ci, keys, steps, self.cells, self.V)                      # [n, Q]
        return self._record(rows, h[:len(rows)], tok[:len(rows)])

    def _record(self, rows: list[Row], h: torch.Tensor, tok: torch.Tensor) -> list[Row]:
        """Store hidden_i [B, C] and token i [B, Q] of `rows`; retire the rows that finished."""
        dev = self.model.device
        live = torch.tensor([r.slot for r in rows], device=dev)
        steps = torch.tensor([r.steps for r in rows], device=dev)
        if self.hid is not None:
            self.hid[live, steps] = h.float()
        elif self.ids is not None:
            self.ids[live, steps] = tok[:, 0]
        self.last[live] = tok
        self.hist[live] = torch.cat([self.hist[live, :, 1:], tok[:, :, None]], 2)
        eos = tok.eq(self.eos).any(1).tolist()
        finished = []
        for r, e in zip(rows, eos):
            r.steps += 1
            if e or r.steps >= r.end_at:
                r.tokens = r.steps - 1 if e else r.steps
                finished.append(self.release(r))
        return finished

    def release(self, row: Row) -> Row:
        """Take a finished row out of its slot, with a copy of its hidden states [T, C] (a text row: its ids)."""
        if self.hid is not None:
            row.hiddens = self.hid[row.slot, :row.tokens].clone()
        elif self.ids is not None:
            row.out_ids = self.ids[row.slot, :row.tokens].tolist()
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
    cache row) and ignored.  With `capture` (CUDA + cuda_graphs) each S is a captured CUDA graph: static inputs are
    filled before each replay and outputs copied out of static buffers; without, the same body runs eagerly."""

    def __init__(self, batch: DecodeBatch, capture: bool):
        dev, B = batch.model.device, batch.slots
        self.batch, self.B = batch, B
        self.pos = torch.zeros(B, 1, dtype=torch.long, device=dev)
        self.steps = torch.zeros(B, dtype=torch.long, device=dev)
        self.keys = torch.zeros(B, dtype=torch.long, device=dev)
        self.eos_ok = torch.zeros(B, dtype=torch.bool, device=dev)
        self.h = torch.zeros(B, batch.model.llama.s.hidden, dtype=torch.float32, device=dev)
        self.tok = torch.zeros(B, batch.last.shape[1], dtype=torch.long, device=dev)
        self.capture = capture
        self.graphs: dict[int, object] = {}
        self.pool: Any = None                            # torch.cuda.graph_pool_handle(): the first capture's

    def _body(self, S: int) -> None:
        b, m = self.batch, self.batch.model
        x = b._embed(b.last[:self.B])                                                   # [B, 1, C]
        call = b.attention.begin(b.cache, self.pos, None, [S] * self.B)   # Batched: slots 0..B-1 over S positions
        h = m.llama(x, call)[:, 0]                                                      # [B, C]
        logits = b._logits(h)
        with torch.profiler.record_function("sampling"):
            cx, ci = candidates(logits, b.hist[:self.B], self.eos_ok, b.params, b.eos)
            self.tok.copy_(sample_candidates(cx, ci, self.keys, self.steps, b.cells, b.V))
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
