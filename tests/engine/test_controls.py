"""Pace, sampling and the refine-text pass, against upstream ChatTTS as the oracle: the code prompt at every speed
and with inline control tokens is upstream's token for token; the refine pass generates upstream's tokens for the
same weights, text, levels and draws (random-tiny here; random-full marked slow)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from engine.api import SPEEDS, Controls, EngineOptions, Refine, Request

TEXTS = ["你好，世界。第二句！", "今天天气很好，我们去公园散步吧。", "他说 hello world，然后走了。"]
INLINE = "你好[uv_break]今天天气很好[laugh]，我们去公园散步吧[lbreak]。"


@pytest.fixture(scope="module")
def engine():
    torch.set_num_threads(1)
    from engine.engine import Engine
    return Engine.load(EngineOptions(model="random-tiny", max_batch=3, dtype="fp32"))


def upstream_prompt(chat, text: str, speed: int, spk_emb: str | None, txt_smp: str | None = None) -> list[int]:
    """The ids upstream's Chat._infer_code feeds the GPT for `text` with InferCodeParams(prompt="[speed_N]")."""
    prompt = chat.speaker.decorate_code_prompts([text], f"[speed_{speed}]", txt_smp, spk_emb)
    ids, _, _ = chat.tokenizer.encode(prompt, chat.config.gpt.num_vq, device="cpu")
    return ids[0, :, 0].tolist()


# ------------------------------------------------------------------------------------------------- the prompt
@pytest.mark.parametrize("speed", list(SPEEDS))
def test_code_prompt_is_upstreams_at_every_speed(engine, speed):
    check_prompts(engine, speed)


def check_prompts(engine, speed: int) -> None:
    chat, voice = engine.loaded.chat, engine.sample_voice(3)
    tok = engine.loaded.tokenizer._tokenizer
    for text in [*TEXTS, INLINE]:
        ours = engine.prompt_ids(text, speed=speed)
        assert ours == upstream_prompt(chat, text, speed, voice)
        assert tok.convert_tokens_to_ids(f"[speed_{speed}]") in ours
    # a sample voice's prompt (a clip, an anchor): [Stts][empty_spk]{txt_smp}[speed_N]{text}[Ptts]
    ours = engine.prompt_ids(TEXTS[0], txt_smp="参考文本。", speaker=False, speed=speed)
    assert ours == upstream_prompt(chat, TEXTS[0], speed, None, "参考文本。")


def test_inline_control_tokens_reach_the_model_as_upstreams_tokens(engine):
    """[uv_break], [laugh], [lbreak] in a line's text are single control tokens, as upstream's tokenizer reads
    them: the row the engine decodes holds them (and the prompt is upstream's: the test above)."""
    tok = engine.loaded.tokenizer._tokenizer
    voice = engine.sample_voice(3)
    row = engine._row(Request("x", INLINE, voice, 7, controls=Controls(speed=2)), 0)
    ids = row.ids.tolist()
    for t in ("[uv_break]", "[laugh]", "[lbreak]", "[speed_2]"):
        assert ids.count(tok.convert_tokens_to_ids(t)) == 1, t
    assert ids == upstream_prompt(engine.loaded.chat, INLINE, 2, voice)


# ----------------------------------------------------------------------------------------- pace and sampling
def test_speed_and_sampling_change_the_audio_and_mixed_batches_equal_alone(engine):
    """A request's speed is its prompt and its sampling its own batch (engine/scheduler.py groups them): in a
    mixed batch each sounds exactly as alone, and each setting makes other audio than the default."""
    voice = engine.sample_voice(42)
    text = TEXTS[1]
    variants = {"default": Controls(), "speed": Controls(speed=2), "temperature": Controls(temperature=0.7),
                "top_p": Controls(top_p=0.05), "top_k": Controls(top_k=5)}
    reqs = [Request(k, text, voice, 11, controls=c) for k, c in variants.items()]
    together = {r.key: r for r in engine.synthesize(reqs)}
    assert len(engine.last_batch_sizes) >= 4                      # one batch per SamplingParams
    for r in reqs:
        alone = next(engine.synthesize([r]))
        assert np.array_equal(alone.audio, together[r.key].audio), r.key
        if r.key != "default":
            assert not np.array_equal(together[r.key].audio, together["default"].audio), r.key


def test_controls_key_is_empty_for_the_defaults_and_round_trips():
    assert Controls().key() == "" and Controls(temperature=0.3, top_k=20).key() == ""
    c = Controls(speed=3, temperature=0.25, top_p=0.5, top_k=7, refine=Refine(4, 1, 2))
    assert c.key() == "speed=3;temperature=0.25;top_p=0.5;top_k=7;refine=4/1/2"
    assert Controls.parse(c.key()) == c and Controls.parse("") == Controls()
    for bad in (dict(speed=10), dict(speed=-1), dict(top_p=0.0), dict(top_k=0), dict(temperature=0.0)):
        with pytest.raises(ValueError):
            Controls(**bad)
    with pytest.raises(ValueError, match="laugh"):
        Refine(laugh=3)


# ------------------------------------------------------------------------------------------------ refine-text
def upstream_refine(engine, text: str, refine: Refine, seed: int, steps: int) -> list[int]:
    """Upstream's Chat._refine_text on the same weights with its draw replaced by ours: torch.multinomial over
    upstream's processed distribution becomes Gumbel-max with the engine's counter-based noise for this row's
    seed and step (the only difference of our sampler is where its randomness comes from).  `steps` ids are
    forced as the engine forces them on random weights (min_new_token = max_new_token)."""
    from ChatTTS import Chat

    from engine.sampling import gumbel_noise, row_key

    cells = engine.model.text_cells
    calls = []

    def draw(scores, num_samples=1, generator=None):
        step = torch.tensor([len(calls)])
        calls.append(scores.shape)
        g = gumbel_noise(torch.tensor([row_key(seed)]), step, cells)             # [1, V_text]
        return (scores.log() + g).argmax(-1, keepdim=True)

    params = Chat.RefineTextParams(prompt=refine.prompt, max_new_token=steps, min_new_token=steps,
                                   show_tqdm=False, manual_seed=seed)        # upstream's sampling defaults
    chatts = logging.getLogger("ChatTTS")
    level, chatts.level = chatts.level, logging.ERROR        # min = max new tokens: "hit max_new_token"
    orig = torch.multinomial
    torch.multinomial = draw
    try:
        out = engine.loaded.chat._refine_text([text], torch.device("cpu"), params)
    finally:
        torch.multinomial = orig
        chatts.setLevel(level)
    assert len(calls) == steps and calls[0][-1] == engine.model.V_text
    return out.ids[0].tolist()


def test_refine_sampling_is_upstreams_refine_text_params():
    """REFINE_SAMPLING is RefineTextParams' (read from upstream), and its logits processing over the text vocabulary
    equals upstream's processors' on logits sharp enough that top-P cuts inside top-K (random weights' are flat)."""
    from ChatTTS import Chat
    from ChatTTS.model.processors import gen_logits

    from engine.api import REFINE_MAX_NEW_TOKENS, REFINE_SAMPLING as p
    from engine.sampling import candidates

    up = Chat.RefineTextParams()
    assert (p.temperature, p.top_p, p.top_k, p.repetition_penalty) == (up.temperature, up.top_P, up.top_K,
                                                                      up.repetition_penalty)
    assert up.max_new_token == REFINE_MAX_NEW_TOKENS and up.min_new_token == 0
    torch.manual_seed(3)
    B, V, eos = 4, 21178, 21136
    logits = torch.randn(B, V) * 4
    warpers, procs = gen_logits(num_code=V, top_P=up.top_P, top_K=up.top_K, repetition_penalty=up.repetition_penalty)
    x = logits / up.temperature
    for f in (*procs, *warpers):
        x = f(torch.zeros(B, 0, dtype=torch.long), x)
    cx, ci = candidates(logits[:, None], torch.full((B, 1, p.penalty_window), V), torch.ones(B, dtype=torch.bool),
                        p, eos)
    ours = torch.full_like(logits, -torch.inf).scatter_(-1, ci[:, 0], cx[:, 0])
    assert torch.equal(torch.isinf(ours), torch.isinf(x))
    assert 3 <= (~torch.isinf(x)).sum(-1).min() < p.top_k           # top-P cut inside the top-K
    torch.testing.assert_close(ours[~torch.isinf(x)], x[~torch.isinf(x)])


def check_refine_equals_upstream(engine, texts):
    refine = Refine(oral=5, laugh=2, brk=3)                        # not upstream's example [oral_2][laugh_0][break_6]
    voice = engine.sample_voice(9)
    reqs = [Request(f"r{i}", t, voice, 1000 + i, controls=Controls(refine=refine)) for i, t in enumerate(texts)]
    ours = {r.key: r for r in engine.refine(reqs)}
    tok = engine.loaded.tokenizer
    for req in reqs:
        steps = len(tok._tokenizer(req.text, add_special_tokens=False)["input_ids"])   # the random models' count
        ids = upstream_refine(engine, req.text, refine, req.seed, steps)
        assert list(ours[req.key].tokens) == ids, req.text
        kept = [i for i in ids if i < tok.break_0_ids]             # upstream's Chat._infer after its refine
        assert ours[req.key].text == tok.decode([kept])[0]
        assert len(set(ids)) > 1                                   # really sampled, not one id
    return ours


def test_refine_pass_equals_upstreams(engine):
    """Non-default oral/laugh/break levels; the prompt is upstream's `[Sbreak]text[Pbreak][oral_5][laugh_2]
    [break_3]`; every generated id equal, and the text the code pass speaks is upstream's decoding of them."""
    tok = engine.loaded.tokenizer._tokenizer
    ids = engine.refine_ids(TEXTS[0], Refine(5, 2, 3))
    want = tok(f"[Sbreak]{TEXTS[0]}[Pbreak][oral_5][laugh_2][break_3]", add_special_tokens=False)["input_ids"]
    chat = engine.loaded.chat
    upstream, _, _ = chat.tokenizer.encode(chat.speaker.decorate_text_prompts([TEXTS[0]], "[oral_5][laugh_2][break_3]"),
                                           chat.config.gpt.num_vq, device="cpu")
    assert ids == want == upstream[0, :, 0].tolist()
    check_refine_equals_upstream(engine, [*TEXTS, INLINE])


@pytest.mark.slow
def test_refine_pass_equals_upstreams_on_random_full():
    """The same on the released model's shapes (20 layers, 768 wide, the 21178-token text head); and its code
    prompt at every speed, inline tokens included."""
    from engine.engine import Engine
    torch.set_num_threads(1)
    full = Engine.load(EngineOptions(model="random-full", max_batch=3, dtype="fp32"))
    for speed in SPEEDS:                                         # and the code prompt at every speed
        check_prompts(full, speed)
    check_refine_equals_upstream(full, TEXTS[:2])


def test_refine_is_batch_invariant_and_synthesize_speaks_its_text(engine):
    voice = engine.sample_voice(42)
    reqs = [Request(f"r{i}", t, voice, 50 + i, controls=Controls(refine=Refine())) for i, t in enumerate(TEXTS)]
    together = {r.key: r for r in engine.refine(reqs)}
    for r in reqs:
        assert next(engine.refine([r])) == together[r.key]
    assert len({r.text for r in together.values()}) == len(reqs)
    # synthesize refines a request that carries no refined text, and speaks it: the same audio as given it
    auto = {r.key: r for r in engine.synthesize(reqs)}
    given = {r.key: r for r in engine.synthesize([Request(r.key, r.text, voice, r.seed, controls=r.controls,
                                                          refined=together[r.key].text) for r in reqs])}
    plain = {r.key: r for r in engine.synthesize([Request(r.key, r.text, voice, r.seed) for r in reqs])}
    for r in reqs:
        assert auto[r.key].refined == together[r.key].text == given[r.key].refined
        assert np.array_equal(auto[r.key].audio, given[r.key].audio)
        assert auto[r.key].tokens == plain[r.key].tokens          # random models: the count comes from the text
        assert not np.array_equal(auto[r.key].audio, plain[r.key].audio)
