"""The CPU back-end policy: which kernel a CPU engine's linears and decode steps run on, and int8.

    pack_path(llama, path)               # engine/cpupath.py's choice: every block projection on its kernel
    make = cpu_linear()                  # without a path: engine.kernels.GemmLinear, else oneDNN's PackedLinear,
    pack_linears(llama, make)            #   else None (MKL); every block projection packed once
    quantize_int8(llama)                 # --int8 without a path: weight-only int8 on our kernel, else W8A8 Int8Linear

The model (engine/llama.py) knows nothing of this: these functions replace a Block's nn.Linear projections and
choose its attention strategy (`attach_kernels`: engine/attention.py's CStep, CAttention or PerRow) to match.
Which path (engine/kernels.c's kind and the engine's dtype) a CPU engine runs is engine/cpupath.py's choice.
"""
from __future__ import annotations

import os

import torch  # imported lazily (by engine.codemodel users), never by engine.api
import torch.nn as nn

from engine import kernels
from engine.attention import CAttention, CStep, PerRow
from engine.kernelbuild import cpu_flags
from engine.kernels import quantize_rows, quantize_weight
from engine.llama import Llama


class Int8Linear(nn.Module):
    """W8A8 linear for CPU: int8 weights (quantize_weight), activations quantized per row (symmetric, absmax), an
    exact integer product, one fp32 rescale.  Integer accumulation is exact, so a row's result never depends on the
    other rows of the call (unlike per-tensor dynamic quantization).  The product runs in float64 (integers below
    2**53: exact in any order), not torch._int_mm: oneDNN's int8 GEMM is exact only with VNNI (its AVX2 and
    AVX-512 kernels saturate 16-bit pair sums: off by 17,563 at ONEDNN_MAX_CPU_ISA=AVX2, tests/engine/test_kernels).
    Where engine/kernels.c builds, the engine uses its int8 kinds instead (engine.kernels.GemmInt8Linear)."""

    wq: torch.Tensor              # [N, K] int8 (buffers)
    scale: torch.Tensor           # [N] fp32

    def __init__(self, linear: nn.Linear):
        super().__init__()
        wq, scale = quantize_weight(linear.weight)
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


def cpu_linear():
    """The packed fp32 linear the CPU engine uses: engine/kernels.c's GemmLinear where it builds and runs here,
    else oneDNN's PackedLinear, else None (MKL's F.linear on the dense weights)."""
    if kernels.available():
        return kernels.GemmLinear
    return PackedLinear if onednn_available() else None


def pack_linears(model: Llama, make=PackedLinear) -> Llama:
    """Replace every dense projection of every block by make(weight) (PackedLinear or engine.kernels.GemmLinear:
    CPU, fp32).  Norms and RoPE unchanged; with our GemmLinear, the model's decode steps also run on engine/kernels.c
    (attach_kernels; prefill keeps SDPA)."""
    for block in model.layers:
        for name in kernels.PROJECTIONS:
            if isinstance(getattr(block, name), nn.Linear):            # int8 ones (quantize_int8 first) stay
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


def path_linears(path) -> tuple:
    """(make, heads) for engine/cpupath.py's `path`: make(weight) packs a block projection for the path's kind
    (kind_linear), heads(weight) the code heads, in fp32 (as upstream)."""
    return kind_linear(path.kind), kind_linear(path.heads)


def pack_path(model: Llama, path) -> Llama:
    """Every block projection (dense nn.Linear) on `path`'s kernel (path_linears), and the strategy to match: the
    decode step whole in one engine/kernels.c call (attach_kernels)."""
    return pack_linears(model, path_linears(path)[0])


def attach_kernels(model: Llama) -> Llama:
    """The model's attention strategy (engine/attention.py) for its projections: where they are all
    engine/kernels.c's, decode steps whole in one call (CStep) where it supports the model, else one attention
    call per layer (CAttention); otherwise per-row SDPA (PerRow).  Called whenever the projections change
    (pack_linears, quantize_int8): a CStep points at the weights it was made for."""
    ours = all(isinstance(getattr(b, n), kernels.GemmLinear) for b in model.layers for n in kernels.PROJECTIONS)
    if ours and CStep.supports(model):
        model.attention = CStep(model)
    else:
        model.attention = CAttention() if ours else PerRow()
    return model


def quantize_int8(model: Llama) -> Llama:
    """Replace every projection of every block by an int8 one: engine.kernels.GemmInt8Linear on a CPU where our
    kernels build, else the W8A8 Int8Linear.  Norms, RoPE, attention stay fp32."""
    on_cpu = model.norm.weight.device.type == "cpu"
    ours = on_cpu and kernels.available()
    for block in model.layers:
        for name in kernels.PROJECTIONS:
            lin = getattr(block, name)
            setattr(block, name, kernels.GemmInt8Linear(*quantize_weight(lin.weight)) if ours else Int8Linear(lin))
    return attach_kernels(model)


# ------------------------------------------------------------------------------------------- the back-end's name
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


def backend_name(int8: bool = False, dtype: str = "fp32", tag: str | None = None) -> str:
    """What determines a CPU engine's bits besides the model and settings (engine.engine.Engine.version names
    it; no model needed): the linears' kernel and its ISA, and torch's own dispatch level (ATen's vectorized ops:
    norms, SDPA in prefill, sampling).  With a path of engine/cpupath.py, its tag: "kernels-aten_avx2" for
    engine/kernels.c's fp32 and weight-only int8 chains (on AVX2 or AVX-512: the same bits),
    "kernels_avx512bf16-aten_avx512" for its bf16 path, "kernels_avx512vnni-aten_avx512" for its W8A8 one.
    Without one (no kernels of ours, or bf16 on a CPU without AVX512_BF16): "onednn-avx2-aten_avx2": oneDNN's packed
    linears (fp32), or the W8A8 Int8Linear beside them (int8), at the ISA oneDNN dispatches to
    (ONEDNN_MAX_CPU_ISA honoured); "mkl-avx2-aten_avx2": MKL's F.linear (no oneDNN; MKL_ENABLE_INSTRUCTIONS
    honoured); bf16 on CPU runs torch's own matmul: "aten_<level>" alone."""
    aten = f"aten_{torch.backends.cpu.get_cpu_capability().lower()}"
    if tag is not None:
        return f"{tag}-{aten}"
    flags = cpu_flags()
    if dtype != "fp32":
        return aten
    if kernels.available():
        return f"kernels-{aten}"
    if onednn_available():
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
        return f"onednn-{_isa(ONEDNN_ISAS, flags, cap)}-{aten}"
    return f"mkl-{_isa(MKL_ISAS, flags, os.environ.get('MKL_ENABLE_INSTRUCTIONS'))}-{aten}"
