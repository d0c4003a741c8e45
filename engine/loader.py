"""Load ChatTTS's modules from an asset directory, the Hugging Face cache, or a generated random model.

    m = load_chattts("random-tiny")            # or "random-full", "hf", "/path/to/ChatTTS"
    m.chat.infer(...)                          # the upstream Chat, fully loaded
    m.gpt, m.embed, m.decoder, m.dvae, m.vocos, m.tokenizer, m.speaker
    m.head_code_weight                         # (num_vq, 626, hidden) effective weight-normed code heads
    m.fingerprint                              # 16 hex chars over the asset files' sha256 (cache keys)

Loading goes through `Chat._load` with paths joined from a fresh `Config().path` (never `Chat.load`, which
renames mismatching files to .bak and downloads).  The module shapes are read from the files themselves
(safetensors headers, gpt/config.json), so any consistent asset directory loads, real or random.
Results are cached per (spec, device) for the process, behind a lock.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from engine.api import RANDOM_MODELS, ModelUnavailable
from engine.assets import ASSET_FILES, INFO_FILE, SPK_STAT_FILE, cache_root, ensure_random_assets
from engine.atomic import file_sha256, write_bytes

HF_REPO = "2Noise/ChatTTS"
HF_PATTERNS = ["*.yaml", "*.json", "*.safetensors"]
PROBE_TIMEOUT = 3.0                # s: how long we wait for huggingface.co before calling it offline
ETAG_TIMEOUT = 10.0                # s: per-request metadata timeout of snapshot_download
FINGERPRINT_CHARS = 16             # hex chars of the model fingerprint

_CACHE: dict[tuple[str, str, str], LoadedModel] = {}
_CACHE_LOCK = threading.Lock()
_HASH_LOCK = threading.Lock()


@dataclass
class LoadedModel:
    """The loaded upstream `Chat` and direct handles to the modules an engine needs."""
    chat: Any                      # ChatTTS.Chat, loaded (has gpt, embed, decoder, dvae, vocos, tokenizer, speaker)
    root: Path                     # the asset directory (holds asset/...)
    spec: str                      # what the caller asked for ("random-tiny", "hf", a path)
    device: str
    fingerprint: str               # short sha256 over the asset files' hashes
    is_random: bool                # generated random weights (no real EOS behaviour: force lengths)
    config: Any                    # the ChatTTS Config the modules were built from
    head_code_weight: Any          # (num_vq, num_audio_tokens, hidden) fp32: weight-normed heads, evaluated once
    spk_stat: str = field(repr=False, default="")

    @property
    def gpt(self):                 # transformers LlamaModel (embed_tokens deleted)
        return self.chat.gpt.gpt

    @property
    def embed(self):               # ChatTTS Embed: emb_text, emb_code[i], head_text, head_code[i]
        return self.chat.embed

    @property
    def decoder(self):             # ChatTTS DVAE without VQ: GPT hidden states (B, hidden, T) -> mel (B, 100, 2T)
        return self.chat.decoder

    @property
    def dvae(self):                # ChatTTS DVAE with VQ: codes (B, 4, T) -> mel (B, 100, 2T); encodes clips
        return self.chat.dvae

    @property
    def vocos(self):               # vocos.Vocos: mel (B, 100, F) -> audio (B, 256 * (F - 1))
        return self.chat.vocos

    @property
    def tokenizer(self):           # ChatTTS Tokenizer (wraps BertTokenizerFast as ._tokenizer)
        return self.chat.tokenizer

    @property
    def speaker(self):             # ChatTTS Speaker (std, mean, dim)
        return self.chat.speaker


def load_chattts(spec: str, device: str = "cpu") -> LoadedModel:
    """Load (once per process) the model named by `spec`: "random-tiny" | "random-full" | "hf" | an asset dir.
    Raises ModelUnavailable with a one-line message when it cannot."""
    key = (spec, str(device), str(cache_root()) if spec in RANDOM_MODELS else "")
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _load(spec, str(device))
        return _CACHE[key]


def resolve_asset_dir(spec: str) -> Path:
    """The asset directory for `spec`, generating or finding it; validated.  No model is loaded."""
    if spec in RANDOM_MODELS:
        return ensure_random_assets(spec)      # type: ignore[arg-type]
    if spec == "hf":
        return _hf_snapshot()
    root = Path(spec).expanduser()
    if not root.is_dir():
        raise ModelUnavailable(f"{spec}: no such directory (a model is hf, {', '.join(RANDOM_MODELS)} or a ChatTTS "
                               "asset directory)")
    validate_asset_dir(root)
    return root


def validate_asset_dir(root: Path) -> None:
    """Raise ModelUnavailable naming the first missing file of the layout Chat._load reads."""
    order = ["asset/gpt/config.json", *[f for f in ASSET_FILES if f != "asset/gpt/config.json"]]
    for rel in order:
        if not (root / rel).is_file():
            raise ModelUnavailable(f"{root}: not a ChatTTS asset directory (missing {rel})")


def _load(spec: str, device: str) -> LoadedModel:
    root = resolve_asset_dir(spec)
    config = config_from_assets(root)
    import torch

    with _quiet():
        from ChatTTS import Chat

        chat = Chat(logger=logging.getLogger("ChatTTS"))
        chat.config = config                   # fresh objects: the dataclass defaults are shared instances
        paths = {k: os.path.join(root, v) for k, v in asdict(config.path).items()}
        try:
            ok = chat._load(device=torch.device(device), compile=False, **paths)
        except Exception as e:                 # shape mismatch, corrupt file: one line for the user
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ModelUnavailable(f"{root}: cannot load ChatTTS assets ({type(e).__name__}: {msg[:200]})") from e
    if not ok:
        raise ModelUnavailable(f"{root}: ChatTTS did not finish loading (missing modules)")
    llama = chat.gpt.gpt
    if hasattr(llama, "embed_tokens"):         # upstream deletes it; make sure (24.6M unused params)
        del llama.embed_tokens
    with torch.no_grad():
        head_code = torch.stack([h.weight.detach().float() for h in chat.embed.head_code]).contiguous()
    return LoadedModel(
        chat=chat, root=root, spec=spec, device=device, fingerprint=fingerprint(root),
        is_random=(root / INFO_FILE).is_file(), config=config, head_code_weight=head_code,
        spk_stat=config.spk_stat,
    )


@contextlib.contextmanager
def _quiet():
    """ChatTTS logs at INFO on load and transformers warns; keep stderr clean while loading."""
    import transformers

    chatts = logging.getLogger("ChatTTS")
    if chatts.getEffectiveLevel() < logging.WARNING or chatts.level == logging.NOTSET:
        chatts.setLevel(logging.WARNING)          # stays: ChatTTS's INFO chatter is never useful to us
    old_tf = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(old_tf)


# ------------------------------------------------------------------------------------ config from files

def _shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 — safe_open: no __iter__


def _convnext_config(sh: dict[str, tuple[int, ...]], prefix: str) -> dict:
    """DVAEDecoder sizes (idim, odim, hidden, n_layer, bn_dim) from its tensor shapes."""
    bn, idim, _ = sh[f"{prefix}conv_in.0.weight"]
    hidden = sh[f"{prefix}conv_in.2.weight"][0]
    odim = sh[f"{prefix}conv_out.weight"][0]
    pat = re.compile(re.escape(prefix) + r"decoder_block\.(\d+)\.")
    n_layer = len({m.group(1) for k in sh if (m := pat.match(k))})
    return {"idim": idim, "odim": odim, "hidden": hidden, "n_layer": n_layer, "bn_dim": bn}


def config_from_assets(root: Path):
    """A fresh ChatTTS Config whose shapes match the files in `root` (equal to the defaults for the real model)."""
    from ChatTTS.config import config as C

    a = root / "asset"
    try:
        gcfg = json.loads((a / "gpt" / "config.json").read_text(encoding="utf-8"))
        emb = _shapes(a / "Embed.safetensors")
        dec = _shapes(a / "Decoder.safetensors")
        dva = _shapes(a / "DVAE.safetensors")
        voc = _shapes(a / "Vocos.safetensors")
        hidden = emb["emb_text.weight"][1]
        num_text = emb["emb_text.weight"][0]
        num_audio = emb["emb_code.0.weight"][0]
        num_vq = len([k for k in emb if re.fullmatch(r"emb_code\.\d+\.weight", k)])
        d = _convnext_config(dec, "decoder.")
        de = _convnext_config(dva, "encoder.")
        dd = _convnext_config(dva, "decoder.")
        groups = len({k.split(".")[3] for k in dva if k.startswith("vq_layer.quantizer.rvqs.")})
        codebook_dim = dva["vq_layer.quantizer.rvqs.0.project_in.weight"][0]
        n_fft = voc["head.out.weight"][0] - 2
        vdim = voc["backbone.embed.weight"][0]
        vffn = voc["backbone.convnext.0.pwconv1.weight"][0]
        vlayers = len({k.split(".")[2] for k in voc if k.startswith("backbone.convnext.")})
    except Exception as e:                      # KeyError, OSError, SafetensorError, JSON errors
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise ModelUnavailable(f"{root}: not a ChatTTS asset directory (unreadable model files: "
                               f"{type(e).__name__}: {first})") from e
    if gcfg.get("hidden_size") != hidden:
        raise ModelUnavailable(f"{root}: gpt/config.json hidden_size {gcfg.get('hidden_size')} != Embed {hidden}")
    levels = (5,) * codebook_dim if codebook_dim == 4 else C.VQ().levels
    spk_file = root / SPK_STAT_FILE
    spk_stat = spk_file.read_text(encoding="utf-8").strip() if spk_file.is_file() else C.Config.spk_stat
    return C.Config(
        path=C.Path(),
        decoder=C.Decoder(**d),
        dvae=C.DVAE(encoder=C.Decoder(**de), decoder=C.Decoder(**dd),
                    vq=C.VQ(dim=de["odim"], levels=tuple(levels), G=groups, R=4 // groups)),
        gpt=C.GPT(hidden_size=hidden, intermediate_size=gcfg.get("intermediate_size", 3072),
                  num_attention_heads=gcfg.get("num_attention_heads", 12),
                  num_hidden_layers=gcfg.get("num_hidden_layers", 20),
                  max_position_embeddings=gcfg.get("max_position_embeddings", 4096),
                  num_audio_tokens=num_audio, num_text_tokens=num_text, num_vq=num_vq),
        embed=C.Embed(hidden_size=hidden, num_audio_tokens=num_audio, num_text_tokens=num_text, num_vq=num_vq),
        vocos=C.Vocos(
            feature_extractor=C.FeatureExtractor(init_args=C.FeatureExtractorInitArgs(n_fft=n_fft)),
            backbone=C.Backbone(init_args=C.BackboneInitArgs(dim=vdim, intermediate_dim=vffn, num_layers=vlayers)),
            head=C.FourierHead(init_args=C.FourierHeadInitArgs(dim=vdim, n_fft=n_fft)),
        ),
        spk_stat=spk_stat,
    )


# ------------------------------------------------------------------------------------------ fingerprint

def fingerprint(root: Path) -> str:
    """sha256 over (relative path, sha256 of contents) of every asset file; short hex.  File hashes are
    cached in <cache>/file-hashes.json keyed by (path, size, mtime_ns) so a 1 GB model hashes once."""
    files = [*ASSET_FILES, SPK_STAT_FILE]
    h = hashlib.sha256()
    for rel in files:
        p = root / rel
        if p.is_file():
            h.update(f"{rel}\0{_file_sha256(p)}\n".encode())
    return h.hexdigest()[:FINGERPRINT_CHARS]


def _file_sha256(p: Path) -> str:
    st = p.stat()
    key = f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    store = cache_root() / "file-hashes.json"
    with _HASH_LOCK:
        try:
            known = json.loads(store.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        if key in known:
            return known[key]
        known[key] = file_sha256(p)
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(store, json.dumps(known, indent=0, sort_keys=True).encode("utf-8"))
        except OSError:
            pass                                # a read-only cache only costs re-hashing
        return known[key]


# --------------------------------------------------------------------------------------- Hugging Face

def _hf_hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _hf_cached_snapshot() -> Path | None:
    snaps = _hf_hub_cache() / f"models--{HF_REPO.replace('/', '--')}" / "snapshots"
    if not snaps.is_dir():
        return None
    good = []
    for s in snaps.iterdir():
        try:
            validate_asset_dir(s)
        except ModelUnavailable:
            continue
        good.append(s)
    return max(good, key=lambda s: s.stat().st_mtime) if good else None


def _reachable(host: str, port: int = 443, timeout: float = PROBE_TIMEOUT) -> bool:
    """TCP connect within `timeout` seconds, DNS included (run in a daemon thread: getaddrinfo ignores timeouts)."""
    ok: list[bool] = []

    def probe():
        try:
            with socket.create_connection((host, port), timeout=timeout):
                ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


def _hf_snapshot() -> Path:
    cached = _hf_cached_snapshot()
    if cached is not None:
        return cached
    hint = 'use a local asset directory instead (model="/path/to/ChatTTS")'
    if _offline():
        raise ModelUnavailable(f"{HF_REPO} is not in the Hugging Face cache ({_hf_hub_cache()}) and HF_HUB_OFFLINE "
                               f"is set; {hint}")

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = urlparse(endpoint).hostname or "huggingface.co"
    if not _reachable(host, 443 if endpoint.startswith("https") else 80):
        raise ModelUnavailable(f"cannot reach {host} to download {HF_REPO} and it is not in the Hugging Face "
                               f"cache ({_hf_hub_cache()}); {hint}")
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(HF_REPO, allow_patterns=HF_PATTERNS, cache_dir=str(_hf_hub_cache()),
                                      etag_timeout=ETAG_TIMEOUT))
    except Exception as e:                      # network, auth, disk: one line
        raise ModelUnavailable(f"downloading {HF_REPO} failed ({type(e).__name__}); {hint}") from e
    validate_asset_dir(path)
    return path
