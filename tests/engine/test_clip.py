"""Voices from a recording (engine/clip.py): the bad clips refused with one line, the encoding as upstream's
`Chat.sample_audio_speaker`, and the sample prompt placed exactly as upstream places `spk_smp` + `txt_smp` —
our first-step logits equal upstream's own modules' on random weights, for a clip voice (no speaker
embedding) and for an anchored voice (speaker embedding and sample)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch

from engine.api import EngineOptions, Request
from engine.voice import VoiceError, decode_prompt, decode_voice, parse_voice_spec, resolve_voice
from tests.engine.helpers import TRANSCRIPT, bad_clips, tone, write_clip


@pytest.fixture(scope="module")
def engine():
    torch.set_num_threads(1)
    from engine.engine import Engine
    return Engine.load(EngineOptions(model="random-tiny", dtype="fp32", max_batch=2))   # upstream's fp32: compared


# ------------------------------------------------------------------------------------------------ bad clips

def test_bad_clips_are_one_line_voice_errors(tmp_path):
    """The five kinds the issue names: unreadable, silent, too short, too long, no transcript."""
    cases = {**bad_clips(tmp_path), tmp_path / "missing.wav": "no such recording"}
    for path, msg in cases.items():
        with pytest.raises(VoiceError, match=msg) as e:
            parse_voice_spec(f"clip:{path}")
        assert str(path) in str(e.value) and "\n" not in str(e.value), str(e.value)
    (tmp_path / "blank.wav.txt").write_text(" \n", encoding="utf-8")
    write_clip(tmp_path / "blank.wav", text=None)
    with pytest.raises(VoiceError, match="transcript is empty"):
        parse_voice_spec(f"clip:{tmp_path / 'blank.wav'}")
    with pytest.raises(VoiceError, match="for a clip voice"):
        parse_voice_spec("seed:3", clip_text="你好")


def test_a_good_clip_in_any_format_parses(tmp_path):
    """44.1 kHz stereo WAV and an ffmpeg-only format (Ogg Vorbis through pydub's ffmpeg path); --clip-text wins
    over the file beside the recording; 3 s exactly is enough."""
    from engine.clip import clip_audio, read_clip

    wav = write_clip(tmp_path / "a.wav", seconds=3.0, rate=44_100, channels=2)
    spec = parse_voice_spec(f"clip:{wav}")
    assert spec.clip == str(wav) and spec.clip_text == TRANSCRIPT and spec.seed is None
    assert parse_voice_spec(f"CLIP:{wav}", clip_text=" 你 好 ").clip_text == "你 好"
    samples, rate = read_clip(wav)
    assert rate == 44_100 and samples.shape == (3 * 44_100,) and samples.dtype == np.float32
    assert clip_audio(wav).shape == (3 * 24_000,)
    ogg = tmp_path / "b.ogg"
    sf.write(str(ogg), tone(4.0), 24_000, format="OGG", subtype="VORBIS")
    assert parse_voice_spec(f"clip:{ogg}", clip_text="你好").clip == str(ogg)
    assert abs(read_clip(ogg)[0].size / 24_000 - 4.0) < 0.05


# ----------------------------------------------------------------------------------------- the encoding

def test_clip_voice_is_upstreams_encoding_and_resolves_for_the_model(engine, tmp_path):
    from engine.clip import clip_audio

    wav = write_clip(tmp_path / "c.wav", seconds=4.0)
    voice = resolve_voice(parse_voice_spec(f"clip:{wav}"), engine.loaded)
    v = decode_voice(voice)
    assert v.spk_emb is None and v.txt_smp == TRANSCRIPT and v.origin.startswith("clip:")
    assert v.spk_smp == engine.loaded.chat.sample_audio_speaker(clip_audio(wav))      # upstream's own call
    codes = decode_prompt(v.spk_smp)
    up = engine.loaded.chat.speaker.decode_prompt(v.spk_smp)
    assert codes.shape == tuple(up.shape) == (4, round(4.0 * 46.875)) and np.array_equal(codes, up.numpy())
    assert json.loads(voice)["spk_smp"] == v.spk_smp
    assert resolve_voice(parse_voice_spec(voice), engine.loaded) == voice           # a stored voice as --voice
    assert resolve_voice(parse_voice_spec(f"clip:{wav}"), engine.loaded) == voice   # deterministic
    other = dict(json.loads(voice), spk_smp=engine.loaded.chat.speaker.encode_prompt(torch.zeros(3, 9)))
    with pytest.raises(VoiceError, match="3 codebooks"):
        resolve_voice(parse_voice_spec(json.dumps(other)), engine.loaded)
    for broken in ('{"spk_smp": 1}', "{not json", json.dumps(dict(other, spk_smp="x"))):
        with pytest.raises(VoiceError):
            parse_voice_spec(broken)


def _upstream_first_logits(chat, text: str, spk_emb, spk_smp: str, txt_smp: str):
    """Upstream's own path for a sample prompt, as Chat._infer_code runs it up to the first step's logits."""
    params = chat.InferCodeParams(spk_emb=spk_emb, spk_smp=spk_smp, txt_smp=txt_smp)
    prompt = chat.speaker.decorate_code_prompts([text], params.prompt, params.txt_smp, params.spk_emb)
    input_ids, attn, text_mask = chat.tokenizer.encode(prompt, 4, prompt=chat.speaker.decode_prompt(spk_smp),
                                                       device="cpu")
    emb = chat.embed(input_ids, text_mask)
    if spk_emb is not None:
        chat.speaker.apply(emb, spk_emb, input_ids, chat.tokenizer.spk_emb_ids, torch.device("cpu"))
    hid = chat.gpt.gpt(inputs_embeds=emb, attention_mask=attn).last_hidden_state[:, -1]     # [1, C]
    return input_ids[0], emb, torch.stack([head(hid) for head in chat.embed.head_code], 1)  # [1, 4, 626]


@pytest.mark.parametrize("anchored", [False, True], ids=["clip", "anchored"])
@torch.no_grad()
def test_first_step_with_a_sample_prompt_equals_upstream(engine, tmp_path, anchored):
    """Prompt ids and codes, their embedding, the Llama and the heads agree with upstream's modules at step 0."""
    from engine.llama import KVCache

    chat = engine.loaded.chat
    text = "你好，世界。第二句！"
    clip = resolve_voice(parse_voice_spec(f"clip:{write_clip(tmp_path / 'd.wav', seconds=3.5)}"), engine.loaded)
    v = decode_voice(clip)
    voice = clip
    if anchored:
        voice = engine.anchor_voice(engine.sample_voice(3), np.asarray(tone(3.2)), TRANSCRIPT)
        v = decode_voice(voice)
        assert v.spk_emb == engine.sample_voice(3) and v.origin == "anchor"
    input_ids, emb, ref = _upstream_first_logits(chat, text, v.spk_emb, v.spk_smp, v.txt_smp)

    row = engine._row(Request("k", text, voice, seed=1), 0)
    P = row.codes.shape[0]
    assert row.ids.tolist() == input_ids[:-P, 0].tolist()                           # text ids, [empty_spk] or not
    assert row.codes.tolist() == input_ids[-P:].tolist()                             # codes after [Ptts]
    assert (engine.loaded.tokenizer._tokenizer.convert_ids_to_tokens(row.ids[:2].tolist())
            == ["[Stts]", "[spk_emb]" if anchored else "[empty_spk]"])
    m = engine.model
    x = m.prompt_embedding(row.ids, row.spk, row.codes)
    assert x.shape == (1, row.prompt_len, m.llama.s.hidden) == emb.shape
    torch.testing.assert_close(x[0], emb[0], atol=2e-3, rtol=1e-3)     # upstream normalizes the voice in fp16
    if not anchored:
        assert torch.equal(x[0], emb[0])                                 # no speaker vector: bit-equal
    L = row.prompt_len
    cache = KVCache(m.llama.s, 1, L, "cpu", torch.float32)
    prefill = lambda: m.llama.attention.begin(cache, torch.arange(L)[None], torch.tensor([0]), [L])   # noqa: E731
    h = m.llama(x, prefill())[:, -1]
    torch.testing.assert_close(m.logits(h), ref, atol=2e-2, rtol=1e-2)
    h_up = m.llama(emb.clone(), prefill())[:, -1]
    torch.testing.assert_close(m.logits(h_up), ref, atol=1e-4, rtol=1e-4)   # same input: fp32-equal


def test_a_sample_voice_renders_batch_invariant(engine, tmp_path):
    """A clip voice beside a plain one in one batch: each row equals the row rendered alone, and the sample
    changes the audio."""
    clip = resolve_voice(parse_voice_spec(f"clip:{write_clip(tmp_path / 'e.wav', seconds=3.0)}"), engine.loaded)
    plain = engine.sample_voice(5)
    reqs = [Request("a", "今天天气很好。", clip, 11), Request("b", "我们去公园散步吧。", plain, 12),
            Request("c", "今天天气很好。", plain, 11)]
    out = {r.key: r.audio for r in engine.synthesize(reqs)}
    for r in reqs:
        assert np.array_equal(next(engine.synthesize([r])).audio, out[r.key]), r.key
    assert out["a"].shape == out["c"].shape and not np.array_equal(out["a"], out["c"])
