"""Scheduler: bucket order, memory budget, continuous refill, OOM backoff (injected) with identical output.

The model's linears are a test double invariant at every call size by construction (test_generate.RowwiseLinear):
"identical output" across batch sizes is then the scheduler's to keep on any CPU, not the BLAS's."""
from __future__ import annotations

import pytest
import torch

from engine import scheduler as S
from tests.engine.test_generate import kernel_model, make_row

SPECS = [(f"r{i}", 4 + 2 * i, 50 + i, 5 + 6 * (i % 3)) for i in range(9)]   # key, prompt, seed, T


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return kernel_model("rowwise", seed=3)


@pytest.fixture(scope="module")
def reference(model):
    return run(model, max_batch=4)[0]


def rows(model):
    out = [make_row(model, *s) for s in SPECS]
    for i, r in enumerate(out):
        r.order = i
    return out


def run(model, max_batch, hook=None):
    sched = S.Scheduler(model, max_batch=max_batch, exact=True, free_bytes=1 << 40, step_hook=hook)
    return {r.key: r for r in sched.run(rows(model))}, sched


def test_bucket_order_longest_first_then_arrival(model):
    rs = rows(model)
    ordered = S.bucket_order(rs)
    buckets = [-((r.prompt_len + r.end_at) // S.BUCKET_TOKENS) for r in ordered]
    assert buckets == sorted(buckets)
    rs[0].end_at, rs[5].end_at = 400, 300
    assert [r.key for r in S.bucket_order(rs)[:2]] == ["r0", "r5"]


def test_budget_caps_batch(model):
    per_row = S.row_bytes(model, 512, 256)
    assert per_row > 0
    assert S.batch_for_budget(model, 16, 512, 256, free_bytes=int(per_row * 3 / S.MEMORY_FRACTION)) == 3
    assert S.batch_for_budget(model, 16, 512, 256, free_bytes=1) == 1
    assert S.batch_for_budget(model, 16, 512, 256, free_bytes=1 << 50) == 16


def test_continuous_refill_and_all_rows_finish(model):
    out, sched = run(model, max_batch=3)
    assert set(out) == {s[0] for s in SPECS}
    assert all(out[k].tokens == T for k, _, _, T in SPECS)
    assert sched.batch_sizes == [3] and sched.refills >= len(SPECS) - 3


@pytest.mark.parametrize("fail_at", [1, 7, 20])
def test_oom_halves_batch_and_output_is_identical(model, reference, fail_at):
    ref = reference
    calls = {"n": 0}

    def hook(batch):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise torch.OutOfMemoryError("CUDA out of memory. (injected)")

    out, sched = run(model, max_batch=4, hook=hook)
    assert sched.batch_sizes == [4, 2]
    assert set(out) == set(ref)
    for k in ref:
        assert out[k].tokens == ref[k].tokens and torch.equal(out[k].hiddens, ref[k].hiddens), k


def test_oom_at_batch_one_and_other_errors_propagate(model):
    def oom(batch):
        raise torch.OutOfMemoryError("CUDA out of memory. (injected)")

    with pytest.raises(torch.OutOfMemoryError):
        S.Scheduler(model, max_batch=1, exact=True, free_bytes=1 << 40, step_hook=oom).run(rows(model)).__next__()

    def boom(batch):
        raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else"):
        list(S.Scheduler(model, max_batch=4, exact=True, free_bytes=1 << 40, step_hook=boom).run(rows(model)))


@pytest.mark.parametrize("fail_at", [2, 9, 30])
def test_oom_inside_forward_prefill_or_decode(model, reference, fail_at):
    """The error raised inside the Llama forward (a newcomer's prefill or a decode step): same output."""
    ref = reference
    calls = {"n": 0}
    forward = model.llama.forward

    def failing(*a, **k):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise torch.OutOfMemoryError("CUDA out of memory. (injected)")
        return forward(*a, **k)

    model.llama.forward = failing
    try:
        out, sched = run(model, max_batch=4)
    finally:
        del model.llama.forward
    assert sched.batch_sizes == [4, 2]
    for k in ref:
        assert out[k].tokens == ref[k].tokens and torch.equal(out[k].hiddens, ref[k].hiddens), k


def test_rows_arriving_while_it_runs_join_the_running_batch_and_decode_as_alone(model, reference):
    """`more` (a proof render's re-takes): rows given while the batch decodes are admitted into freed slots of the
    same batch; a late row too long for its cache waits for the batch to drain and gets a batch of its own; the run
    ends only when more(idle=True) has nothing.  Every row's output is what it is alone."""
    def long_row():                                          # 86 positions: beyond the first batch's cache (64)
        r = make_row(model, "long", 6, 99, 80)
        r.order = len(SPECS)
        return r

    alone = next(S.Scheduler(model, max_batch=1, exact=True, free_bytes=1 << 40).run([long_row()]))
    first, late = rows(model)[:3], rows(model)[3:]
    queue = [late[:2], [late[2], long_row()], *([r] for r in late[3:])]
    asked: list[bool] = []

    def more(idle: bool) -> list:
        asked.append(idle)
        return queue.pop(0) if queue and (idle or len(asked) % 3 == 0) else []

    sched = S.Scheduler(model, max_batch=4, exact=True, free_bytes=1 << 40)
    out = {r.key: r for r in sched.run(first, more)}
    assert set(out) == set(reference) | {"long"} and not queue
    for k in reference:
        assert out[k].tokens == reference[k].tokens and torch.equal(out[k].hiddens, reference[k].hiddens), k
    assert out["long"].tokens == 80 and torch.equal(out["long"].hiddens, alone.hiddens)
    assert sched.batch_sizes == [3, 1]          # the late rows joined the first batch; the long one came after it
    assert sched.refills >= len(late) - 1       # admitted while other rows were mid-decode
    assert asked[-1] is True                    # it ended idle, when more had nothing


def test_a_late_row_takes_its_place_by_rank(model, reference):
    """A row given by `more` (a re-roll, a re-take) is admitted by rank like the others, before pending rows of a
    later rank: not after every row already waiting."""
    rs = rows(model)
    for r in rs:
        r.rank = 1
    first, late = rs[:-1], rs[-1]
    late.rank = 0
    given = [late]
    admitted: list[str] = []

    def more(_idle: bool) -> list:
        return [given.pop()] if given and admitted else []

    def hook(batch):
        admitted.extend(r.key for r in batch.rows.values() if r.key not in admitted)

    sched = S.Scheduler(model, max_batch=1, exact=True, free_bytes=1 << 40, step_hook=hook)
    out = {r.key: r for r in sched.run(first, more)}
    assert set(out) == set(reference)
    assert admitted[1] == late.key, admitted               # next after the row that was running when it came
    for k in reference:
        assert out[k].tokens == reference[k].tokens and torch.equal(out[k].hiddens, reference[k].hiddens), k


def test_is_oom_follows_the_exception_chain():
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory.")
        except torch.OutOfMemoryError:
            raise RuntimeError("operation failed during capture")  # noqa: B904 — implicit, as torch chains it
    except RuntimeError as err:
        assert S.is_oom(err)
    assert not S.is_oom(RuntimeError("shape mismatch"))


def test_rank_comes_before_the_bucket_and_changes_no_row(model, reference):
    """Request.rank (a book's chapter in reading order) orders admission before the length buckets; each row's
    output stays exactly what it is without ranks."""
    rs = rows(model)
    for r in rs:
        r.rank = 0 if r.key in ("r7", "r8") else 1
    rs[0].end_at = 400                                   # the longest bucket, but ranked later
    assert [r.key for r in S.bucket_order(rs)[:3]] == ["r7", "r8", "r0"]
    ranked = rows(model)
    for r in ranked:
        r.rank = -int(r.key[1:])                         # the reverse of arrival
    out = {r.key: r for r in S.Scheduler(model, max_batch=4, exact=True, free_bytes=1 << 40).run(ranked)}
    assert set(out) == set(reference)
    for k in reference:
        assert out[k].tokens == reference[k].tokens and torch.equal(out[k].hiddens, reference[k].hiddens), k
