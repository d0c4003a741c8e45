"""The CPU back-end: which kernels a CPU engine's linears and decode steps run on — built, and named, by one object.

    backend = CpuBackend.of(path)         # engine/cpupath.py's path: every block projection on its kernel
    backend = CpuBackend.without_kernels("fp32", int8=False)   # none of ours: oneDNN's PackedLinear, else MKL
    heads = backend.pack(llama, head)     # the projections replaced, the attention strategy to match; the heads' linear
    backend.tag                           # "kernels-aten_avx2": what the engine version (and so a content key) holds

The model (engine/llama.py) knows nothing of this: a back-end replaces a Block's nn.Linear projections and
chooses its attention strategy (`attach_kernels`: engine/attention.py's CStep, CAttention or PerRow) to match.
Which back-end a CPU engine runs is engine/cpupath.py's choice (or a book's record: engine.api.EngineRecord).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch  # imported lazily (by engine.codemodel users), never by engine.api
import torch.nn as nn

from engine import kernels
from engine.attention import CAttention, CStep, PerRow
from engine.kernelbuild import cpu_flags
from engine.kernels import quantize_rows, quantize_weight
from engine.llama import Llama

NO_KERNELS = "off"                # the name of the back-end without our kernels (what CHATTTS_RENDER_KERNELS=off runs)


@dataclass(frozen=True)
class CpuPath:
    name: str                     # what CHATTTS_RENDER_KERNELS and the benchmarks call it
    dtype: str                    # the engine's dtype: "fp32" | "bf16" (int8 paths are fp32 engines, --int8)
    int8: bool
    kind: str                     # engine/kernels.c's kind of the block projections
    heads: str                    # the kind of the code heads (fp32, as upstream; the same bits either way)
    tag: str                      # the engine version's name of its arithmetic: paths of the same bits share one


class Int8Linear(nn.Module):
    """W8A8 linear for CPU: int8 weights (quantize_weight), activations quantized per row (symmetric, absmax), an
    exact integer product, one fp32 rescale.  Integer accumulation is exact, so a row's result never depends on the
    other rows of the call (unlike per-tensor dynamic quantization).  The product runs in float64 (integers below
    2**53: exact in any order), not torch._int_mm: oneDNN's int8 GEMM is exact only with VNNI (its AVX2 and
    AVX-512 kernels saturate 16-bit pair sums: off by 17,563 at ONEDNN_MAX_CPU_ISA=AVX2, tests/engine/test_kernels).
    Where engine/kernels.c builds, the engine uses its int8 kinds instead (engine.kernels.GemmInt8Linear)."""

    wq: torch.Tensor              # [N, K] int8 (buffers)
    scale: torch.Tensor           # [N] fp32

    def __init__(self, linear: nn.Linear | torch.Tensor):                   # or its weight [N, K]
        super().__init__()
        wq, scale = quantize_weight(linear.weight if isinstance(linear, nn.Module) else linear)
        self.register_buffer("wq", wq)
        self.register_buffer("scale", scale)
        self.in_features, self.out_features = wq.shape[1], wq.shape[0]

    def forward(self, x):                                                        # x [..., K] fp32
        shape = x.shape
        xq, s = quantize_rows(x.reshape(-1, shape[-1]).float())                  # [M, K] int8, [M, 1]
        acc = xq.double() @ self.wq.t().double()                                 # [M, N] exact integers
        return (acc.float() * (s * self.scale)).to(x.dtype).view(*shape[:-1], self.out_features)


PACK_ROWS_HINT = 32               # rows oneDNN is told to expect when it reorders a weight (the layout; measured:
                                  # the result bits do not depend on it, only the speed, little)


def onednn_available() -> bool:
    """Whether this torch has oneDNN's packed fp32 linear (`mkldnn._reorder_linear_weight` and
    `mkldnn._linear_pointwise`) and it runs here: a tiny weight packed and applied once."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    try:
        PackedLinear(torch.ones(8, 8))(torch.ones(4, 8))
    except RuntimeError:
        return False
    return True


class PackedLinear(nn.Module):
    """fp32 linear through oneDNN with the weight reordered once into its blocked layout (CPU).  On an AVX2 CPU
    MKL's sgemm streams a weight at 5-7 GB/s for 4-16 rows; oneDNN's packed kernel about twice that.  It takes
    rows in blocks of 6, and a row's bits are the same in any block of 4-6 rows (a block of 1-3 differs):
    engine.codemodel.invariant_sizes measures that, as for MKL.  The dense `weight` stays (the HF model shares
    it: share_weights_with_hf); `packed` is oneDNN's opaque copy."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = weight                                                     # [N, K] fp32, dense
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS_HINT)   # [N, K] mkldnn
        self.out_features, self.in_features = weight.shape

    def forward(self, x):                                                        # x [..., K] fp32 -> [..., N]
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")


def pack_linears(model: Llama, make=PackedLinear) -> Llama:
    """Replace every dense projection of every block by make(weight) (PackedLinear, Int8Linear or a kind of
    engine/kernels.c: kind_linear; None keeps them dense), then choose the model's attention strategy to match
    (attach_kernels: with our kernels the decode steps run on engine/kernels.c; prefill keeps SDPA).  Norms and RoPE
    unchanged."""
    for block in model.layers:
        for name in kernels.PROJECTIONS:
            if make is not None and isinstance(getattr(block, name), nn.Linear):
                setattr(block, name, make(getattr(block, name).weight))
    return attach_kernels(model)


def kind_linear(kind: str):
    """make(weight [N, K] fp32) -> a block projection on engine/kernels.c's `kind` (int8 kinds: the weight
    quantized per output column first, quantize_weight)."""
    if kind in kernels.GemmLinear.RUNS:
        return lambda w: kernels.GemmLinear(w, kind)
    if kind in kernels.GemmBf16Linear.RUNS:
        return lambda w: kernels.GemmBf16Linear(w, kind)
    if kind in kernels.GemmW8A8Linear.RUNS:
        return lambda w: kernels.GemmW8A8Linear(*quantize_weight(w), kind)
    return lambda w: kernels.GemmInt8Linear(*quantize_weight(w), kind)


def attach_kernels(model: Llama) -> Llama:
    """The model's attention strategy (engine/attention.py) for its projections: where they are all
    engine/kernels.c's, decode steps whole in one call (CStep) where it supports the model, else one attention
    call per layer (CAttention); otherwise per-row SDPA (PerRow).  Called whenever the projections change (by
    pack_linears, its one caller): a CStep points at the weights it was made for."""
    ours = all(isinstance(getattr(b, n), kernels.GemmLinear) for b in model.layers for n in kernels.PROJECTIONS)
    if ours and CStep.supports(model):
        model.attention = CStep(model)
    else:
        model.attention = CAttention() if ours else PerRow()
    return model


# ------------------------------------------------------------------------------------------- the back-end
# oneDNN's CPU ISAs, lowest first (ONEDNN_MAX_CPU_ISA names), each with the /proc/cpuinfo flags it needs
ONEDNN_ISAS = (("sse41", {"sse4_1"}), ("avx", {"avx"}), ("avx2", {"avx2", "fma"}),
               ("avx2_vnni", {"avx2", "fma", "avx_vnni"}),
               ("avx512_core", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}),
               ("avx512_core_vnni", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}),
               ("avx512_core_bf16", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"}),
               ("avx512_core_fp16", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
                                     "avx512_fp16"}),
               ("avx512_core_amx", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
                                    "amx_tile", "amx_bf16", "amx_int8"}))
# MKL's code paths, lowest first (MKL_ENABLE_INSTRUCTIONS names)
MKL_ISAS = (("sse4_2", {"sse4_2"}), ("avx", {"avx"}), ("avx2", {"avx2", "fma"}),
            ("avx512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}))


def _isa(table, flags: set[str], cap: str | None) -> str:
    """The highest ISA of `table` the CPU has, no higher than `cap` (an environment variable's ISA name)."""
    names = [name for name, _ in table]
    cap = (cap or "").strip().lower()
    top = names.index(cap) if cap in names else len(names) - 1
    have = [name for i, (name, need) in enumerate(table) if need <= flags and i <= top]
    return have[-1] if have else "default"


def aten_level() -> str:
    """torch's own dispatch level (ATen's vectorized ops: norms, SDPA in prefill, sampling), as a version names it."""
    return f"aten_{torch.backends.cpu.get_cpu_capability().lower()}"


@dataclass(frozen=True)
class CpuBackend:
    """One CPU engine's arithmetic, built and named in one place.  `pack` puts a model's block projections and code
    heads on its kernels; `tag` names what decides its bits besides the model and settings — the linears' kernels
    and their ISA, and torch's own dispatch level (aten_level) — which engine.engine.engine_version writes into the
    engine version (so into every content key):

        a path of engine/cpupath.py   its tag, "kernels-aten_avx2" for engine/kernels.c's fp32 and weight-only int8
                                      chains (on AVX2 or AVX-512: the same bits), "kernels_avx512bf16-aten_avx512"
                                      for its bf16 path, "kernels_avx512vnni-aten_avx512" for its W8A8 one
        NO_KERNELS, fp32 (or int8)    "onednn-avx2-aten_avx2": oneDNN's packed linears (with --int8 the W8A8
                                      Int8Linear for the block projections beside them) at the ISA oneDNN dispatches
                                      to (ONEDNN_MAX_CPU_ISA honoured); "mkl-avx2-aten_avx2": MKL's F.linear, no
                                      oneDNN (MKL_ENABLE_INSTRUCTIONS honoured)
        NO_KERNELS, bf16              torch's own bf16 matmul: "aten_<level>" alone

    Every one is exact (batch-invariant): our kernels by construction, oneDNN and MKL by the call sizes the engine
    pads to (engine.codemodel.invariant_sizes)."""
    name: str                     # the path's name (engine/cpupath.py), or NO_KERNELS
    dtype: str                    # the engine's dtype: "fp32" | "bf16"
    int8: bool
    kind: str                     # what the block projections run on: engine/kernels.c's kind, onednn, mkl or torch
    tag: str                      # the engine version's name of its arithmetic
    path: CpuPath | None = None

    @classmethod
    def of(cls, path: CpuPath) -> CpuBackend:
        return cls(path.name, path.dtype, path.int8, path.kind, f"{path.tag}-{aten_level()}", path)

    @classmethod
    def without_kernels(cls, dtype: str, int8: bool) -> CpuBackend:
        """The back-end without our kernels for this dtype (fp32 with int8): oneDNN, else MKL, or torch's bf16."""
        if dtype != "fp32":
            return cls(NO_KERNELS, dtype, int8, "torch", aten_level())
        if onednn_available():
            cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
            isa = _isa(ONEDNN_ISAS, cpu_flags(), cap)
            return cls(NO_KERNELS, dtype, int8, "onednn", f"onednn-{isa}-{aten_level()}")
        isa = _isa(MKL_ISAS, cpu_flags(), os.environ.get("MKL_ENABLE_INSTRUCTIONS"))
        return cls(NO_KERNELS, dtype, int8, "mkl", f"mkl-{isa}-{aten_level()}")

    @property
    def model_dtype(self) -> str:
        """The dtype of the model's own tensors: fp32 around our kernels (a path's bf16 is inside them), else the
        engine's."""
        return "fp32" if self.path is not None else self.dtype

    def pack(self, model: Llama, head: torch.Tensor | None = None):
        """Put `model`'s block projections on this back-end (pack_linears: the attention strategy to match) and
        return the code heads' linear for `head` [Q·V, C] fp32 (None: F.linear on it, MKL's or torch's)."""
        blocks, heads = self._linears()
        pack_linears(model, blocks)
        return heads(head) if heads is not None and head is not None else None

    def _linears(self) -> tuple:
        """(make for the block projections, make for the heads): make(weight [N, K] fp32) -> a linear; None: dense."""
        if self.path is not None:
            return kind_linear(self.path.kind), kind_linear(self.path.heads)
        dense = PackedLinear if self.kind == "onednn" else None
        return (Int8Linear if self.int8 else dense), dense
