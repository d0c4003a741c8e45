"""ONNX graphs of our engine's model calls, exported per model fingerprint and dtype into the model cache.

    paths = export_graphs("random-tiny")                 # {"prefill": Path, "decode": …, "heads": …, "vocoder": …}
    paths = export_graphs(loaded, out_dir, dtype="fp16") # a LoadedModel (engine.loader), into a folder of your own
    python -m engine.onnxgraph random-tiny [--out DIR] [--dtype fp32|fp16]

Exported with torch.onnx.export(dynamo=True) from OUR modules, the same weights and shapes the torch engine runs;
embeddings and sampling stay in torch.  A folder is written whole (engine.atomic.atomic_dir): a half-written export
is never used.  The graphs' inputs and outputs, the KV cache, positions, the ISTFT and the files: docs/modules.md,
"The ONNX graphs".
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import re
import sys
import warnings
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

from engine.api import ModelUnavailable
from engine.assets import cache_root
from engine.atomic import atomic_dir
from engine.codemodel import CodeModel
from engine.llama import Block, _rms_norm
from engine.loader import load_chattts

OPSET = 18                          # ONNX opset: TensorRT 10's parser and onnxruntime >= 1.14 take it
GRAPH_VERSION = "2"                 # bump whenever the exported graphs change (a new cache folder)
NAMES = ("prefill", "decode", "heads", "vocoder")
DTYPES = ("fp32", "fp16")           # fp32: the CPU provider; fp16: CUDA / TensorRT
INFO_FILE = "graphs.json"
EXAMPLE_BATCH, EXAMPLE_LEN, EXAMPLE_CACHE, EXAMPLE_STEPS = 2, 5, 7, 3   # export-time sizes (>= 2: never specialized)


def input_axes(name: str, layers: int) -> dict[str, dict[int, str]]:
    """Graph `name`'s inputs, in order, each with its dynamic axes {axis: name}."""
    if name == "prefill":
        return {"x": {0: "batch", 1: "length"}, "pos": {0: "batch", 1: "length"}}
    if name == "decode":
        past = {f"past_{kv}_{i}": {0: "batch", 2: "cache"} for kv in "kv" for i in range(layers)}
        return {"x": {0: "batch"}, "pos": {0: "batch"}, **past}
    return {"hidden": {0: "batch"}} if name == "heads" else {"hidden": {0: "batch", 1: "steps"}}


def output_axes(name: str, layers: int) -> dict[str, dict[int, str]]:
    """Graph `name`'s outputs, in order, each with its dynamic axes."""
    if name in ("prefill", "decode"):
        new = {0: "batch", 2: "length"} if name == "prefill" else {0: "batch"}
        return {"hidden": {0: "batch"}, **{f"{kv}_{i}": new for kv in "kv" for i in range(layers)}}
    return {"logits": {0: "batch"}} if name == "heads" else {"wav": {0: "batch"}}


def graph_dir(fingerprint: str, dtype: str, root: Path | None = None) -> Path:
    """Where the graphs of a model fingerprint and dtype live in the model cache (engine.assets.cache_root)."""
    base = Path(root) if root is not None else cache_root() / "onnx"
    return base / f"{fingerprint}-{dtype}-o{OPSET}-g{GRAPH_VERSION}"


def complete(folder: Path) -> bool:
    """Every graph and the info file are there (a folder is only ever renamed into place whole)."""
    return (folder / INFO_FILE).is_file() and all((folder / f"{n}.onnx").is_file() for n in NAMES)


def graph_paths(folder: Path) -> dict[str, Path]:
    return {n: Path(folder) / f"{n}.onnx" for n in NAMES}


# ------------------------------------------------------------------------------------------ the modules exported
def modules(loaded, dtype: str) -> dict[str, Any]:
    """The torch modules behind each graph, built from `loaded` (a fresh, unpacked CodeModel in `dtype`)."""
    tdtype = {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    cm = CodeModel.from_chattts(loaded.chat.gpt, loaded.embed, loaded.tokenizer.spk_emb_ids, "cpu", tdtype)
    llama = cm.llama

    s = llama.s
    rep = s.heads // s.kv_heads
    blocks = cast("list[Block]", list(llama.layers))                                 # (a ModuleList's items)

    def heads(t):                                                                     # [B, Hkv, ., D] -> H heads
        return t.repeat_interleave(rep, 1) if rep > 1 else t

    def attend_past(q, k, v, past_k, past_v, valid):
        """q [B, H, 1, D]; the new k, v [B, Hkv, 1, D]; past [B, Hkv, S, D] valid [B, S] -> [B, H, 1, D]: softmax over
        the valid past and the new key, as SDPA over their concatenation, without building it."""
        scale = 1.0 / math.sqrt(s.head_dim)
        past = (q @ heads(past_k).transpose(2, 3)) * scale                           # [B, H, 1, S]
        past = past.masked_fill(~valid[:, None, None, :], -torch.inf)
        new = (q * heads(k)).sum(-1, keepdim=True) * scale                           # [B, H, 1, 1]
        p = torch.softmax(torch.cat([past, new], -1).float(), -1).to(q.dtype)       # [B, H, 1, S + 1]
        return p[..., :-1] @ heads(past_v) + p[..., -1:] * heads(v)

    def layers(x, pos, past_k, past_v, valid):
        cos, sin = llama.cos[pos].unsqueeze(2), llama.sin[pos].unsqueeze(2)          # [B, L, 1, D] fp32
        ks, vs = [], []
        for i, blk in enumerate(blocks):
            q, k, v = blk.project(x, cos, sin)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)         # [B, H(kv), L, D]
            if past_k is None:                                                        # prefill: causal, no past
                L = x.shape[1]
                i_ = torch.arange(L, device=x.device)
                o = F.scaled_dot_product_attention(q, heads(k), heads(v), attn_mask=i_[None, :] <= i_[:, None])
            else:
                o = attend_past(q, k, v, past_k[i], past_v[i], valid)
            x = blk.finish(x, o)                                                      # o [B, H, L, D]
            ks.append(k)
            vs.append(v)
        hidden = _rms_norm(x[:, -1], llama.norm.weight, s.eps).float()                # [B, C]
        return hidden, tuple(ks), tuple(vs)

    class Prefill(nn.Module):
        def __init__(self):
            super().__init__()
            self.llama = llama

        def forward(self, x, pos):
            hidden, ks, vs = layers(x, pos, None, None, None)
            return (hidden, *ks, *vs)

    class Decode(nn.Module):
        def __init__(self):
            super().__init__()
            self.llama = llama

        def forward(self, x, pos, past_k: list, past_v: list):
            valid = torch.arange(past_k[0].shape[2], device=x.device)[None, :] < pos      # [B, S]: index < pos
            hidden, ks, vs = layers(x, pos, past_k, past_v, valid)
            return (hidden, *ks, *vs)

    class Heads(nn.Module):
        head: torch.Tensor

        def __init__(self):
            super().__init__()
            self.register_buffer("head", cm.head.clone())                              # [Q·V, C] fp32

        def forward(self, hidden):
            return F.linear(hidden, self.head).view(-1, cm.Q, cm.V)

    return {"prefill": Prefill().eval(), "decode": Decode().eval(), "heads": Heads().eval(),
            "vocoder": Vocoder(loaded.decoder, loaded.vocos).eval(), "model": cm}


def _istft_basis(n_fft: int, window):
    """(re, im) [n_fft, n_fft/2 + 1] fp32: frame = re @ Re(X) + im @ Im(X) is torch.fft.irfft(X, n_fft) * window
    (DC and Nyquist bins count once and lose their imaginary part, as irfft does)."""
    n = torch.arange(n_fft, dtype=torch.float64)[:, None]
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[None, :]
    ang = 2 * math.pi * ((n * k) % n_fft) / n_fft
    c = torch.full_like(k, 2.0)
    c[0, 0] = c[0, -1] = 1.0
    w = window.double()[:, None] / n_fft
    im = -c * torch.sin(ang) * w
    im[:, 0] = im[:, -1] = 0.0
    return (c * torch.cos(ang) * w).float(), im.float()


def _vocoder_class():
    class _Vocoder(nn.Module):
        """ChatTTS's Decoder (GPT hidden -> mel) and Vocos (backbone, ISTFT head) as one exportable module.  The
        head's torch.istft (centre padding) becomes an inverse-DFT MatMul, an overlap-add of n_fft/hop shifted
        chunks and the window-envelope division, trimmed by n_fft/2 on both sides (torch.istft's own steps)."""

        re: torch.Tensor              # buffers: the inverse DFT [n_fft, n_fft/2 + 1] (real, imaginary parts)
        im: torch.Tensor
        wsq: torch.Tensor             # the window squared [k, hop]

        def __init__(self, decoder, vocos):
            super().__init__()
            self.decoder, self.backbone, self.out = decoder, vocos.backbone, vocos.head.out
            ist = vocos.head.istft
            self.n_fft, self.hop = ist.n_fft, ist.hop_length
            if ist.padding != "center" or ist.win_length != ist.n_fft or ist.n_fft % ist.hop_length:
                raise ValueError(f"Vocos ISTFT (padding {ist.padding}, n_fft {ist.n_fft}, win {ist.win_length}, "
                                 f"hop {ist.hop_length}): only centre padding, win = n_fft = k·hop is exported")
            window = ist.window.detach().float().cpu()
            real, imag = _istft_basis(self.n_fft, window)
            self.register_buffer("re", real)
            self.register_buffer("im", imag)
            self.register_buffer("wsq", (window ** 2).view(self.n_fft // self.hop, self.hop))   # [k, hop]

        def _overlap_add(self, frames):
            """frames [B, k·hop, F] -> [B, hop·(F + k - 1)]: chunk c of frame j lands in output block j + c."""
            B, _, Fr = frames.shape
            k = self.n_fft // self.hop
            parts = frames.reshape(B, k, self.hop, Fr)
            out = torch.nn.functional.pad(parts[:, 0], (0, k - 1))                      # [B, hop, F + k - 1]
            for c in range(1, k):
                out = out + torch.nn.functional.pad(parts[:, c], (c, k - 1 - c))
            return out.transpose(1, 2).reshape(B, -1)

        def forward(self, hidden):                                                      # [B, T, C] fp32
            mel = self.decoder(hidden.transpose(1, 2))                                  # [B, 100, 2T]
            x = self.out(self.backbone(mel)).transpose(1, 2)                            # [B, n_fft + 2, F]
            mag, p = x.chunk(2, dim=1)
            mag = torch.clip(torch.exp(mag), max=1e2)
            frames = self.re @ (mag * torch.cos(p)) + self.im @ (mag * torch.sin(p))    # [B, n_fft, F]
            y = self._overlap_add(frames)
            Fr = frames.shape[2]
            env = self._overlap_add(self.wsq.reshape(1, -1, 1).expand(1, self.n_fft, Fr))   # [1, hop·(F+k-1)]
            half = self.n_fft // 2
            n = self.hop * (Fr - 1)
            return (y / env)[:, half:half + n]

    return _Vocoder


def Vocoder(decoder, vocos):
    return _vocoder_class()(decoder, vocos)


def examples(name: str, cm, dtype) -> tuple:
    s, B, L, S = cm.llama.s, EXAMPLE_BATCH, EXAMPLE_LEN, EXAMPLE_CACHE
    gen = torch.Generator().manual_seed(0)
    if name == "prefill":
        return (torch.randn(B, L, s.hidden, generator=gen).to(dtype), torch.arange(L).repeat(B, 1))
    if name == "decode":
        past = [torch.randn(B, s.kv_heads, S, s.head_dim, generator=gen).to(dtype) for _ in range(2 * s.layers)]
        return (torch.randn(B, 1, s.hidden, generator=gen).to(dtype), torch.tensor([[S - 2], [S]]),
                past[:s.layers], past[s.layers:])
    if name == "heads":
        return (torch.randn(B, s.hidden, generator=gen),)
    return (torch.randn(B, EXAMPLE_STEPS, s.hidden, generator=gen),)


def _export(module, args: tuple, name: str, path: Path, layers: int) -> None:
    ins = input_axes(name, layers)
    flat = [dict.fromkeys(axes, Dim.DYNAMIC) for axes in ins.values()]
    shapes = tuple(flat) if name != "decode" else (flat[0], flat[1], flat[2:2 + layers], flat[2 + layers:])
    prog = torch.onnx.export(module, args, dynamo=True, opset_version=OPSET, input_names=list(ins),
                             output_names=list(output_axes(name, layers)), dynamic_shapes=shapes, verbose=False,
                             optimize=True)
    if prog is None:                                   # (dynamo=True always gives one)
        raise RuntimeError(f"torch.onnx.export gave no program for the {name} graph")
    prog.save(str(path), external_data=False)
    _name_axes(path, name, layers)


def _name_axes(path: Path, name: str, layers: int) -> None:
    """Give every dynamic axis its name (batch, length, cache, steps) in place of the exporter's symbols (s11,
    512*s81 - 256, ...), on the inputs and wherever else the symbol appears (outputs, value infos)."""
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    rename = {}
    for inp in graph.input:
        for ax, d in input_axes(name, layers)[inp.name].items():
            rename[inp.type.tensor_type.shape.dim[ax].dim_param] = d
    sym = re.compile(r"\bs\d+\b")
    for v in (*graph.input, *graph.output, *graph.value_info):
        for dim in v.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = sym.sub(lambda m: rename.get(m.group(0), m.group(0)), dim.dim_param)
    onnx.save(model, str(path))


def export_graphs(model_name_or_loaded, out_dir: Path | str | None = None, dtype: str = "fp32") -> dict[str, Path]:
    """Export (once) the graphs of a model: `model_name_or_loaded` an EngineOptions.model spec ("random-tiny",
    "hf", an asset dir) or a LoadedModel; into `out_dir` (default: the model cache, graph_dir).  A complete
    folder is reused as it is.  Returns {name: path of the .onnx file} for NAMES."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: the graphs are exported in one of {', '.join(DTYPES)}")
    loaded = load_chattts(model_name_or_loaded) if isinstance(model_name_or_loaded, str) else model_name_or_loaded
    folder = Path(out_dir) if out_dir is not None else graph_dir(loaded.fingerprint, dtype)
    if complete(folder):
        return graph_paths(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    mods = modules(loaded, dtype)
    cm = mods.pop("model")
    tdtype = {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    import onnx
    import onnxruntime

    try:
        with atomic_dir(folder, replace_if=lambda f: not complete(f)) as tmp, torch.no_grad(), _quiet():
            for name in NAMES:
                _export(mods[name], examples(name, cm, tdtype), name, Path(tmp) / f"{name}.onnx", cm.llama.s.layers)
            s = cm.llama.s
            info = {"graph_version": GRAPH_VERSION, "opset": OPSET, "dtype": dtype, "fingerprint": loaded.fingerprint,
                    "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                    "layers": s.layers, "kv_heads": s.kv_heads, "head_dim": s.head_dim, "hidden": s.hidden,
                    "max_pos": s.max_pos, "Q": cm.Q, "V": cm.V,
                    "inputs": {n: input_axes(n, s.layers) for n in NAMES},
                    "outputs": {n: output_axes(n, s.layers) for n in NAMES}}
            (Path(tmp) / INFO_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    except FileExistsError:                       # another process finished the same export first
        if not complete(folder):
            raise
    return graph_paths(folder)


def read_info(folder: Path) -> dict:
    return json.loads((Path(folder) / INFO_FILE).read_text(encoding="utf-8"))


class _quiet:
    """The exporter's progress lines (print and logging) kept off stdout: a render's output stays its own."""

    def __enter__(self):
        self._log = logging.getLogger("torch.onnx")
        self._level = self._log.level
        self._log.setLevel(logging.ERROR)
        self._out = contextlib.redirect_stdout(io.StringIO())
        self._out.__enter__()
        self._warn = warnings.catch_warnings()
        self._warn.__enter__()
        warnings.simplefilter("ignore")
        return self

    def __exit__(self, *exc):
        self._warn.__exit__(*exc)
        self._out.__exit__(*exc)
        self._log.setLevel(self._level)
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.onnxgraph", description="Export the ONNX graphs of a model.")
    p.add_argument("model", help="hf, a local ChatTTS asset dir, random-tiny or random-full")
    p.add_argument("--out", default=None, help="the folder to write (default: the model cache's onnx/ folder)")
    p.add_argument("--dtype", choices=DTYPES, default="fp32")
    a = p.parse_args(argv)
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        print("engine.onnxgraph: the onnx extra is not installed (pip install 'chattts-render[onnx]')",
              file=sys.stderr)
        return 2
    try:
        paths = export_graphs(a.model, a.out, a.dtype)
    except ModelUnavailable as e:
        print(f"engine.onnxgraph: {e}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
