"""engine/kernels.c's kinds as test parameters: each runs where this CPU and build have it and is skipped, naming
what is missing, elsewhere; and the reference a kind's product is checked against, computed without the kernels."""
from __future__ import annotations

import pytest
import torch

from engine import kernelbuild, kernels

U = 2.0 ** -24                     # fp32's unit roundoff


def why_not(kind: str) -> str | None:
    """Why `kind` cannot run here (None: it can)."""
    if not kernels.available():
        return "engine/kernels.c is not available here (no AVX2/FMA or no C compiler)"
    if kind in kernels.kinds():
        return None
    if missing := kernels.KINDS[kind][1] - kernelbuild.cpu_flags():
        return f"this CPU has no {kind} kernel: it lacks {' '.join(sorted(missing))}"
    return f"engine/kernels.c's {kind} kernel is not built by this compiler or failed its self-check (see the log)"


def kind_param(kind: str):
    reason = why_not(kind)
    return pytest.param(kind, id=kind, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


KIND_PARAMS = [kind_param(k) for k in kernels.KINDS]


def reference(kind: str, x: torch.Tensor, wq: torch.Tensor, scale: torch.Tensor | None = None):
    """(the product in float64 of the operands as `kind` rounds them, its error bound) for x [M, K] fp32 times
    the weight [N, K] the kernel is given (fp32, or int8 with column scales [N]).  The rounding, written here
    with torch's own conversions and not the kernels': bf16 kinds round x and the weight to bf16 (to nearest even);
    the W8A8 kinds quantize each row of x to int8 (its absmax / 127, to nearest even, clamped to +-127) — which kinds
    round what is kernels.ACTIVATIONS (AMX tiles round as their AVX-512 kinds: "amx_bf16", "amx_i8").  The bound: every
    kind sums in fp32 one chain over k of exact products (fp32 x fp32 in an FMA, bf16 x bf16, int8 x int8 in
    int32 exactly), at most one rounding per k, then at most 3 roundings of the result (int32 -> fp32, row x
    column scale, the product): |y - ref| <= gamma_K * sum_k |x_k w_k| + 3 u |ref|, gamma_K = K u / (1 - K u)."""
    w = wq.double() * scale.double()[:, None] if scale is not None else wq.double()
    xd = x.double()
    if kernels.ACTIVATIONS.get(kind) == "bf16":
        xd, w = x.bfloat16().double(), wq.bfloat16().double()
    if kernels.ACTIVATIONS.get(kind) == "int8":
        s = (x.abs().amax(1, keepdim=True) / 127.0).clamp_min(1e-12)
        xd = torch.round(x / s).clamp(-127, 127).double() * s.double()
    K = x.shape[1]
    gamma = K * U / (1 - K * U)
    ref = xd @ w.t()
    return ref, gamma * (xd.abs() @ w.abs().t()) + 3 * U * ref.abs()
