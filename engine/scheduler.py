"""Continuous batching: pending rows, length buckets, a memory-sized batch, refill on finish, OOM backoff.

    sched = Scheduler(model, max_batch=32, exact=True)
    for row in sched.run(rows):          # rows come back as they finish, row.hiddens [T, C] filled
        ...

Pending rows start by rank (Request.rank), then longest first; a batch holds rows of one kind and one
SamplingParams, as many as fit free memory (at most `max_batch`); a finished row's slot is refilled at once (the
newcomer prefilled alone), a CUDA out-of-memory error halves the batch, and rows may join while it runs (`more`),
each in its place in that order.
The order, the batch, the backoff and late rows: docs/modules.md, "Continuous batching".
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

import torch

from engine.codemodel import CodeModel
from engine.generate import DecodeBatch, Row
from engine.llama import KVCache

BUCKET_TOKENS = 128                # rows whose step counts fall in the same 128-token bucket decode together
MEMORY_FRACTION = 0.5              # share of free memory the KV cache and hidden buffers may take
LEN_ROUND = 64                     # cache length rounded up to this many positions


def bucket_order(rows: Iterable[Row]) -> list[Row]:
    """Lowest rank first, then longest bucket first, then arrival order."""
    return sorted(rows, key=lambda r: (r.rank, -((r.prompt_len + r.end_at) // BUCKET_TOKENS), r.order))


def free_memory(device: torch.device) -> int:
    """Bytes free for new tensors on `device`."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    import psutil
    return int(psutil.virtual_memory().available)


def row_bytes(model: CodeModel, max_len: int, max_steps: int) -> int:
    """Memory one slot holds: its KV cache, its hidden-state buffer, and a rough share of activations."""
    s = model.llama.s
    dtype_bytes = torch.empty(0, dtype=model.dtype).element_size()
    kv = KVCache.bytes_per_token(s, dtype_bytes) * max_len
    hid = max_steps * s.hidden * 4
    act = 8 * max(s.ffn, model.Q * model.V) * 4 * max_len // 16      # attention scores + MLP, generously
    return kv + hid + act


def batch_for_budget(model: CodeModel, max_batch: int, max_len: int, max_steps: int,
                     free_bytes: int | None = None) -> int:
    """Slots that fit MEMORY_FRACTION of free memory, in [1, max_batch]."""
    free = free_memory(model.device) if free_bytes is None else free_bytes
    return max(1, min(max_batch, int(free * MEMORY_FRACTION) // row_bytes(model, max_len, max_steps)))


def is_oom(err: BaseException | None) -> bool:
    """An out-of-memory error, also when it surfaces as the context of another (e.g. a broken graph capture)."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower():
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


class Scheduler:
    """Feeds rows through DecodeBatch slots; see the module docstring."""

    def __init__(self, model: CodeModel, max_batch: int, exact: bool, free_bytes: int | None = None,
                 step_hook: Callable[[DecodeBatch], None] | None = None):
        self.model, self.max_batch, self.exact = model, max_batch, exact
        self.free_bytes = free_bytes                 # None: measure; tests pass a number
        self.step_hook = step_hook                   # called before every decode step (tests inject faults)
        self.batch_sizes: list[int] = []             # every batch size used, in order (OOM backoff shows here)
        self.refills = 0                             # admissions while other rows were mid-decode

    def run(self, rows: Iterable[Row], more: Callable[[bool], Iterable[Row]] | None = None) -> Iterator[Row]:
        pending = deque(bucket_order(rows))
        cap = self.max_batch                         # halved by each out-of-memory error
        size = 0
        batch: DecodeBatch | None = None
        while True:
            in_flight = batch is not None and bool(batch.rows)
            if more is not None and (late := list(more(not pending and not in_flight))):
                pending = deque(bucket_order([*pending, *late]))   # a late row takes its place by rank
            if not pending and not in_flight:
                return
            finished: list[Row] = []
            touched: list[Row] = []                  # rows whose state this iteration may leave half-done
            try:
                if batch is None or (not batch.rows and not any(batch.fits(r) for r in pending)):
                    kind = (pending[0].text_eos, pending[0].params)
                    group = [r for r in pending if (r.text_eos, r.params) == kind]
                    max_len = -(-max(r.prompt_len + r.end_at for r in group) // LEN_ROUND) * LEN_ROUND
                    max_steps = max(r.end_at for r in group)
                    size = batch_for_budget(self.model, min(cap, len(group)), max_len, max_steps, self.free_bytes)
                    batch = DecodeBatch(self.model, size, max_len, max_steps, self.exact, params=kind[1],
                                        text_eos=kind[0])
                    self.batch_sizes.append(size)
                for slot in batch.free_slots():
                    row = _pop_fitting(pending, batch)
                    if row is None:
                        break
                    touched.append(row)
                    self.refills += bool(batch.rows) and any(r.steps > 1 for r in batch.rows.values())
                    done = batch.admit(row, slot)
                    if done is not None:
                        finished.append(done)
                if batch.rows:
                    touched += [r for r in batch.rows.values() if r not in touched]
                    if self.step_hook is not None:
                        self.step_hook(batch)
                    finished += batch.step()
            except (torch.OutOfMemoryError, RuntimeError) as err:
                if not is_oom(err) or size == 1:
                    raise
                keep = {id(r) for r in finished}
                redo = {id(r): r for r in touched if id(r) not in keep}
                redo.update({id(r): r for r in batch.rows.values()} if batch is not None else {})
                for r in redo.values():
                    r.slot, r.steps, r.tokens, r.hiddens = -1, 0, None, None
                pending.extendleft(sorted(redo.values(), key=lambda r: r.order, reverse=True))
                batch = None
                if self.model.device.type == "cuda":
                    torch.cuda.empty_cache()
                cap = max(1, size // 2)
            yield from finished


def _pop_fitting(pending: deque, batch: DecodeBatch) -> Row | None:
    """The first pending row that fits the batch's cache, taken out of the queue; None when none does."""
    for i, row in enumerate(pending):
        if batch.fits(row):
            del pending[i]
            return row
    return None
