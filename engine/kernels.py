"""Our fp32 kernels for the CPU decode step: engine/kernels.c (AVX2 + FMA), built once per machine with the C compiler.

    if kernels.available():
        lin = GemmLinear(weight)          # weight [N, K] fp32; packs it once
        y = lin(x)                        # x [..., K] fp32 -> [..., N]
        q8 = GemmInt8Linear(linear)       # --int8: int8 weights, fp32 activations (a quarter of the bytes)
        attend = decode_attention(slots, lens)     # one step's rows: cache slots [B], valid lengths
        o = attend(q, k_cache, v_cache)            # q [B, H, 1, D] -> [B, H, 1, D], each row over its own prefix
        step = DecodeStep(llama)                   # a Llama whose projections are all GemmLinear (or all int8)
        h = step(x, pos, cache, slots, lens)       # x [B, 1, C] -> [B, 1, C]: every layer and the final norm

**The linear.**  The decode step multiplies a few rows by ~750 MB of GPT weights, so it is bound by how fast the weights
stream from memory.  On this project's AVX2 machines oneDNN's packed kernel reads them at ~12 GB/s at 4-16 rows
and MKL's sgemm at 5-7 GB/s, while memory gives ~27 GB/s; this kernel streams each weight once per call in
16-column blocks (measured with 20 layers' distinct weights, 2 threads: 4 rows 34 ms vs oneDNN 57, 16 rows 52 vs
80, 32 rows 86 vs 105).  And every output is one in-order chain of fused multiply-adds, so a row's bits depend
on nothing else in the call: any call size is batch-invariant (no padding rows) and the thread count does not
matter either (engine/generate.py measures it all the same).

**The step.**  chattts_step runs a whole decode step of the GPT in one call and one OpenMP team: per layer the
RMSNorm, the projections, RoPE, the cache writes, the attention, SiLU·up and the residual adds, then the final
norm.  Through torch those were ~30 small ops per layer, each a dispatch and some an OpenMP fork (16 ms of a 50 ms
step at 4 rows); with them in C the step's "other" is ~3 ms, the Python around the step included
(benchmarks/README.md).  Per row, every phase is done by one thread in a fixed order.

**The attention** of a decode step (one query per row) over each row's own prefix of the KV cache, all rows in
one call (the exact path ran one SDPA call per row and layer): per (row, head) the scores stream the keys, a
vectorized exp weighs them, the values stream once; every (row, head) is computed in an order fixed by its
length alone, so rows stay batch-invariant.  Measured at 32 rows of 200-975 keys, 20 layers: the per-row SDPA
loop ~160 ms per step (memory-bound: 2.3 GB of fp32 keys and values).

The shared library is compiled from kernels.c with `$CC` (or cc/gcc) into `<cache_root()>/kernels/` on first use,
named by a hash of the source, the flags and the compiler, and loaded with ctypes; its threads are OpenMP's (the
library links libgomp, the one torch's CPU build already loaded).  Not available — and the engine falls back to
oneDNN's linear and per-row SDPA — without AVX2/FMA, without a C compiler, when the build or a self-check fails, or with
CHATTTS_RENDER_KERNELS=off.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import threading
from pathlib import Path

import torch                      # imported lazily (by engine.cpu users), never by engine.api
import torch.nn as nn

SOURCE = Path(__file__).with_name("kernels.c")
CFLAGS = ("-O3", "-mavx2", "-mfma", "-fopenmp", "-fPIC", "-shared")   # no -ffast-math: the FMA chains stay in order
ENV = "CHATTTS_RENDER_KERNELS"    # "off": never use these kernels (the engine then uses oneDNN and SDPA)
BUILD_TIMEOUT = 120               # s
GEMM_RANGE = "gemm"               # record_function name of a linear while the torch profiler runs (benchmarks/limits;
                                  # the attention runs inside engine/llama.py's "attention" range)
COLUMN_ALIGN = 8                  # the kernel's output columns come in blocks of 16 and a last block of 8

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_LIB: list = []                   # [ctypes library or None] once tried


def _cpu_ok() -> bool:
    """x86-64 with AVX2 and FMA (Linux: /proc/cpuinfo; elsewhere torch's own dispatch level)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
        return {"avx2", "fma"} <= set(flags.split(":", 1)[1].split())
    except (OSError, StopIteration):
        return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def _compiler() -> str | None:
    cc = os.environ.get("CC")
    return shutil.which(cc) if cc else (shutil.which("cc") or shutil.which("gcc"))


def build(cache: Path | None = None) -> Path:
    """Compile kernels.c (once per source, flags and compiler) into `cache` (default <cache_root()>/kernels) and
    return the shared library's path.  Raises RuntimeError when there is no compiler or the build fails."""
    from engine.assets import cache_root
    from engine.atomic import atomic_path

    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or $CC)")
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join((cc,) + CFLAGS).encode()).hexdigest()[:16]
    folder = Path(cache) if cache is not None else cache_root() / "kernels"
    lib = folder / f"kernels-{digest}.so"
    if lib.is_file():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(lib) as tmp:                      # two processes building at once: each renames its own
        r = subprocess.run([cc, *CFLAGS, str(SOURCE), "-o", str(tmp)], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT)
        if r.returncode != 0:
            raise RuntimeError(f"{cc} {SOURCE.name}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    return lib


def _load():
    """The checked ctypes library, or None (see the module docstring); tried once per process."""
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if not _cpu_ok():
        return None
    try:
        lib = ctypes.CDLL(str(build()))
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log.warning("engine/kernels.c not usable (%s): the CPU engine uses oneDNN instead", e)
        return None
    P, L = ctypes.c_void_p, ctypes.c_long
    lib.chattts_pack.argtypes = [P, L, L, P]
    lib.chattts_pack.restype = None
    lib.chattts_gemm.argtypes = [P, L, L, P, L, P, ctypes.c_int]
    lib.chattts_gemm.restype = None
    lib.chattts_pack_q8.argtypes = [P, L, L, P]
    lib.chattts_pack_q8.restype = None
    lib.chattts_gemm_q8.argtypes = [P, L, L, P, P, L, P, ctypes.c_int]
    lib.chattts_gemm_q8.restype = None
    lib.chattts_attend.argtypes = [P, P, P, L, L, L, L, L, P, P, ctypes.c_float, P, ctypes.c_int]
    lib.chattts_attend.restype = None
    lib.chattts_step.argtypes = [P, L, L, L, L, L, L, L, ctypes.c_float, P, P, P, P, ctypes.c_int, L, P, P, P, P, P,
                                 P, ctypes.c_int, P]
    lib.chattts_step.restype = None
    return lib


def library():
    with _LOCK:
        if not _LIB:
            lib = _load()
            _LIB.append(lib if lib is None or _self_check(lib) else None)
        return _LIB[0]


def available() -> bool:
    """Whether GemmLinear and decode_attention work here (builds the kernels on first call)."""
    return library() is not None


def _self_check(lib) -> bool:
    """The built kernels agree with torch on small problems (the linear with an 8-column tail and a ragged row
    chunk; the attention with a padding row and lengths that are not multiples of 8)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(40, 37, generator=g), torch.randn(7, 37, generator=g)
    ok = torch.allclose(_apply(lib, x, _pack(lib, w), 40), x @ w.t(), atol=1e-4, rtol=1e-4)
    k, v, q = torch.randn(3, 2, 24, 16, generator=g), torch.randn(3, 2, 24, 16, generator=g), torch.randn(2, 2, 1, 16)
    o = _attend(lib, q, k, v, torch.tensor([2, 0]), torch.tensor([19, 0]))
    ref = F.scaled_dot_product_attention(q[:1], k[2:, :, :19], v[2:, :, :19])
    ok = ok and torch.allclose(o[:1], ref, atol=1e-5, rtol=1e-4) and not o[1].any()
    if not ok:
        log.warning("engine/kernels.c disagrees with torch here: the CPU engine uses oneDNN instead")
    return ok


def _pad_rows(t: torch.Tensor, fill: float = 0) -> torch.Tensor:
    """t [N, ...] with rows of `fill` up to a multiple of COLUMN_ALIGN (the kernel's output column blocks)."""
    n = t.shape[0]
    if n % COLUMN_ALIGN == 0:
        return t.contiguous()
    return torch.cat([t, t.new_full((COLUMN_ALIGN - n % COLUMN_ALIGN, *t.shape[1:]), fill)]).contiguous()


def _pack(lib, weight: torch.Tensor) -> torch.Tensor:
    """weight [N, K] fp32 or int8 -> the blocked layout (N padded with zero columns), flat, same dtype."""
    w = _pad_rows(weight.detach() if weight.dtype == torch.int8 else weight.detach().float())
    packed = torch.empty(w.numel(), dtype=w.dtype)
    (lib.chattts_pack_q8 if w.dtype == torch.int8 else lib.chattts_pack)(w.data_ptr(), w.shape[0], w.shape[1],
                                                                         packed.data_ptr())
    return packed


def _apply(lib, x: torch.Tensor, packed: torch.Tensor, n: int, scale: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] fp32 times a packed weight -> [..., n]; int8 weights with their (padded) column scales."""
    k = x.shape[-1]
    x2 = x.reshape(-1, k)
    if x2.dtype != torch.float32 or not x2.is_contiguous():
        x2 = x2.float().contiguous()
    n_pad = packed.numel() // k
    y = torch.empty(x2.shape[0], n_pad)
    if scale is None:
        lib.chattts_gemm(x2.data_ptr(), x2.shape[0], k, packed.data_ptr(), n_pad, y.data_ptr(),
                         torch.get_num_threads())
    else:
        lib.chattts_gemm_q8(x2.data_ptr(), x2.shape[0], k, packed.data_ptr(), scale.data_ptr(), n_pad,
                            y.data_ptr(), torch.get_num_threads())
    if n_pad != n:
        y = y[:, :n].contiguous()
    return y.view(*x.shape[:-1], n)


def _attend(lib, q, k_cache, v_cache, slots: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    B, H, L, D = q.shape
    _, hkv, S, _ = k_cache.shape
    if L != 1 or D % 8 or H % hkv or q.dtype != torch.float32 or k_cache.dtype != torch.float32:
        raise ValueError(f"decode attention needs one fp32 query per row and D % 8 == 0 (q {tuple(q.shape)})")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("decode attention needs contiguous caches")
    qc = q.contiguous()
    out = torch.empty(B, H, 1, D)
    lib.chattts_attend(qc.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), B, H, hkv, S, D,
                       slots.data_ptr(), lens.data_ptr(), D ** -0.5, out.data_ptr(), torch.get_num_threads())
    return out


def decode_attention(slots: torch.Tensor, lens: list[int]):
    """attend(q [B, H, 1, D], k_cache, v_cache [slots, Hkv, S, D]) -> [B, H, 1, D] for one decode step's rows:
    row b over cache[slots[b], :, :lens[b]] (lens[b] == 0: a padding row, zeros).  engine.llama.Llama.forward
    makes one per step and every layer calls it."""
    lib = library()
    sl = slots.to(torch.int64).contiguous()
    ln = torch.tensor(lens, dtype=torch.int64)
    if sl.shape != ln.shape:
        raise ValueError(f"{sl.numel()} slots for {ln.numel()} lengths")
    return lambda q, k_cache, v_cache: _attend(lib, q, k_cache, v_cache, sl, ln)


class GemmLinear(nn.Module):
    """fp32 linear through engine/kernels.c with the weight packed once (CPU).  The dense `weight` stays (the HF
    model shares it: engine.codemodel.share_weights_with_hf); `packed` is the kernel's blocked copy."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.lib = library()
        if self.lib is None:
            raise RuntimeError("engine/kernels.c is not available here (see engine.kernels.available)")
        self.weight = weight                                             # [N, K] fp32, dense
        self.out_features, self.in_features = weight.shape
        self.packed = _pack(self.lib, weight)                            # [ceil8(N) * K] blocked

    scale = None                                                         # fp32 weights: no column scales

    def forward(self, x):                                                # x [..., K] fp32 -> [..., N]
        if torch._C._autograd._profiler_enabled():                      # a range the profile counts as GEMM
            with torch.profiler.record_function(GEMM_RANGE):
                return _apply(self.lib, x, self.packed, self.out_features, self.scale)
        return _apply(self.lib, x, self.packed, self.out_features, self.scale)


class GemmInt8Linear(GemmLinear):
    """int8 weights with a scale per output column (engine.cpu.quantize_weight: per output channel, symmetric),
    fp32 activations and sums, through engine/kernels.c (CPU): a step streams a quarter of the fp32 weight bytes.
    Weight-only, so unlike the W8A8 engine.cpu.Int8Linear the activations are not rounded; batch-invariant like
    GemmLinear."""

    def __init__(self, wq: torch.Tensor, scale: torch.Tensor):           # wq [N, K] int8, scale [N] fp32
        nn.Module.__init__(self)
        self.lib = library()
        if self.lib is None:
            raise RuntimeError("engine/kernels.c is not available here (see engine.kernels.available)")
        self.out_features, self.in_features = wq.shape
        self.packed = _pack(self.lib, wq)                                # [ceil8(N) * K] int8, blocked
        self.scale = _pad_rows(scale, 1.0)                               # [ceil8(N)] fp32


PROJECTIONS = ("wqkv", "wo", "w13", "w2")   # a Block's linears, in chattts_step's table order


class DecodeStep:
    """engine/kernels.c's chattts_step: a decode step of the whole Llama (every layer, then the final norm) in one
    call, for a model whose block projections are all GemmLinear or all GemmInt8Linear (engine.cpu attaches it).
    The per-row path's decode step otherwise costs ~30 small torch ops per layer (norms, RoPE, cache writes,
    SiLU, residual adds) and a kernel call per projection, each with its own OpenMP fork; here one team does the
    lot.  Holds references to every tensor it points at.  `times` adds up the seconds spent in its GEMMs,
    attention and the rest (benchmarks/limits.step_profile reads them)."""

    def __init__(self, model):
        s = model.s
        self.lib = library()
        if self.lib is None or not self.supports(model):
            raise ValueError("chattts_step needs engine/kernels.c and uniform packed fp32/int8 projections")
        blocks = model.layers
        self.q8 = isinstance(blocks[0].wqkv, GemmInt8Linear)
        self.norm, self.cos, self.sin = model.norm.weight, model.cos, model.sin   # [C]; [P, D] RoPE tables
        self.keep = []                                                   # the weights the table points at
        ptrs = []
        for b in blocks:
            lins = [getattr(b, n) for n in PROJECTIONS]
            tensors = [b.attn_norm.weight, b.ffn_norm.weight] + [lin.packed for lin in lins]
            scales = [lin.scale for lin in lins] if self.q8 else []
            self.keep += tensors + scales
            ptrs += [t.data_ptr() for t in tensors] + [t.data_ptr() for t in scales] + [0] * (4 - len(scales))
        self.table = torch.tensor(ptrs, dtype=torch.int64)               # [layers * 10]
        self.s = s
        self.times = torch.zeros(3, dtype=torch.float64)                 # GEMM, attention, rest (s)

    @staticmethod
    def supports(model) -> bool:
        """fp32 on CPU, every projection the same kernel class, no padded output columns, 8-wide C, D, F."""
        s = model.s
        lins = [getattr(b, n) for b in model.layers for n in PROJECTIONS]
        kind = type(lins[0]) if lins else None
        return (kind in (GemmLinear, GemmInt8Linear) and all(type(lin) is kind for lin in lins)
                and all(lin.packed.numel() == lin.out_features * lin.in_features for lin in lins)
                and model.norm.weight.dtype == torch.float32 and model.norm.weight.device.type == "cpu"
                and s.hidden % 8 == 0 and s.head_dim % 8 == 0 and s.ffn % 8 == 0 and s.heads % s.kv_heads == 0)

    def __call__(self, x, pos, cache, slots, lengths: list[int]) -> torch.Tensor:
        """x [B, 1, C] input embeddings, pos [B, 1] positions (= the cache index written), slots [B] cache rows,
        lengths [B] valid keys after writing (0: a padding row) -> the final-normed hidden states [B, 1, C]."""
        s = self.s
        B = x.shape[0]
        S = cache.max_len
        xs = x.reshape(B, s.hidden).float().clone()                      # becomes the residual stream
        ps = pos.reshape(B).to(torch.int64).contiguous()
        sl = slots.to(torch.int64).contiguous()
        ln = torch.tensor(lengths, dtype=torch.int64)
        if x.shape[1] != 1 or ps.numel() != B or sl.numel() != B or ln.numel() != B:
            raise ValueError(f"chattts_step: {B} rows need one position, slot and length each")
        if B and (int(ps.min()) < 0 or int(ps.max()) >= min(S, self.cos.shape[0]) or int(ln.max()) > S
                  or int(sl.min()) < 0 or int(sl.max()) >= cache.slots):
            raise ValueError("chattts_step: a position, length or slot outside the cache")
        kc = torch.tensor([t.data_ptr() for t in cache.k], dtype=torch.int64)
        vc = torch.tensor([t.data_ptr() for t in cache.v], dtype=torch.int64)
        out = torch.empty(B, s.hidden)
        self.lib.chattts_step(xs.data_ptr(), B, s.hidden, s.heads, s.kv_heads, s.head_dim, s.ffn, s.layers, s.eps,
                              self.table.data_ptr(), kc.data_ptr(), vc.data_ptr(), self.norm.data_ptr(),
                              int(self.q8), S, sl.data_ptr(), ps.data_ptr(), ln.data_ptr(), self.cos.data_ptr(),
                              self.sin.data_ptr(), out.data_ptr(), torch.get_num_threads(),
                              self.times.data_ptr())
        return out.view(B, 1, s.hidden)
