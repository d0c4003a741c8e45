"""The sampler (upstream's logits processing, counter-based noise) and the slot decode loop on a random model."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from engine import codemodel as CM, generate as G, sampling as S  # noqa: E402
from engine.cpu import kind_linear, onednn_available  # noqa: E402
from engine.llama import LlamaShape, build_llama  # noqa: E402
from tests.engine.kinds import KIND_PARAMS  # noqa: E402

C, V_TEXT, SPK_ID = 64, 100, 7


# the real linears: MKL (False), oneDNN's packed (True), and every kind of engine/kernels.c (its name: each where this
# CPU and build have it, else skipped naming what is missing)
PACKED = [False, pytest.param(True, marks=pytest.mark.skipif(not onednn_available(), reason="no oneDNN")),
          *KIND_PARAMS]


def random_code_model(seed: int = 0, eos_bias: float = 0.0, packed: bool | str = False) -> CM.CodeModel:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(hidden_size=C, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                                   initializer_range=0.2)
    hf = transformers.LlamaModel(cfg)
    llama = build_llama(LlamaShape.from_hf(cfg), hf.state_dict())
    head = torch.randn(4, 626, C) * 0.3
    head[:, S.EOS] *= 0
    model = CM.CodeModel(llama, torch.randn(V_TEXT, C), torch.randn(4, 626, C) * 0.5, head, SPK_ID)
    if packed:     # oneDNN packed linears (True) or a kind of engine/kernels.c's (its name), as the CPU engine runs
        model.pack(None if packed is True else kind_linear(packed), None if packed is True else kind_linear("f32"))
    if eos_bias:   # EOS logit raised for every hidden state
        head_logits = model.logits
        bias = torch.zeros(4, 626)
        bias[:, S.EOS] = eos_bias
        model.logits = lambda h: head_logits(h) + bias
    return model


def full_vocabulary(logits, history, eos_allowed, p):
    """`S.candidates` scattered back to the whole vocabulary: processed logits [B, Q, V], -inf = removed."""
    x, idx = S.candidates(logits, history, eos_allowed, p)
    return torch.full_like(logits, -torch.inf).scatter_(-1, idx, x)


def gumbel_max(processed, keys, steps, cells):
    """Gumbel-max over the whole vocabulary: tokens [B, Q] ~ softmax(processed [B, Q, V]); cells [Q*V]."""
    B, Q, V = processed.shape
    return (processed + S.gumbel_noise(keys, steps, cells).view(B, Q, V)).argmax(-1)


def make_row(model, key, n_prompt, seed, end_at, forced=True, spk=None):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(8, V_TEXT, (n_prompt,), generator=g)
    ids[1] = SPK_ID
    return G.Row(key=key, ids=ids, spk=spk, rng=S.row_key(seed), end_at=end_at,
                 forced=forced)


# ------------------------------------------------------------------------------------------- sampler
def test_hash32_matches_plain_32bit_arithmetic():
    def ref(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)
    xs = [0, 1, 2, 0xFFFFFFFF, 0x12345678, 0x80000000, 987654321]
    got = S.hash32(torch.tensor(xs, dtype=torch.long)).tolist()
    assert got == [ref(x) for x in xs] == [S.hash32(x) for x in xs]
    assert len(set(got)) == len(xs)


def test_candidates_match_upstream_processors():
    gen_logits = pytest.importorskip("ChatTTS.model.processors").gen_logits
    torch.manual_seed(1)
    p = S.SamplingParams()
    B, Q, V = 3, 4, 626
    logits = torch.randn(B, Q, V) * 3
    for t in (0, 5, 40):                       # generated tokens so far (window of 16)
        gen = torch.randint(0, 625, (B, t, Q))
        warpers, procs = gen_logits(num_code=625, top_P=p.top_p, top_K=p.top_k,
                                    repetition_penalty=p.repetition_penalty)
        x = logits.reshape(B * Q, V) / p.temperature
        tokens = gen.permute(0, 2, 1).reshape(B * Q, t)
        for f in (*procs, *warpers):
            x = f(tokens, x)
        hist = torch.full((B, Q, p.penalty_window), V, dtype=torch.long)
        w = min(t, p.penalty_window)
        if w:
            hist[:, :, -w:] = gen[:, t - w:].permute(0, 2, 1)
        ours = full_vocabulary(logits, hist, torch.ones(B, dtype=torch.bool), p).reshape(B * Q, V)
        assert torch.equal(torch.isinf(ours), torch.isinf(x))
        torch.testing.assert_close(ours[~torch.isinf(x)], x[~torch.isinf(x)])
        assert (~torch.isinf(ours)).sum(-1).max() <= p.top_k


def test_candidate_sampling_equals_full_vocabulary_sampling():
    torch.manual_seed(5)
    p, B = S.SamplingParams(), 64
    logits = torch.randn(B, 4, 626) * 2
    hist = torch.randint(0, 627, (B, 4, 16))
    eos_ok = torch.rand(B) < 0.5
    keys = torch.tensor([S.row_key(s) for s in range(B)])
    steps = torch.randint(0, 500, (B,))
    cells = S.hash32(torch.arange(4 * 626) + 1)
    full = gumbel_max(full_vocabulary(logits, hist, eos_ok, p), keys, steps, cells)
    x, idx = S.candidates(logits, hist, eos_ok, p)
    assert torch.equal(S.sample_candidates(x, idx, keys, steps, cells, 626), full)
    assert len(set(full.flatten().tolist())) > 50        # really sampled, not constant


def test_eos_mask():
    logits = torch.zeros(2, 4, 626)
    logits[..., S.EOS] = 50
    out = full_vocabulary(logits, torch.full((2, 4, 16), 626), torch.tensor([False, True]), S.SamplingParams())
    assert torch.isinf(out[0, :, S.EOS]).all() and not torch.isinf(out[1, :, S.EOS]).any()


def test_gumbel_sampling_follows_softmax_and_is_counter_based():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(4000, 1, 4).contiguous()
    cells = S.hash32(torch.arange(4) + 1)
    keys = torch.tensor([S.row_key(s) for s in range(4000)])
    tok = gumbel_max(logits, keys, torch.zeros(4000, dtype=torch.long), cells)[:, 0]
    freq = torch.bincount(tok, minlength=4).float() / 4000
    assert (freq - probs).abs().max() < 0.03, freq
    # same (key, step) -> same draw, whatever the batch around it; another step -> fresh noise
    alone = S.gumbel_noise(keys[7:8], torch.tensor([3]), cells)
    batched = S.gumbel_noise(keys[:16], torch.full((16,), 3), cells)
    assert torch.equal(alone[0], batched[7])
    assert not torch.equal(alone, S.gumbel_noise(keys[7:8], torch.tensor([4]), cells))


# ------------------------------------------------------------------------------------------- decode loop
def _run(model, rows, slots, exact=True):
    """Admit rows in order as slots free up (continuous refill); return {key: row}."""
    batch = G.DecodeBatch(model, slots=slots, max_len=256, max_steps=128, exact=exact)
    pending, done = list(rows), {}
    while pending or batch.rows:
        for s in batch.free_slots():
            if not pending:
                break
            r = batch.admit(pending.pop(0), s)
            if r is not None:
                done[r.key] = r
        for r in batch.step():
            done[r.key] = r
    return done


def _fresh(model, specs):
    return [make_row(model, *s) for s in specs]


@torch.no_grad()
@pytest.mark.parametrize("packed", PACKED)
def test_forced_count_and_batched_equals_alone_bitwise(packed):
    torch.set_num_threads(1)
    model = random_code_model(packed=packed)
    specs = [(f"r{i}", 5 + 3 * i, 100 + i, 6 + 7 * (i % 4)) for i in range(11)]   # key, prompt, seed, T
    batched = _run(model, _fresh(model, specs), slots=4)
    assert {k: r.tokens for k, r in batched.items()} == {s[0]: s[3] for s in specs}
    wide = _run(model, _fresh(model, specs[::-1]), slots=9)         # other order, other slots, 2 chunks
    for key, n, seed, T in specs:
        alone = _run(model, _fresh(model, [(key, n, seed, T)]), slots=1)[key]
        assert alone.hiddens.shape == (T, C)
        assert torch.equal(alone.hiddens, batched[key].hiddens), key
        assert torch.equal(alone.hiddens, wide[key].hiddens), key
    assert not torch.equal(batched["r0"].hiddens[:6], batched["r4"].hiddens[:6])


@torch.no_grad()
def test_eos_ends_row_and_cap_stops_runaway():
    model = random_code_model(eos_bias=50.0)       # EOS dominates as soon as it is allowed
    rows = [make_row(model, "free", 6, 1, end_at=40, forced=False),
            make_row(model, "forced", 6, 2, end_at=12, forced=True)]
    out = _run(model, rows, slots=2)
    assert out["free"].tokens == 1                 # EOS masked at step 0 only (non-empty), then taken
    assert out["forced"].tokens == 12
    calm = random_code_model(eos_bias=-1e4)        # EOS never sampled: the cap ends the row
    out = _run(calm, [make_row(calm, "cap", 6, 3, end_at=9, forced=False)], slots=1)
    assert out["cap"].tokens == 9


@torch.no_grad()
def test_exact_and_batched_mask_paths_agree():
    """The non-exact step (all slots in one call, cache views, bucketed attention length; what CUDA runs,
    captured or not) against the exact one, under refill: every step of every row."""
    model = random_code_model()
    specs = [(f"r{i}", 4 + 2 * i, 7 + i, 5 + 4 * (i % 3)) for i in range(7)]
    a = _run(model, _fresh(model, specs), slots=3, exact=True)
    b = _run(model, _fresh(model, specs), slots=3, exact=False)
    for key, _, _, T in specs:
        assert a[key].tokens == b[key].tokens == T
        assert a[key].hiddens.shape == b[key].hiddens.shape == (T, C)
        torch.testing.assert_close(a[key].hiddens, b[key].hiddens, atol=1e-5, rtol=1e-4)


def test_the_decode_batch_takes_the_models_strategy_or_batched_and_refuses_an_inexact_one_for_exact():
    """The strategy is chosen once: exact decoding on the model's own (engine/cpu.py's choice), the non-exact
    step on Batched; a model whose strategy is not exact cannot decode exactly."""
    from engine.attention import Batched

    model = random_code_model()
    assert G.DecodeBatch(model, 2, 32, 8, exact=True).attention is model.llama.attention
    assert type(G.DecodeBatch(model, 2, 32, 8, exact=False).attention) is Batched
    model.llama.attention = Batched()
    with pytest.raises(ValueError, match="exact attention strategy, not Batched"):
        G.DecodeBatch(model, 2, 32, 8, exact=True)


def test_prompt_embedding_applies_normalized_speaker():
    model = random_code_model()
    ids = torch.tensor([3, SPK_ID, 9])
    spk = torch.randn(C) * 4
    emb = model.prompt_embedding(ids, spk)[0]
    torch.testing.assert_close(emb[1], spk / spk.norm())
    assert torch.equal(emb[0], model.emb_text[3]) and torch.equal(emb[2], model.emb_text[9])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@torch.no_grad()
def test_cuda_graph_step_matches_eager_and_is_deterministic():
    model = random_code_model()
    cuda = CM.CodeModel(model.llama.to("cuda"), model.emb_text.cuda(), model.emb_code.cuda(),
                       model.head.view(4, 626, C).cuda(), SPK_ID)
    specs = [(f"r{i}", 5 + 3 * i, 100 + i, 6 + 7 * (i % 4)) for i in range(7)]
    eager = _run(cuda, _fresh(cuda, specs), slots=3, exact=False)
    CM.enable_cuda_graphs(cuda)
    graphed = _run(cuda, _fresh(cuda, specs), slots=3, exact=False)
    again = _run(cuda, _fresh(cuda, specs), slots=3, exact=False)
    for key, _, _, T in specs:
        assert graphed[key].tokens == T == eager[key].tokens
        assert torch.equal(graphed[key].hiddens, again[key].hiddens), key
        torch.testing.assert_close(graphed[key].hiddens[:2], eager[key].hiddens[:2], atol=1e-4, rtol=1e-3)


# ------------------------------------------------------------------------------- one call per CPU step
# Which call sizes are batch-invariant is the kernel's business and differs from CPU to CPU (oneDNN on AVX2: rows
# in blocks of 6, a block of 1-3 rows takes another kernel; on AVX-512 every size is invariant; MKL: multiples
# of 4 on 2 threads; on an AMX Xeon MKL keeps only the canonical 4).  So no expected value here comes from a
# library: the tests of the machinery (measuring the sizes, padding to them, falling back to canonical chunks,
# noticing a call at a wrong size) run on injected test doubles that replace *every* linear, whose sizes follow
# from their construction on any CPU; the tests of a real kernel take what the engine measures on the machine
# they run on, and check only the engine's promise: batched == alone.
def _row_by_row(x2, fn):
    """fn(row) for every row of x2 [M, K] on its own, each a fresh [1, K] tensor (the allocator's alignment),
    concatenated: [M, N].  A row's bits then depend on its values alone, never on the call around it."""
    return torch.cat([fn(r.clone()) for r in x2.split(1)])


class RowwiseLinear(torch.nn.Module):
    """A test double invariant at every call size by construction: each row is its own M = 1 call."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = weight                                                    # [N, K] fp32
        self.out_features, self.in_features = weight.shape

    def forward(self, x):                                                       # x [..., K] -> [..., N]
        y = _row_by_row(x.reshape(-1, self.in_features), lambda r: torch.nn.functional.linear(r, self.weight))
        return y.view(*x.shape[:-1], self.out_features)


class BlockedLinear(RowwiseLinear):
    """A test double with oneDNN-on-AVX2's row blocking, on any CPU: the rows of a call go in blocks of BLOCK,
    and a row in a last block of fewer than FULL rows comes out one ulp higher (torch.nextafter), so its bits
    depend on the call size: invariant sizes 4, 5, 6, 10, 11, 12, 16, ..., by construction."""

    BLOCK, FULL = 6, 4

    def forward(self, x):                                                       # x [..., K] -> [..., N]
        y = super().forward(x)
        y2 = y.view(-1, self.out_features)
        M = y2.shape[0]
        short_from = M - M % self.BLOCK if M % self.BLOCK < self.FULL else M    # first row of a short block
        y2[short_from:] = torch.nextafter(y2[short_from:], torch.tensor(torch.inf))
        return y


DOUBLES = {"blocked": BlockedLinear, "rowwise": RowwiseLinear}   # test doubles: their sizes hold on every CPU
KERNELS = PACKED + list(DOUBLES)
DOUBLE_SIZES_TO_16 = {"blocked": (4, 5, 6, 10, 11, 12, 16), "rowwise": tuple(range(1, 17))}


def kernel_model(kernel, seed: int = 0) -> CM.CodeModel:
    """random_code_model on a real kernel (MKL False, oneDNN True, an engine/kernels.c kind) or a test double
    in place of every linear (the block projections and the heads)."""
    if kernel in DOUBLES:
        return random_code_model(seed).pack(DOUBLES[kernel])
    return random_code_model(seed, packed=kernel)


def _calls_per_step(monkeypatch):
    """Spy: one (active rows, [(rows, size) of each _decode call]) per DecodeBatch.step."""
    steps = []
    step, decode = G.DecodeBatch.step, G.DecodeBatch._decode

    def spy_step(self):
        steps.append((len(self.rows), []))
        return step(self)

    def spy_decode(self, rows, size):
        steps[-1][1].append((len(rows), size))
        return decode(self, rows, size)

    monkeypatch.setattr(G.DecodeBatch, "step", spy_step)
    monkeypatch.setattr(G.DecodeBatch, "_decode", spy_decode)
    return steps


def _not_alone(model, specs, slots: int, alone: dict | None = None) -> list[str]:
    """The keys of `specs` whose hidden states decoded together in `slots` slots (continuous refill) differ from
    the row decoded alone (`alone`: {key: row} computed before, else decoded here); [] = batch-invariant."""
    batched = _run(model, _fresh(model, specs), slots=slots)
    alone = alone or {s[0]: _run(model, _fresh(model, [s]), slots=1)[s[0]] for s in specs}
    assert set(batched) == set(alone) == {s[0] for s in specs}
    return [k for k in alone if not torch.equal(alone[k].hiddens, batched[k].hiddens)]


def _top(max_rows: int) -> int:
    """The largest call size CM.invariant_sizes(model, max_rows) considers."""
    return -(-max_rows // CM.EXACT_ROWS) * CM.EXACT_ROWS + CM.EXACT_ROWS


@torch.no_grad()
@pytest.mark.parametrize("packed", KERNELS)
@pytest.mark.parametrize("threads", [1, 2])
def test_one_padded_call_per_step_and_batched_equals_alone(threads, packed, monkeypatch):
    """With measured call sizes, a CPU step is one call over all active rows padded to the smallest measured
    size that holds them (or, where none does, canonical chunks of EXACT_ROWS) — and rows still come out
    bit-identical to decoding alone, on 1 and on 2 threads, with MKL, oneDNN, engine/kernels.c (what this
    machine measures) and the doubles (whose sizes are known by construction)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = kernel_model(packed)
        measured = CM.invariant_sizes(model, 9)                  # what this machine's kernel allows
        assert CM.EXACT_ROWS in measured and set(measured) <= set(range(1, _top(9) + 1))
        if packed in DOUBLES:
            assert measured == DOUBLE_SIZES_TO_16[packed]
        specs = [(f"r{i}", 5 + 3 * i, 300 + i, 4 + 5 * (i % 5)) for i in range(13)]
        steps = _calls_per_step(monkeypatch)
        assert _not_alone(model, specs, slots=9) == []
        assert {n for n, _ in steps} >= {9, 1}                  # full and nearly empty steps both happened
        for active, calls in steps:
            fit = next((m for m in measured if m >= active), None)
            if fit is not None:                                 # one call, padded where active is unmeasured
                assert calls == [(active, fit)], (active, calls)
            else:
                assert {size for _, size in calls} == {CM.EXACT_ROWS} and sum(n for n, _ in calls) == active
        small = [calls for active, calls in steps if active < CM.EXACT_ROWS]
        if measured[0] < CM.EXACT_ROWS:                          # no needless padding where small calls are exact
            assert any(size < CM.EXACT_ROWS for calls in small for _, size in calls)
    finally:
        torch.set_num_threads(old)


@torch.no_grad()
def test_calls_at_an_unmeasured_size_break_batched_equals_alone(monkeypatch):
    """The invariance check above can fail: on the ragged-on-purpose double (every linear replaced, so on any
    CPU), break the engine on purpose — it calls at exactly the number of active rows, unpadded, at a size the
    kernel does not keep invariant — and the same check must see rows differ from their alone run."""
    model = kernel_model("blocked")
    measured = CM.invariant_sizes(model, 9)
    m = max(size for size in range(1, 10) if size not in measured)   # the widest such call within 9 rows: 9
    specs = [(f"r{i}", 5 + 2 * i, 700 + i, 7) for i in range(m)]   # equal lengths: every step has m rows
    alone = {s[0]: _run(model, _fresh(model, [s]), slots=1)[s[0]] for s in specs}
    assert _not_alone(model, specs, slots=m, alone=alone) == []          # the engine as it is: invariant
    steps = _calls_per_step(monkeypatch)
    monkeypatch.setattr(model, "call_size", lambda rows, max_rows: rows)  # broken: no padding at all
    assert _not_alone(model, specs, slots=m, alone=alone), f"calls of {m} rows went unnoticed"
    assert steps and all(calls == [(m, m)] for _, calls in steps)        # really called at size m


def test_invariant_sizes_finds_the_sizes_of_a_ragged_kernel():
    """Every linear of the model replaced by a fake 'kernel' (elementwise, so exact by construction), the sizes
    found are those of the fakes on any CPU: a row-independent one keeps every size, one whose rows change with
    the call size modulo `period` keeps the sizes congruent to the canonical call's."""
    model = random_code_model()
    assert len(model.linears()) == 5                         # wqkv, wo, w13, w2 and the heads: all replaced below

    def fakes(*extra):
        return lambda: [(lambda x: x * 2, C)] * (5 - len(extra)) + [(f, C) for f in extra]

    def ragged(period):        # rows change with the call size modulo period
        return lambda x: x * 2 + (x.shape[0] % period) * 1e-3

    model.linears = fakes()
    assert CM.invariant_sizes(model, 12) == tuple(range(1, 17))
    model.linears = fakes(ragged(4))
    assert CM.invariant_sizes(model, 12) == (4, 8, 12, 16)
    model.linears = fakes(ragged(8))
    assert CM.invariant_sizes(model, 12) == (4, 12)
    model.linears = fakes(ragged(4), ragged(8))
    assert CM.invariant_sizes(model, 12) == (4, 12)
    model.linears = fakes(lambda x: x + x.shape[0] * 1e-3)
    assert CM.invariant_sizes(model, 12) == (CM.EXACT_ROWS,)


@torch.no_grad()
def test_without_a_call_size_steps_fall_back_to_canonical_chunks(monkeypatch):
    """Where no call size is invariant, a step runs in canonical chunks — on the blocked double (every linear
    replaced), so the rows decoded alone (padded to 4, its smallest size) equal them on any CPU."""
    model = kernel_model("blocked")
    model._sizes[(torch.get_num_threads(), 11)] = ()         # as if the BLAS were batch-variant everywhere
    specs = [(f"r{i}", 6 + i, 500 + i, 3 + 4 * (i % 3)) for i in range(11)]
    steps = _calls_per_step(monkeypatch)
    batched = _run(model, _fresh(model, specs), slots=11)
    assert max(active for active, _ in steps) == 11
    for active, calls in steps:                               # chunks of exactly EXACT_ROWS, covering every row
        assert {size for _, size in calls} == {CM.EXACT_ROWS} and sum(n for n, _ in calls) == active
    for key, n, seed, T in specs[:4]:
        alone = _run(model, _fresh(model, [(key, n, seed, T)]), slots=1)[key]
        assert torch.equal(alone.hiddens, batched[key].hiddens), key
