"""Random ChatTTS weights in the exact asset layout `Chat._load` reads, generated deterministically.

    root = ensure_random_assets("random-tiny")     # ~/.cache/chattts-render/assets/random-tiny-v1
    chat = engine.loader.load_chattts(str(root))     # or load_chattts("random-tiny")

Layout written (the real 2Noise/ChatTTS layout, plus two small files of ours):

    asset/Vocos.safetensors  asset/DVAE.safetensors  asset/Decoder.safetensors  asset/Embed.safetensors
    asset/gpt/config.json  asset/gpt/model.safetensors
    asset/tokenizer/tokenizer.json  tokenizer_config.json  special_tokens_map.json
    asset/spk_stat.txt        the Speaker's std+mean (pybase16384 float16 string, 2 x GPT hidden values)
    asset/random_model.json   what generated this directory (name, version, seed, shapes)

Every tensor comes from its own torch.Generator seeded by sha256(model name, file, tensor name), so the files
are byte-identical on every machine with the same torch, and independent of iteration order.  Initializations
are scaled so the random model is numerically sane end to end (finite, bounded Vocos output, |x| < 1).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from engine.atomic import atomic_dir

ASSET_VERSION = 1                  # bump when the generator's output changes
SEED = 20_240_528                  # base seed of every generated tensor
CACHE_ENV = "CHATTTS_RENDER_CACHE"

NUM_VQ = 4                         # codebooks per GPT step
NUM_AUDIO_TOKENS = 626             # 625 codes + EOS (625)
NUM_TEXT_TOKENS = 21_178           # 21128 BERT-Chinese entries + 50 ChatTTS specials
NUM_BASE_TOKENS = 21_128
N_MELS = 100                       # mel bins between Decoder and Vocos
N_FFT = 1024                       # Vocos ISTFT size (samples)
HOP = 256                          # Vocos hop (samples); one GPT step = 2 mel frames = 512 samples
SAMPLE_RATE = 24_000               # Hz
FSQ_LEVELS = (5, 5, 5, 5)          # product 625 = codes per codebook

# The 50 ChatTTS specials, ids 21128..21177 in this order ([break_0] must sort above [uv_break] and [laugh]).
SPECIAL_TOKENS: tuple[str, ...] = (
    "[Sasr]", "[Pasr]", "[Easr]", "[Stts]", "[Ptts]", "[Etts]", "[Sbreak]", "[Pbreak]", "[Ebreak]",
    "[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[undefine]", "[laugh]", "[spk_emb]", "[empty_spk]",
    "[music]", "[pure]",
    *(f"[break_{i}]" for i in range(8)), *(f"[laugh_{i}]" for i in range(3)),
    *(f"[oral_{i}]" for i in range(10)), *(f"[speed_{i}]" for i in range(10)),
)
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")   # ids 0..4; [PAD] must be 0
CJK_PUNCT = "。，、；：？！“”‘’（）《》〈〉【】—…·「」『』～"
ASSET_FILES: tuple[str, ...] = (
    "asset/Vocos.safetensors", "asset/DVAE.safetensors", "asset/Decoder.safetensors",
    "asset/Embed.safetensors", "asset/gpt/config.json", "asset/gpt/model.safetensors",
    "asset/tokenizer/tokenizer.json", "asset/tokenizer/tokenizer_config.json",
    "asset/tokenizer/special_tokens_map.json",
)
SPK_STAT_FILE = "asset/spk_stat.txt"
INFO_FILE = "asset/random_model.json"

RandomModel = Literal["random-tiny", "random-full"]


@dataclass(frozen=True)
class RandomShape:
    """Sizes of one random model.  random-full equals the released ChatTTS checkpoint."""
    gpt_hidden: int
    gpt_layers: int
    gpt_heads: int
    gpt_ffn: int
    gpt_vocab: int                 # rows of the unused Llama embed_tokens (deleted after load)
    decoder_hidden: int            # Decoder (GPT hidden states -> mel); idim = odim = gpt_hidden // 2
    decoder_layers: int
    decoder_bn: int
    dvae_dim: int                  # DVAE (codes -> mel); encoder in = decoder in/out = vq_dim // 2
    dvae_hidden: int
    dvae_layers: int
    dvae_bn: int
    vocos_dim: int
    vocos_ffn: int
    vocos_layers: int
    max_positions: int = 4096

    @property
    def vq_dim(self) -> int:
        return 2 * self.dvae_dim


SHAPES: dict[str, RandomShape] = {
    "random-full": RandomShape(gpt_hidden=768, gpt_layers=20, gpt_heads=12, gpt_ffn=3072, gpt_vocab=32_000,
                               decoder_hidden=512, decoder_layers=12, decoder_bn=128,
                               dvae_dim=512, dvae_hidden=256, dvae_layers=12, dvae_bn=128,
                               vocos_dim=512, vocos_ffn=1536, vocos_layers=8),
    "random-tiny": RandomShape(gpt_hidden=64, gpt_layers=2, gpt_heads=4, gpt_ffn=128, gpt_vocab=8,
                               decoder_hidden=32, decoder_layers=2, decoder_bn=16,
                               dvae_dim=32, dvae_hidden=32, dvae_layers=1, dvae_bn=16,
                               vocos_dim=32, vocos_ffn=64, vocos_layers=1),
}

_LOCK = threading.Lock()


def cache_root() -> Path:
    """`$CHATTTS_RENDER_CACHE` or ~/.cache/chattts-render."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "chattts-render"


def ensure_random_assets(name: RandomModel, root: Path | None = None) -> Path:
    """The asset directory of random model `name`, generated once (atomically) under
    `<root or cache_root()>/assets/<name>-v<ASSET_VERSION>/`; returns that directory."""
    if name not in SHAPES:
        raise ValueError(f"unknown random model {name!r}; expected one of {sorted(SHAPES)}")
    base = Path(root) if root is not None else cache_root()
    target = base / "assets" / f"{name}-v{ASSET_VERSION}"
    if _complete(target):
        return target
    with _LOCK:
        if _complete(target):
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        try:     # an incomplete target was damaged by hand: replaced; a complete one is another process's
            with atomic_dir(target, replace_if=lambda old: not _complete(old)) as tmp:
                write_random_assets(name, tmp)
        except FileExistsError:
            pass
    return target


def _complete(d: Path) -> bool:
    return all((d / f).is_file() for f in (*ASSET_FILES, SPK_STAT_FILE, INFO_FILE))


def write_random_assets(name: RandomModel, out: Path) -> None:
    """Write every file of random model `name` into directory `out` (no atomicity; see ensure_random_assets)."""
    import torch

    shape = SHAPES[name]
    (out / "asset" / "gpt").mkdir(parents=True, exist_ok=True)
    (out / "asset" / "tokenizer").mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng(devices=[]):      # module constructors draw from the global RNG
        torch.manual_seed(0)
        _write_gpt(name, shape, out / "asset" / "gpt")
        _write_embed(name, shape, out / "asset" / "Embed.safetensors")
        coef = _tensor(name, "coef", (1, N_MELS, 1), "coef")
        _write_decoder(name, shape, coef, out / "asset" / "Decoder.safetensors")
        _write_dvae(name, shape, coef, out / "asset" / "DVAE.safetensors")
        _write_vocos(name, shape, out / "asset" / "Vocos.safetensors")
        _write_spk_stat(name, shape, out / SPK_STAT_FILE)
    write_tokenizer(out / "asset" / "tokenizer")
    info = {"name": name, "version": ASSET_VERSION, "seed": SEED, "shape": asdict(shape)}
    (out / INFO_FILE).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------- tensors

def _generator(model: str, key: str):
    import torch

    digest = hashlib.sha256(f"{SEED}/{model}/{key}".encode()).digest()
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def _tensor(model: str, key: str, shape: tuple[int, ...], rule: str, std: float | None = None):
    """One deterministic tensor.  rule: normal (N(0, std)), fanin (N(0, 1/sqrt(fan_in))), ones, zeros,
    const:<v>, coef (U(0.8, 1.2))."""
    import torch

    if rule == "zeros":
        return torch.zeros(shape)
    if rule == "ones":
        return torch.ones(shape)
    if rule.startswith("const:"):
        return torch.full(shape, float(rule[6:]))
    g = _generator(model, key)
    if rule == "coef":
        return torch.rand(shape, generator=g) * 0.4 + 0.8
    if rule == "fanin":
        fan_in = 1
        for s in shape[1:]:
            fan_in *= s
        std = fan_in ** -0.5
    return torch.randn(shape, generator=g).mul_(std if std is not None else 0.02)


def _fill(model: str, prefix: str, module, special: dict[str, tuple[str, float | None]] | None = None) -> dict:
    """A state dict for `module`: buffers kept (mel filterbanks, windows), parameters generated by name."""
    params = dict(module.named_parameters())
    out = {}
    for k, v in module.state_dict().items():
        if k not in params:
            out[k] = v.detach().clone().contiguous()
            continue
        rule, std = _rule(k, v, special or {})
        out[k] = _tensor(model, f"{prefix}/{k}", tuple(v.shape), rule, std).contiguous()
    return out


def _rule(k: str, v, special: dict) -> tuple[str, float | None]:
    for suffix, r in special.items():
        if k.endswith(suffix):
            return r
    last = k.rsplit(".", 1)[-1]
    if last == "bias":
        return "zeros", None
    if "norm" in k.rsplit(".", 2)[-2] and last == "weight":        # LayerNorm / RMSNorm scale
        return "ones", None
    if v.dim() == 1:                                                # ConvNeXt layer scale
        return "const:0.1", None
    return "fanin", None


def _save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: t.contiguous() for k, t in sorted(tensors.items())}, str(path), metadata={"format": "pt"})


def _write_gpt(model: str, s: RandomShape, d: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaModel

    cfg = _llama_config_dict(s)
    (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with torch.device("meta"):
        llama = LlamaModel(LlamaConfig(**{k: v for k, v in cfg.items() if k != "architectures"}))
    sd = {}
    for k, v in llama.state_dict().items():
        if k.endswith(("norm.weight", "layernorm.weight")):
            sd[k] = torch.ones(tuple(v.shape))
        else:                                                   # linears and embed_tokens: N(0, 0.02)
            sd[k] = _tensor(model, f"gpt/{k}", tuple(v.shape), "normal", 0.02)
    _save(sd, d / "model.safetensors")


def _llama_config_dict(s: RandomShape) -> dict:
    return {
        "architectures": ["LlamaModel"], "model_type": "llama",
        "hidden_size": s.gpt_hidden, "intermediate_size": s.gpt_ffn,
        "num_attention_heads": s.gpt_heads, "num_key_value_heads": s.gpt_heads,
        "num_hidden_layers": s.gpt_layers, "max_position_embeddings": s.max_positions,
        "vocab_size": s.gpt_vocab, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False, "use_cache": False,
        "initializer_range": 0.02, "torch_dtype": "float32",
    }


def _write_embed(model: str, s: RandomShape, path: Path) -> None:
    import torch

    sd = {}
    for i in range(NUM_VQ):
        sd[f"emb_code.{i}.weight"] = _tensor(model, f"embed/emb_code.{i}", (NUM_AUDIO_TOKENS, s.gpt_hidden), "normal")
    sd["emb_text.weight"] = _tensor(model, "embed/emb_text", (NUM_TEXT_TOKENS, s.gpt_hidden), "normal")
    heads = [("head_text", NUM_TEXT_TOKENS)] + [(f"head_code.{i}", NUM_AUDIO_TOKENS) for i in range(NUM_VQ)]
    for name, rows in heads:
        # weight norm: W = g * v / ||v||; g = ||v|| so the effective weight is v ~ N(0, 0.02)
        v = _tensor(model, f"embed/{name}.v", (rows, s.gpt_hidden), "normal")
        sd[f"{name}.parametrizations.weight.original0"] = torch.linalg.vector_norm(v, dim=1, keepdim=True)
        sd[f"{name}.parametrizations.weight.original1"] = v
    _save(sd, path)


def decoder_config(s: RandomShape) -> dict:
    half = s.gpt_hidden // 2
    return {"idim": half, "odim": half, "hidden": s.decoder_hidden, "n_layer": s.decoder_layers,
            "bn_dim": s.decoder_bn}


def dvae_configs(s: RandomShape) -> tuple[dict, dict, dict]:
    enc = {"idim": s.dvae_dim, "odim": s.vq_dim, "hidden": s.dvae_hidden, "n_layer": s.dvae_layers,
           "bn_dim": s.dvae_bn}
    dec = {"idim": s.dvae_dim, "odim": s.dvae_dim, "hidden": s.dvae_hidden, "n_layer": s.dvae_layers,
           "bn_dim": s.dvae_bn}
    vq = {"dim": s.vq_dim, "levels": FSQ_LEVELS, "G": 2, "R": 2}
    return enc, dec, vq


def _write_decoder(model: str, s: RandomShape, coef, path: Path) -> None:
    from ChatTTS.model import DVAE

    cfg = decoder_config(s)
    dec = DVAE(decoder_config=cfg, dim=cfg["idim"])
    sd = _fill(model, "decoder", dec)
    sd["coef"] = coef.clone()
    _save(sd, path)


def _write_dvae(model: str, s: RandomShape, coef, path: Path) -> None:
    from ChatTTS.model import DVAE

    enc, dec, vq = dvae_configs(s)
    dvae = DVAE(decoder_config=dec, encoder_config=enc, vq_config=vq, dim=dec["idim"])
    sd = _fill(model, "dvae", dvae)
    sd["coef"] = coef.clone()
    _save(sd, path)


def vocos_init_args(s: RandomShape) -> tuple[dict, dict, dict]:
    fe = {"sample_rate": SAMPLE_RATE, "n_fft": N_FFT, "hop_length": HOP, "n_mels": N_MELS, "padding": "center"}
    bb = {"input_channels": N_MELS, "dim": s.vocos_dim, "intermediate_dim": s.vocos_ffn,
          "num_layers": s.vocos_layers}
    hd = {"dim": s.vocos_dim, "n_fft": N_FFT, "hop_length": HOP, "padding": "center"}
    return fe, bb, hd


def _write_vocos(model: str, s: RandomShape, path: Path) -> None:
    from vocos import Vocos
    from vocos.feature_extractors import MelSpectrogramFeatures
    from vocos.heads import ISTFTHead
    from vocos.models import VocosBackbone

    fe, bb, hd = vocos_init_args(s)
    vocos = Vocos(feature_extractor=MelSpectrogramFeatures(**fe), backbone=VocosBackbone(**bb),
                  head=ISTFTHead(**hd))
    # head.out: (n_fft + 2, dim) -> log-magnitude (first half) and phase (second half).  The backbone ends
    # in a LayerNorm (unit variance), so std 0.3/sqrt(dim) gives log-magnitudes ~ N(0, 0.3^2): magnitudes
    # near 1 -> waveform peaks well under 1.  Phases get std pi/sqrt(dim): spread over the circle.
    sd = _fill(model, "vocos", vocos, {"head.out.weight": ("normal", 0.3 / s.vocos_dim ** 0.5)})

    w = sd["head.out.weight"]
    phase = _tensor(model, "vocos/head.out.phase", (w.shape[0] // 2, w.shape[1]), "normal",
                    math.pi / s.vocos_dim ** 0.5)
    w[w.shape[0] // 2:] = phase
    sd["head.out.bias"][: w.shape[0] // 2] = 0.5                  # log-magnitude offset: |S| ~ e^0.5
    _save(sd, path)


def _write_spk_stat(model: str, s: RandomShape, path: Path) -> None:
    """random-full keeps the Speaker statistics shipped in ChatTTS (768 values); others get random ones."""
    import numpy as np
    import pybase16384 as b14

    if s.gpt_hidden == 768:
        from ChatTTS.config import Config

        text = Config().spk_stat
    else:
        std = _tensor(model, "spk_stat/std", (s.gpt_hidden,), "coef").numpy() * 0.05   # ~ real std scale
        mean = _tensor(model, "spk_stat/mean", (s.gpt_hidden,), "normal", 0.02).numpy()
        text = b14.encode_to_string(np.concatenate([std, mean]).astype(np.float16).tobytes())
    path.write_text(text, encoding="utf-8")


# -------------------------------------------------------------------------------------------- tokenizer

def base_vocab() -> list[str]:
    """The 21128 WordPiece entries: BERT specials (id 0 = [PAD]), ASCII, CJK punctuation, '##' continuations
    of letters and digits, every CJK Unified Ideograph U+4E00..U+9FFF, then [unusedN] fillers."""
    ascii_ = [chr(c) for c in range(0x21, 0x7F) if not ("A" <= chr(c) <= "Z")]        # lowercased input
    cont = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    cjk = [chr(c) for c in range(0x4E00, 0xA000)]
    vocab = [*BERT_SPECIALS, *ascii_, *CJK_PUNCT, *cont, *cjk]
    if len(vocab) > NUM_BASE_TOKENS or len(set(vocab)) != len(vocab):
        raise AssertionError("base vocabulary does not fit 21128 unique entries")
    vocab += [f"[unused{i}]" for i in range(1, NUM_BASE_TOKENS - len(vocab) + 1)]
    return vocab


def write_tokenizer(d: Path) -> None:
    """tokenizer.json (a BertTokenizerFast: BertNormalizer, BertPreTokenizer, WordPiece), tokenizer_config.json,
    special_tokens_map.json.  Written as plain JSON so transformers 4.57 and 5.x both load it."""
    vocab = base_vocab()
    ids = {t: i for i, t in enumerate(vocab)}

    def added(content: str, i: int) -> dict:
        return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}

    added_tokens = [added(t, ids[t]) for t in BERT_SPECIALS]
    added_tokens += [added(t, NUM_BASE_TOKENS + i) for i, t in enumerate(SPECIAL_TOKENS)]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]],
                           "cls": ["[CLS]", ids["[CLS]"]]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }
    specials_map = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                    "mask_token": "[MASK]", "additional_special_tokens": list(SPECIAL_TOKENS)}
    config = {
        "tokenizer_class": "BertTokenizerFast", "do_lower_case": True, "tokenize_chinese_chars": True,
        "strip_accents": None, "clean_up_tokenization_spaces": True, "model_max_length": 1_000_000,
        "padding_side": "right", **specials_map,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added_tokens},
    }
    for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", config),
                      ("special_tokens_map.json", specials_map)):
        (d / name).write_text(json.dumps(obj, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
