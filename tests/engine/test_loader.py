"""Loading random-tiny through ChatTTS's classes; voices; exact per-row audio decode."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from engine.api import ModelUnavailable
from engine.assets import SHAPES
from engine.units import samples_for_tokens

C = SHAPES["random-tiny"].gpt_hidden        # the tiny model's hidden size


@pytest.fixture(scope="module")
def tiny():
    import torch

    torch.set_num_threads(1)
    from engine.loader import load_chattts

    return load_chattts("random-tiny")


# ---------------------------------------------------------------------------------------------- loader

def test_loads_through_chattts_classes(tiny):
    from ChatTTS import Chat
    from ChatTTS.model import DVAE, Embed, Speaker, Tokenizer
    from transformers import LlamaModel
    from vocos import Vocos

    s = SHAPES["random-tiny"]
    assert isinstance(tiny.chat, Chat) and tiny.chat.has_loaded(use_decoder=True)
    assert isinstance(tiny.gpt, LlamaModel) and isinstance(tiny.embed, Embed)
    assert isinstance(tiny.decoder, DVAE) and tiny.decoder.vq_layer is None
    assert isinstance(tiny.dvae, DVAE) and tiny.dvae.vq_layer is not None
    assert isinstance(tiny.vocos, Vocos) and isinstance(tiny.tokenizer, Tokenizer)
    assert isinstance(tiny.speaker, Speaker) and tiny.speaker.dim == s.gpt_hidden
    assert tiny.gpt.config.hidden_size == s.gpt_hidden
    assert tiny.gpt.config.num_hidden_layers == s.gpt_layers
    assert not hasattr(tiny.gpt, "embed_tokens")
    assert tiny.is_random and tiny.spec == "random-tiny" and tiny.device == "cpu"
    assert re.fullmatch(r"[0-9a-f]{16}", tiny.fingerprint)


def test_effective_head_weights(tiny):
    import torch
    from safetensors.torch import load_file

    sd = load_file(str(tiny.root / "asset" / "Embed.safetensors"))
    assert tiny.head_code_weight.shape == (4, 626, C)
    for i in range(4):
        g = sd[f"head_code.{i}.parametrizations.weight.original0"]
        v = sd[f"head_code.{i}.parametrizations.weight.original1"]
        want = g * v / torch.linalg.vector_norm(v, dim=1, keepdim=True)
        torch.testing.assert_close(tiny.head_code_weight[i], want)
        assert torch.equal(tiny.head_code_weight[i], tiny.embed.head_code[i].weight)
    h = torch.randn(3, C)
    torch.testing.assert_close(h @ tiny.head_code_weight[2].T, tiny.embed.head_code[2](h))


def test_config_read_from_files(tiny):
    s = SHAPES["random-tiny"]
    c = tiny.config
    assert (c.decoder.idim, c.decoder.hidden, c.decoder.n_layer) == (s.gpt_hidden // 2, s.decoder_hidden,
                                                                     s.decoder_layers)
    assert (c.dvae.vq.dim, c.dvae.encoder.n_layer) == (s.vq_dim, s.dvae_layers)
    assert c.vocos.backbone.init_args.num_layers == s.vocos_layers
    assert c.vocos.head.init_args.n_fft == 1024 and c.vocos.head.init_args.hop_length == 256
    from ChatTTS.config import Config

    assert Config().decoder.idim == 384           # the shared defaults were not mutated


def test_cached_per_process_and_thread_safe(tiny, monkeypatch):
    import engine.loader as L

    assert L.load_chattts("random-tiny") is tiny
    calls: list[str] = []
    real = L._load

    def counting(spec, device):
        calls.append(spec)
        return real(spec, device)

    monkeypatch.setattr(L, "_load", counting)
    spec = str(tiny.root)                          # a new key: the same files as a local directory
    L._CACHE.pop((spec, "cpu", ""), None)
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(L.load_chattts(spec))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [spec] and len(out) == 4 and all(o is out[0] for o in out)
    assert out[0].fingerprint == tiny.fingerprint          # same files, same fingerprint
    L._CACHE.pop((spec, "cpu", ""), None)


def test_load_is_quiet_on_stderr(tiny, capfd):
    import engine.loader as L

    spec = str(tiny.root) + "/"
    L._CACHE.pop((spec, "cpu", ""), None)
    capfd.readouterr()
    L.load_chattts(spec)
    err = capfd.readouterr().err
    assert err == ""
    L._CACHE.pop((spec, "cpu", ""), None)


def test_fingerprint_tracks_content(tiny, tmp_path):
    import shutil

    from engine.loader import fingerprint

    copy = tmp_path / "m"
    shutil.copytree(tiny.root, copy)
    assert fingerprint(copy) == tiny.fingerprint
    p = copy / "asset" / "spk_stat.txt"
    p.write_text(p.read_text(encoding="utf-8") + "x", encoding="utf-8")
    assert fingerprint(copy) != tiny.fingerprint


# ----------------------------------------------------------------------------------------------- voice

def test_sample_voice_deterministic_and_local_rng(tiny):
    import torch
    from ChatTTS.model.speaker import Speaker

    from engine.voice import sample_voice

    state = torch.get_rng_state()
    a, b, c = sample_voice(tiny, 1234), sample_voice(tiny.chat, 1234), sample_voice(tiny, 1235)
    assert torch.equal(state, torch.get_rng_state())          # global RNG untouched
    assert a == b and a != c
    vec = Speaker._decode(a)
    assert vec.shape == (C,) and np.isfinite(vec).all()
    # drawn from the speaker statistics: mean + std * z
    z = torch.randn(C, generator=torch.Generator().manual_seed(1234))
    want = (z * tiny.speaker.std.float() + tiny.speaker.mean.float()).half().numpy()
    assert np.array_equal(vec, want)


def test_parse_voice_spec(tiny, tmp_path):
    """The one voice parser: form at the edge (no model), size once the model is loaded."""
    from engine.voice import VoiceError, parse_voice_spec, resolve_voice, sample_voice

    v = sample_voice(tiny, 7)
    for spec in ("seed:7", "  SEED: 7 ", v):
        assert resolve_voice(parse_voice_spec(spec), tiny) == v, spec
    assert parse_voice_spec("seed:7").seed == 7 and parse_voice_spec(v).spk_emb == v
    for name in ("voice.txt", "voice.emb", "voice"):          # any file name: a path is a path
        f = tmp_path / name
        f.write_text(v + "\n", encoding="utf-8")
        assert resolve_voice(parse_voice_spec(str(f)), tiny) == v

    bad = {
        "": "empty voice",
        "seed:abc": "seed must be an integer",
        "seed:-1": "seed must be in",
        f"seed:{2**63}": "seed must be in",
        str(tmp_path / "missing.txt"): "no such voice file",
        str(tmp_path / "missing"): "no such voice file",
        "missing.emb": "no such voice file",
        "definitely not a voice": "not a ChatTTS speaker embedding",
    }
    for spec, msg in bad.items():
        with pytest.raises(VoiceError, match=msg) as e:
            parse_voice_spec(spec)
        assert "\n" not in str(e.value)
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(VoiceError, match="empty"):
        parse_voice_spec(str(tmp_path / "empty.txt"))
    import torch
    from ChatTTS.model.speaker import Speaker

    wrong = Speaker._encode(torch.zeros(768))                 # a full-size voice on the tiny model
    spec = parse_voice_spec(wrong)                            # well-formed ...
    with pytest.raises(VoiceError, match="768 values, this model needs 64"):
        resolve_voice(spec, tiny)                             # ... but not for this model
    with pytest.raises(VoiceError, match="non-finite"):
        parse_voice_spec(Speaker._encode(torch.full((64,), float("nan"))))


def test_spk_emb_strings_are_chattts_own_format():
    """Our encoder writes byte for byte what ChatTTS's Speaker writes, and each decodes the other's."""
    import numpy as np
    import torch
    from ChatTTS.model.speaker import Speaker

    from engine.voice import decode_spk_emb, encode_spk_emb

    vec = torch.randn(768, generator=torch.Generator().manual_seed(5)) * 3
    ours, theirs = encode_spk_emb(vec), Speaker._encode(vec)
    assert ours == theirs
    assert np.array_equal(decode_spk_emb(ours), Speaker._decode(theirs))


# ---------------------------------------------------------------------------------------------- decode

def _rows(tiny, lengths, codes=False, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    if codes:
        return [torch.randint(0, 625, (t, 4), generator=g) for t in lengths]
    return [torch.randn(t, C, generator=g) for t in lengths]


@pytest.mark.parametrize("codes", [False, True], ids=["hidden->Decoder", "codes->DVAE"])
def test_decode_exact_lengths_and_batch_independent(tiny, codes):
    from engine.vocoder import decode

    lengths = [30, 17, 30, 1, 0, 5, 30]
    rows = _rows(tiny, lengths, codes)
    together = decode(tiny, rows)
    alone = [decode(tiny, [r])[0] for r in rows]
    for t, a, b in zip(lengths, together, alone):
        assert a.dtype == np.float32 and a.shape == (samples_for_tokens(t),)
        assert np.array_equal(a, b)                            # bit-exact: independent of the batch
        assert np.isfinite(a).all() and (a.size == 0 or np.abs(a).max() < 1.0)
    assert np.abs(together[0]).max() > 1e-3                    # real signal, not silence
    assert not np.array_equal(together[0], together[2])        # rows keep their own audio (input order)


def test_decode_single_row_equals_upstream(tiny):
    """Same modules, same transform as Chat._decode_to_wavs for one row; upstream's batch padding is what
    we avoid: a short row decoded next to a long one gets different samples there."""
    from engine.vocoder import decode

    long, short = _rows(tiny, [24, 9], seed=3)
    ours = decode(tiny, [long, short])
    up_single = tiny.chat._decode_to_wavs([short.clone()], True)[0]
    assert np.array_equal(ours[1], up_single[: samples_for_tokens(9)])
    up_padded = tiny.chat._decode_to_wavs([long.clone(), short.clone()], True)[1]
    assert up_padded.shape[0] == samples_for_tokens(24)        # padded tail: long row's length
    assert not np.array_equal(up_padded[: samples_for_tokens(9)], ours[1])


def test_decode_rejects_mixed_rows(tiny):
    from engine.vocoder import decode

    with pytest.raises(ValueError, match="mix"):
        decode(tiny, [_rows(tiny, [3])[0], _rows(tiny, [3], codes=True)[0]])
    with pytest.raises(ValueError, match="2-D"):
        decode(tiny, [_rows(tiny, [3])[0][0]])
    assert decode(tiny, []) == []


def test_bad_asset_dir_raises_model_unavailable(tmp_path):
    from engine.loader import load_chattts

    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(ModelUnavailable):
        load_chattts(str(d))
