"""Random ChatTTS assets: layout, determinism, tokenizer, and that the full-size shapes are the released ones."""
from __future__ import annotations

import hashlib
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

from engine.assets import (
    ASSET_FILES,
    ASSET_VERSION,
    INFO_FILE,
    NUM_BASE_TOKENS,
    NUM_TEXT_TOKENS,
    SHAPES,
    SPECIAL_TOKENS,
    SPK_STAT_FILE,
    _llama_config_dict,
    base_vocab,
    decoder_config,
    dvae_configs,
    ensure_random_assets,
    vocos_init_args,
)

ALL_FILES = (*ASSET_FILES, SPK_STAT_FILE, INFO_FILE)


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)


def _digests(root: Path) -> dict[str, str]:
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in ALL_FILES}


def test_layout_written_once_and_atomically(tmp_path):
    root = ensure_random_assets("random-tiny", root=tmp_path)
    assert root == tmp_path / "assets" / f"random-tiny-v{ASSET_VERSION}"
    for rel in ALL_FILES:
        assert (root / rel).is_file(), rel
        assert (root / rel).stat().st_size > 0, rel
    # exactly the layout, no stray temp directories beside it
    assert [p.name for p in (tmp_path / "assets").iterdir()] == [root.name]
    mtimes = {rel: (root / rel).stat().st_mtime_ns for rel in ALL_FILES}
    assert ensure_random_assets("random-tiny", root=tmp_path) == root
    assert {rel: (root / rel).stat().st_mtime_ns for rel in ALL_FILES} == mtimes      # cached, not rewritten


def test_generation_is_deterministic(tmp_path):
    a = ensure_random_assets("random-tiny", root=tmp_path / "a")
    b = ensure_random_assets("random-tiny", root=tmp_path / "b")
    da, db = _digests(a), _digests(b)
    assert da == db
    assert len(set(da.values())) == len(da)            # and the files are not all the same bytes


def test_concurrent_callers_get_one_complete_directory(tmp_path):
    results: list[Path] = []
    errors: list[BaseException] = []

    def run():
        try:
            results.append(ensure_random_assets("random-tiny", root=tmp_path))
        except BaseException as e:     # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(results)) == 1
    assert all((results[0] / rel).is_file() for rel in ALL_FILES)
    assert len(list((tmp_path / "assets").iterdir())) == 1


def test_unknown_model_name(tmp_path):
    with pytest.raises(ValueError, match="random-huge"):
        ensure_random_assets("random-huge", root=tmp_path)      # type: ignore[arg-type]


def test_base_vocab_layout():
    v = base_vocab()
    assert len(v) == NUM_BASE_TOKENS == 21128
    assert v[0] == "[PAD]"
    assert len(set(v)) == len(v)
    assert "中" in v and "鿿" in v and "。" in v and "##a" in v


def test_tokenizer_loads_and_tokenizes_chinese(tmp_path):
    from transformers import BertTokenizerFast

    root = ensure_random_assets("random-tiny", root=tmp_path)
    tok = BertTokenizerFast.from_pretrained(str(root / "asset" / "tokenizer"))
    assert len(tok) == NUM_TEXT_TOKENS == 21178
    assert tok.convert_tokens_to_ids("[PAD]") == 0
    assert tok.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == list(range(21128, 21178))
    brk = tok.convert_tokens_to_ids("[break_0]")
    assert brk > tok.convert_tokens_to_ids("[uv_break]") and brk > tok.convert_tokens_to_ids("[laugh]")

    text = "[Stts][spk_emb]春眠不觉晓，处处闻啼鸟。[uv_break]Hello 2024[Ptts]"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    unk = tok.convert_tokens_to_ids("[UNK]")
    assert unk not in ids
    assert ids[0] == tok.convert_tokens_to_ids("[Stts]") and ids[1] == tok.convert_tokens_to_ids("[spk_emb]")
    assert ids[-1] == tok.convert_tokens_to_ids("[Ptts]")
    assert tok.convert_tokens_to_ids("[uv_break]") in ids
    # every CJK character is one real id
    chars = "春眠不觉晓处处闻啼鸟"
    cjk_ids = tok("".join(chars), add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(cjk_ids) == list(chars)

    # ChatTTS's own Tokenizer wrapper finds its specials
    from ChatTTS.model.tokenizer import Tokenizer

    ct = Tokenizer(str(root / "asset" / "tokenizer"))
    assert ct.len == 21178
    assert ct.spk_emb_ids == 21128 + SPECIAL_TOKENS.index("[spk_emb]")
    assert ct.eos_token == 21128 + SPECIAL_TOKENS.index("[Ebreak]")
    ids, mask, _ = ct.encode(["[Stts][empty_spk]你好[Ptts]", "[Stts][empty_spk]很长的一句话[Ptts]"], 4)
    assert ids.shape == (2, 9, 4) and int(ids[0, 0, 0]) == 0            # left-padded with [PAD] = 0
    assert mask[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1]


def test_full_shapes_are_the_released_model():
    """random-full's module configs equal ChatTTS 0.2.5's Config defaults (the real checkpoint's shapes)."""
    from ChatTTS.config import Config

    c = Config()
    s = SHAPES["random-full"]
    assert decoder_config(s) == asdict(c.decoder)
    enc, dec, vq = dvae_configs(s)
    assert enc == asdict(c.dvae.encoder) and dec == asdict(c.dvae.decoder)
    assert {**vq, "levels": tuple(vq["levels"])} == {**asdict(c.dvae.vq), "levels": tuple(c.dvae.vq.levels)}
    fe, bb, hd = vocos_init_args(s)
    assert fe == asdict(c.vocos.feature_extractor.init_args)
    assert bb == asdict(c.vocos.backbone.init_args)
    assert hd == asdict(c.vocos.head.init_args)
    g = _llama_config_dict(s)
    for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
              "max_position_embeddings"):
        assert g[k] == getattr(c.gpt, k), k


def test_tiny_spk_stat_matches_hidden(tmp_path):
    import numpy as np
    import pybase16384 as b14

    root = ensure_random_assets("random-tiny", root=tmp_path)
    raw = np.frombuffer(b14.decode_from_string((root / SPK_STAT_FILE).read_text(encoding="utf-8")), np.float16)
    assert raw.shape == (2 * SHAPES["random-tiny"].gpt_hidden,)
    std, mean = raw[: raw.size // 2], raw[raw.size // 2:]
    assert np.isfinite(raw).all() and (std > 0).all() and np.abs(mean).max() < 1


@pytest.mark.slow
def test_random_full_loads_with_release_sizes(tmp_path, monkeypatch):
    """~10 s, 1.2 GB in tmp: RUN_SLOW=1 python -m pytest tests/engine/test_assets.py -m slow"""
    from ChatTTS.config import Config

    import engine.loader as L

    monkeypatch.setenv("CHATTTS_RENDER_CACHE", str(tmp_path))
    monkeypatch.setattr(L, "_CACHE", {})      # the 1.2 GB model is not kept for the rest of the session
    root = ensure_random_assets("random-full")
    assert asdict(L.config_from_assets(root)) == asdict(Config())
    m = L.load_chattts("random-full")

    def n(mod):
        return sum(p.numel() for p in mod.parameters())

    assert n(m.gpt) == 188_775_168            # 20 x (4 x 768^2 + 3 x 768 x 3072 + 2 x 768) + 768
    assert n(m.embed) == 36_399_234
    assert n(m.decoder) == 25_920_640
    assert n(m.dvae) == 15_031_048
    assert n(m.vocos) == 13_531_650


def test_damaged_cache_is_regenerated(tmp_path):
    root = ensure_random_assets("random-tiny", root=tmp_path)
    before = _digests(root)
    (root / "asset" / "Vocos.safetensors").unlink()
    assert ensure_random_assets("random-tiny", root=tmp_path) == root
    assert _digests(root) == before
    assert [p.name for p in (tmp_path / "assets").iterdir()] == [root.name]
