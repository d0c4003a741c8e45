"""The real upstream path: ChatTTS's own Chat.infer on random-tiny (GPT -> Decoder -> Vocos), and the
loader's one-line ModelUnavailable errors (missing directory, incomplete layout, offline Hugging Face)."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from engine.api import ModelUnavailable

TEXTS = ["春眠不觉晓，处处闻啼鸟。", "夜来风雨声，花落知多少。"]
STEPS = 30


@pytest.fixture(scope="module")
def tiny():
    import torch

    torch.set_num_threads(1)
    from engine.loader import load_chattts

    return load_chattts("random-tiny")


def _infer(tiny, spk_emb: str, seed: int):
    from ChatTTS import Chat

    params = Chat.InferCodeParams(spk_emb=spk_emb, max_new_token=STEPS, min_new_token=STEPS,
                                  manual_seed=seed, show_tqdm=False)
    return tiny.chat.infer(list(TEXTS), skip_refine_text=True, split_text=False,
                           do_text_normalization=False, do_homophone_replacement=False,
                           params_infer_code=params)


def test_upstream_infer_runs_gpt_decoder_vocos(tiny):
    from engine.voice import sample_voice

    calls = {"gpt": 0, "decoder": 0, "vocos": 0}
    hooks = [
        tiny.gpt.register_forward_hook(lambda *a: calls.__setitem__("gpt", calls["gpt"] + 1)),
        tiny.decoder.register_forward_hook(lambda *a: calls.__setitem__("decoder", calls["decoder"] + 1)),
        tiny.vocos.backbone.register_forward_hook(lambda *a: calls.__setitem__("vocos", calls["vocos"] + 1)),
    ]
    chatts = logging.getLogger("ChatTTS")
    level = chatts.level
    chatts.setLevel(logging.ERROR)          # min = max new tokens: upstream warns "hit max_new_token"
    try:
        voice = sample_voice(tiny, 42)
        wavs = _infer(tiny, voice, seed=11)
        again = _infer(tiny, voice, seed=11)
    finally:
        chatts.setLevel(level)
        for h in hooks:
            h.remove()
    assert calls["gpt"] == 2 * STEPS and calls["decoder"] == 2 and calls["vocos"] == 2
    assert len(wavs) == 2
    for w in wavs:
        assert w.dtype == np.float32 and w.ndim == 1
        # upstream deletes samples with |x| <= 1e-5, so at most (2T-1)*256 remain
        assert 0.9 * (2 * STEPS - 1) * 256 < w.size <= (2 * STEPS - 1) * 256
        assert np.isfinite(w).all() and np.abs(w).max() < 1.0 and np.abs(w).max() > 1e-3
    assert not np.array_equal(wavs[0][:1000], wavs[1][:1000])
    for a, b in zip(wavs, again):                       # manual_seed makes upstream repeatable
        assert np.array_equal(a, b)


# ------------------------------------------------------------------------------------------ error paths

def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert msg and "\n" not in msg
    return msg


def test_missing_directory(tmp_path):
    from engine.loader import load_chattts

    with pytest.raises(ModelUnavailable) as e:
        load_chattts(str(tmp_path / "nope"))
    assert str(tmp_path / "nope") in _one_line(e)


def test_directory_without_gpt_config(tmp_path):
    from engine.loader import load_chattts

    (tmp_path / "asset").mkdir()
    with pytest.raises(ModelUnavailable) as e:
        load_chattts(str(tmp_path))
    assert _one_line(e) == f"{tmp_path}: not a ChatTTS asset directory (missing asset/gpt/config.json)"


def test_incomplete_layout_names_the_missing_file(tiny, tmp_path):
    import shutil

    from engine.loader import load_chattts

    shutil.copytree(tiny.root, tmp_path / "m")
    os.remove(tmp_path / "m" / "asset" / "Vocos.safetensors")
    with pytest.raises(ModelUnavailable) as e:
        load_chattts(str(tmp_path / "m"))
    assert "missing asset/Vocos.safetensors" in _one_line(e)


def test_corrupt_file_is_one_line(tiny, tmp_path):
    import shutil

    from engine.loader import load_chattts

    shutil.copytree(tiny.root, tmp_path / "m")
    (tmp_path / "m" / "asset" / "Decoder.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelUnavailable) as e:
        load_chattts(str(tmp_path / "m"))
    assert str(tmp_path / "m") in _one_line(e)


def test_hf_offline_fails_fast_with_hint(tmp_path, monkeypatch):
    from engine.loader import load_chattts

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as e:
        load_chattts("hf")
    msg = _one_line(e)
    assert 'model="/path/to/ChatTTS"' in msg and "HF_HUB_OFFLINE" in msg


def test_hf_unreachable_fails_with_hint(tmp_path, monkeypatch):
    from engine.loader import resolve_asset_dir

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")          # discard port: connection refused
    with pytest.raises(ModelUnavailable) as e:
        resolve_asset_dir("hf")
    msg = _one_line(e)
    assert "cannot reach 127.0.0.1" in msg and 'model="/path/to/ChatTTS"' in msg


def test_hf_cache_snapshot_is_used_offline(tiny, tmp_path, monkeypatch):
    """A snapshot in $HF_HOME/hub/models--2Noise--ChatTTS/snapshots/* loads without any network."""
    from engine.loader import resolve_asset_dir

    snap = tmp_path / "hf" / "hub" / "models--2Noise--ChatTTS" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "asset").symlink_to(tiny.root / "asset", target_is_directory=True)
    broken = snap.parent / "ffff0000"                        # an incomplete snapshot is skipped
    (broken / "asset").mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_asset_dir("hf") == snap
