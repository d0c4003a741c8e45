"""The Engine end to end on random-tiny: text -> audio, and batched == alone, bitwise, under continuous refill."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.api import EngineOptions, Request
from engine.units import expected_tokens, samples_for_tokens

TEXTS = ["你好。", "今天天气很好，我们去公园散步吧。", "第一章", "他说：“明天见！”然后走了。",
         "一二三四五六七八九十。", "春眠不觉晓，处处闻啼鸟。", "☃¤ 未知字符也不会出错。"]


@pytest.fixture(scope="module")
def engine():
    """fp32 (the upstream comparisons need it); every CPU path's batched == alone: test_every_cpu_path_..."""
    torch.set_num_threads(1)
    from engine.engine import Engine
    return Engine.load(EngineOptions(model="random-tiny", max_batch=3, dtype="fp32"))


@pytest.fixture(scope="module")
def requests(engine):
    voice = engine.sample_voice(42)
    return [Request(key=f"seg{i}", text=t, spk_emb=voice, seed=1000 + i) for i, t in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def batched(engine, requests):
    seen = []
    out = {r.key: r for r in engine.synthesize(requests, progress=seen.append)}
    assert [r.key for r in seen] == list(out)          # progress saw each result once, in yield order
    return out, list(engine.last_batch_sizes)


def test_results_have_forced_lengths(batched, requests):
    out, sizes = batched
    assert sizes == [3] and set(out) == {r.key for r in requests}
    for r in requests:
        res = out[r.key]
        assert res.tokens == expected_tokens(r.text)
        assert res.audio.dtype == np.float32 and res.audio.shape == (samples_for_tokens(res.tokens),)
        assert np.isfinite(res.audio).all() and np.abs(res.audio).max() > 0


def test_sampled_codes_are_every_step_and_do_not_depend_on_the_batch(engine, requests, batched):
    out, _ = batched
    some = requests[:4]
    codes = engine.sampled_codes(some, 3)
    assert codes == {r.key: engine.sampled_codes([r], 1)[r.key] for r in some}
    for r in some:
        *steps, count = codes[r.key]
        assert count == out[r.key].tokens and len(steps) == count - 1
        assert {len(s) for s in steps} == {engine.model.Q}                 # a code per head, every step


def test_batched_equals_alone_bitwise_under_continuous_refill(engine, requests, batched):
    from engine.scheduler import Scheduler
    out, _ = batched
    refills = []
    orig_run = Scheduler.run

    def spy(self, rows, more=None):                    # record that slots were refilled mid-decode
        yield from orig_run(self, rows, more)
        refills.append(self.refills)

    Scheduler.run = spy
    try:
        again = {r.key: r for r in engine.synthesize(requests[::-1])}
    finally:
        Scheduler.run = orig_run
    assert refills and refills[0] >= len(requests) - 3
    for req in requests:
        alone = list(engine.synthesize([req]))
        assert len(alone) == 1
        assert np.array_equal(alone[0].audio, out[req.key].audio), req.key
        assert np.array_equal(again[req.key].audio, out[req.key].audio), req.key
    # and the results are not trivially equal to each other
    assert not np.array_equal(out["seg0"].audio[:1000], out["seg5"].audio[:1000])


def test_requests_given_while_it_runs_join_the_pass_and_sound_as_alone(engine, requests, batched):
    """synthesize(..., more=): a proof render's re-takes join the running pass (one batch here), each bitwise what
    it is in any other batch; a bad late request is refused as a first one is."""
    out, _ = batched
    late = list(requests[2:])
    asked = []

    def more(idle):
        asked.append(idle)
        return [late.pop(0)] if late and (idle or len(asked) % 4 == 0) else []

    got = {r.key: r for r in engine.synthesize(requests[:2], more=more)}
    assert set(got) == set(out) and not late
    assert engine.last_batch_sizes == [2]                     # one batch: the late ones took freed slots
    for k in out:
        assert np.array_equal(got[k].audio, out[k].audio), k
    bad = Request("x", requests[0].text, "not a voice", 5)
    with pytest.raises(ValueError):
        list(engine.synthesize(requests[:1], more=lambda idle: [bad] if idle else []))


def test_seed_and_voice_change_the_audio(engine, requests, batched):
    out, _ = batched
    r = requests[1]
    other_seed = next(engine.synthesize([Request(r.key, r.text, r.spk_emb, seed=r.seed + 1)]))
    other_voice = next(engine.synthesize([Request(r.key, r.text, engine.sample_voice(43), seed=r.seed)]))
    base = out[r.key].audio
    assert other_seed.audio.shape == base.shape and not np.array_equal(other_seed.audio, base)
    assert not np.array_equal(other_voice.audio, base)


def test_forced_tokens_and_bad_requests(engine, requests):
    r = requests[0]
    res = next(engine.synthesize([Request("f", r.text, r.spk_emb, 5, forced_tokens=9)]))
    assert res.tokens == 9 and res.audio.shape == (samples_for_tokens(9),)
    with pytest.raises(ValueError, match="forced_tokens"):
        list(engine.synthesize([Request("x", r.text, r.spk_emb, 5, forced_tokens=5000)]))
    with pytest.raises(ValueError):
        list(engine.synthesize([Request("x", r.text, "not a voice", 5)]))
    assert list(engine.synthesize([])) == []


def test_prompt_is_upstream_and_version_names_settings(engine):
    tok = engine.loaded.tokenizer._tokenizer
    ids = engine.prompt_ids("你好")
    assert ids[:3] == tok.convert_tokens_to_ids(["[Stts]", "[spk_emb]", "[speed_5]"])
    assert ids[-1] == tok.convert_tokens_to_ids("[Ptts]")
    assert engine.prompt_ids("[Stts]你好") == ids           # upstream strips its own control tokens
    assert engine.loaded.fingerprint in engine.version and "fp32" in engine.version and "cpu" in engine.version
    from engine.cpu import backend_name

    assert engine.version.startswith("ours6-")                # -ffp-contract=off changed the CPU's bits ...
    old = f"{engine.loaded.fingerprint}-fp32-cpu"             # ... a v2-v5 book (no back-end in the name) keeps
    assert engine.adopts == tuple(f"ours{v}-{old}" for v in "2345")                   # its audio
    assert engine.version == f"ours6-{old}-{backend_name()}"


def _path_param(name: str):
    from engine.cpupath import BY_NAME
    from tests.engine.kinds import why_not

    reason = why_not(BY_NAME[name].kind)
    return pytest.param(name, id=name, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


@pytest.mark.parametrize("path", [_path_param(p) for p in ("fp32-avx2", "fp32-avx512", "bf16-avx512", "int8-avx2",
                                                           "int8-avx512", "int8-vnni", "bf16-amx", "int8-amx")])
def test_every_cpu_path_is_batch_invariant_and_named(requests, path, monkeypatch):
    """Each path of engine/cpupath.py this CPU has (forced by CHATTTS_RENDER_KERNELS; skipped naming the flags it
    lacks elsewhere): batched == alone under refill (Decoder + Vocos in the path's dtype: bf16 on a bf16 path), and
    the version names its dtype and arithmetic."""
    from engine.cpupath import BY_NAME
    from engine.engine import Engine

    p = BY_NAME[path]
    monkeypatch.setenv("CHATTTS_RENDER_KERNELS", path)
    e = Engine.load(EngineOptions(model="random-tiny", max_batch=2, int8=p.int8, dtype="auto"))
    assert e.path == p and e.dtype == p.dtype and f"-{p.dtype}-cpu-{p.tag}-aten_" in e.version
    assert e.version.endswith("+int8") == p.int8
    assert e.vocoder == p.dtype and e.version.endswith("+vocoder_bf16") == (p.dtype == "bf16")
    reqs = requests[:4]
    out = {r.key: r for r in e.synthesize(reqs)}
    for req in reqs[:2]:
        assert np.array_equal(next(e.synthesize([req])).audio, out[req.key].audio), req.key


def test_a_bf16_cpu_engine_is_batch_invariant(requests):
    """--dtype bf16 whatever runs it here (our bf16 path, or torch's bf16 on a CPU without AVX512_BF16)."""
    from engine.engine import Engine
    e = Engine.load(EngineOptions(model="random-tiny", max_batch=2, dtype="bf16"))
    assert "-bf16-cpu-" in e.version
    out = {r.key: r for r in e.synthesize(requests[:4])}
    for req in requests[:2]:
        assert np.array_equal(next(e.synthesize([req])).audio, out[req.key].audio), req.key


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("graphs", [False, True])
def test_cuda_engine_end_to_end(graphs):
    from engine.engine import Engine
    e = Engine.load(EngineOptions(model="random-tiny", device="cuda", cuda_graphs=graphs, max_batch=4))
    assert "bf16" in e.version and "cuda" in e.version
    voice = e.sample_voice(42)
    reqs = [Request(f"g{i}", t, voice, seed=i) for i, t in enumerate(TEXTS)]
    out = {r.key: r for r in e.synthesize(reqs)}
    assert len(e.last_batch_sizes) == 1 and e.last_batch_sizes[0] == 4
    for r in reqs:
        assert out[r.key].tokens == expected_tokens(r.text)
        assert out[r.key].audio.shape == (samples_for_tokens(out[r.key].tokens),)
        assert np.isfinite(out[r.key].audio).all()


@torch.no_grad()
def test_first_step_equals_upstream_chattts(engine):
    """Prompt ids, embedding, speaker vector, Llama and heads agree with upstream's own modules at step 0."""
    from engine.llama import KVCache
    chat = engine.loaded.chat
    text, voice = "你好，世界。第二句！", engine.sample_voice(3)
    prompt = chat.speaker.decorate_code_prompts([text], chat.InferCodeParams().prompt, None, voice)  # [speed_5]
    input_ids, attn, text_mask = chat.tokenizer.encode(prompt, 4, device="cpu")
    emb = chat.embed(input_ids, text_mask)
    chat.speaker.apply(emb, voice, input_ids, chat.tokenizer.spk_emb_ids, torch.device("cpu"))
    hid = chat.gpt.gpt(inputs_embeds=emb, attention_mask=attn).last_hidden_state[:, -1]          # [1, C]
    ref = torch.stack([head(hid) for head in chat.embed.head_code], 1)                            # [1, 4, 626]

    ids = torch.tensor(engine.prompt_ids(text))
    assert ids.tolist() == input_ids[0, :, 0].tolist()
    m = engine.model
    x = m.prompt_embedding(ids, engine._speaker_vector(voice))
    torch.testing.assert_close(x[0], emb[0], atol=2e-3, rtol=1e-3)     # upstream normalizes the voice in fp16
    cache = KVCache(m.llama.s, 1, len(ids), "cpu", torch.float32)
    L = len(ids)
    prefill = lambda: m.llama.attention.begin(cache, torch.arange(L)[None], torch.tensor([0]), [L])   # noqa: E731
    h = m.llama(x, prefill())[:, -1]
    torch.testing.assert_close(m.logits(h), ref, atol=2e-2, rtol=1e-2)
    x_up = m.llama(emb.clone(), prefill())
    torch.testing.assert_close(m.logits(x_up[:, -1]), ref, atol=1e-4, rtol=1e-4)   # same input: fp32-equal
