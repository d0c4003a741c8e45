"""What holds on CUDA, tested on CPU (docs/architecture.md, "Determinism on CUDA").

The vocoder decodes every row alone on any device (no device branch left to test on a GPU).  The CUDA decode
step (GraphStep: all slots in one call, attention over the bucket S of the longest active row) is not
batch-invariant by shape — (slot count, S) belong to the batch — but at a given shape a row must not see its
batch-mates' values: no leak through the mask, the inactive slots or the sampler.  CPU runs the same step
eagerly (what CUDA captures), so that logic is tested here; the rounding of CUDA's kernels is not.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine import generate as G
from engine.assets import SHAPES
from tests.engine.test_generate import C, kernel_model, make_row, random_code_model


# ------------------------------------------------------------------------------------------------- vocoder
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("ChatTTS")
    torch.set_num_threads(1)
    from engine.loader import load_chattts

    return load_chattts("random-tiny")


@pytest.mark.parametrize("codes", [False, True], ids=["hidden->Decoder", "codes->DVAE"])
def test_vocoder_calls_are_one_row_each_even_for_equal_lengths(tiny, codes, monkeypatch):
    from engine.vocoder import decode

    net = tiny.dvae if codes else tiny.decoder
    seen = []                                                    # batch sizes the networks were called with
    real_net, real_vocos = net.forward, tiny.vocos.decode
    monkeypatch.setattr(net, "forward", lambda x, *a, **k: seen.append(("net", x.shape[0])) or real_net(x, *a, **k))
    monkeypatch.setattr(tiny.vocos, "decode", lambda m, *a, **k: seen.append(("vocos", m.shape[0]))
                        or real_vocos(m, *a, **k))
    g = torch.Generator().manual_seed(4)
    lengths = [12, 12, 12, 5, 12, 0]                             # four rows of one length: a group, before
    hidden = SHAPES["random-tiny"].gpt_hidden
    rows = [torch.randint(0, 625, (t, 4), generator=g) if codes else torch.randn(t, hidden, generator=g)
            for t in lengths]
    wavs = decode(tiny, rows)
    assert [w.shape[0] for w in wavs] == [(2 * t - 1) * 256 if t else 0 for t in lengths]
    assert sorted(seen) == sorted([("net", 1), ("vocos", 1)] * 5)   # one call of one row per non-empty row
    assert not np.array_equal(wavs[0], wavs[1])                  # and each row keeps its own audio


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_vocoder_rows_equal_their_alone_decode():
    """On a GPU: rows of equal length decoded in one call equal each row decoded alone, bit for bit."""
    from engine.loader import load_chattts
    from engine.vocoder import decode

    gpu = load_chattts("random-tiny", "cuda")
    g = torch.Generator().manual_seed(5)
    rows = [torch.randn(16, SHAPES["random-tiny"].gpt_hidden, generator=g) for _ in range(4)]
    together = decode(gpu, rows)
    for r, w in zip(rows, together):
        assert np.array_equal(decode(gpu, [r])[0], w)


# ---------------------------------------------------------------------------------------- the CUDA step
def test_graph_bucket_is_the_longest_rows_next_multiple_capped_by_the_cache():
    B = G.GRAPH_BUCKET
    assert [G.graph_bucket(n, 4 * B) for n in (1, B - 1, B, B + 1, 3 * B + 7)] == [B, B, B, 2 * B, 4 * B]
    assert G.graph_bucket(B + 1, B + 100) == B + 100                # never past the cache
    for n in range(1, 3 * B, 37):
        S = G.graph_bucket(n, 10 * B)
        assert S % B == 0 and n <= S < n + B


def _graph_run(model, rows, slots: int, max_len: int = 512, poke=None):
    """Decode `rows` (all admitted at once) on the non-exact step; returns ({key: row}, [S of each step]).
    poke(batch): called after admission (to scribble on inactive slots)."""
    batch = G.DecodeBatch(model, slots=slots, max_len=max_len, max_steps=64, exact=False)
    buckets = []
    real = batch.graphs._graph
    batch.graphs._graph = lambda S: buckets.append(S) or real(S)
    done = {}
    for s, r in enumerate(rows):
        if (f := batch.admit(r, s)) is not None:
            done[f.key] = f
    if poke is not None:
        poke(batch)
    while batch.rows:
        done.update({r.key: r for r in batch.step()})
    return done, buckets


@torch.no_grad()
def test_at_one_step_shape_a_cuda_row_ignores_its_batch_mates_values():
    """Same slot count, same bucket every step, other batch-mates (other texts and seeds, same lengths) and
    garbage in the inactive slot: the row's hidden states and tokens are the same, bit for bit.  The linears are
    a row-by-row test double, so what is tested is the step's own logic (mask, inactive slots, sampler), not
    whether this CPU's BLAS keeps a row's bits whatever its neighbours' values."""
    torch.set_num_threads(1)
    model = kernel_model("rowwise")
    row = lambda: make_row(model, "r", 9, 11, end_at=20)                                   # noqa: E731
    mates = lambda seed: [make_row(model, f"m{i}", 250 + 7 * i, seed + i, end_at=12 + 4 * i)  # noqa: E731
                          for i in range(2)]

    def scribble(batch):                                          # slot 3 holds no row: fill it with noise
        for t in batch.cache.k + batch.cache.v:
            t[3].normal_()
        batch.last[3] = 17

    a, sa = _graph_run(model, [row(), *mates(100)], slots=4)
    b, sb = _graph_run(model, [row(), *mates(900)], slots=4, poke=scribble)
    assert sa == sb and len(set(sa)) == 2                          # the batch crossed a bucket edge: 256 -> 512
    assert a["r"].tokens == b["r"].tokens == 20
    assert torch.equal(a["r"].hiddens, b["r"].hiddens)
    assert a["r"].hiddens.shape == (20, C)
    assert not torch.equal(a["m0"].hiddens, b["m0"].hiddens)     # the batch-mates really differ


@torch.no_grad()
def test_the_cuda_step_shape_is_the_batchs_not_the_rows():
    """What the docs say does not hold on CUDA: the same row alone and beside a long row runs at other buckets
    (and, with another slot count, another GEMM shape); on CPU the values stay close, not necessarily equal."""
    model = random_code_model()
    alone, s_alone = _graph_run(model, [make_row(model, "r", 9, 11, end_at=20)], slots=1)
    beside, s_beside = _graph_run(model, [make_row(model, "r", 9, 11, end_at=20),
                                          make_row(model, "long", 300, 5, end_at=20)], slots=2)
    assert set(s_alone) == {G.GRAPH_BUCKET} and set(s_beside) == {2 * G.GRAPH_BUCKET}
    torch.testing.assert_close(alone["r"].hiddens[:3], beside["r"].hiddens[:3], atol=1e-5, rtol=1e-4)
