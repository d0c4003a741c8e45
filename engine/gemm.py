"""Our fp32 linear for the CPU decode step: engine/gemm.c (AVX2 + FMA), built once per machine with the C compiler.

    if gemm.available():
        lin = GemmLinear(weight)          # weight [N, K] fp32; packs it once
        y = lin(x)                        # x [..., K] fp32 -> [..., N]

Why: the decode step multiplies a few rows by ~750 MB of GPT weights, so it is bound by how fast the weights
stream from memory.  On this project's AVX2 machines oneDNN's packed kernel reads them at ~12 GB/s at 4-16 rows
and MKL's sgemm at 5-7 GB/s, while memory gives ~27 GB/s; this kernel streams each weight once per call in
16-column blocks (measured with 20 layers' distinct weights, 2 threads: 4 rows 34 ms vs oneDNN 57, 16 rows 52 vs
80, 32 rows 86 vs 105).  And every output is one in-order chain of fused multiply-adds, so a row's bits depend
on nothing else in the call: any call size is batch-invariant (no padding rows) and the thread count does not
matter either (engine/generate.py measures it all the same).

The shared library is compiled from gemm.c with `$CC` (or cc/gcc) into `<cache_root()>/kernels/` on first use,
named by a hash of the source, the flags and the compiler, and loaded with ctypes; its threads are OpenMP's (the
library links libgomp, the one torch's CPU build already loaded).  Not available — and the engine falls back to
oneDNN — without AVX2/FMA, without a C compiler, when the build or a self-check fails, or with
CHATTTS_RENDER_GEMM=off.
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

import torch                      # imported lazily (by engine.llama users), never by engine.api
import torch.nn as nn

SOURCE = Path(__file__).with_name("gemm.c")
CFLAGS = ("-O3", "-mavx2", "-mfma", "-fopenmp", "-fPIC", "-shared")   # no -ffast-math: the FMA chains stay in order
ENV = "CHATTTS_RENDER_GEMM"       # "off": never use this kernel (the engine then uses oneDNN)
BUILD_TIMEOUT = 120               # s
PROFILE_RANGE = "gemm"            # record_function name of a call while the torch profiler runs (benchmarks/limits)
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
    """Compile gemm.c (once per source, flags and compiler) into `cache` (default <cache_root()>/kernels) and
    return the shared library's path.  Raises RuntimeError when there is no compiler or the build fails."""
    from engine.assets import cache_root
    from engine.atomic import atomic_path

    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or $CC)")
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join((cc,) + CFLAGS).encode()).hexdigest()[:16]
    folder = Path(cache) if cache is not None else cache_root() / "kernels"
    lib = folder / f"gemm-{digest}.so"
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
        log.warning("engine/gemm.c not usable (%s): the CPU engine uses oneDNN instead", e)
        return None
    P, L = ctypes.c_void_p, ctypes.c_long
    lib.chattts_pack.argtypes = [P, L, L, P]
    lib.chattts_pack.restype = None
    lib.chattts_gemm.argtypes = [P, L, L, P, L, P, ctypes.c_int]
    lib.chattts_gemm.restype = None
    return lib


def library():
    with _LOCK:
        if not _LIB:
            lib = _load()
            _LIB.append(lib if lib is None or _self_check(lib) else None)
        return _LIB[0]


def available() -> bool:
    """Whether GemmLinear works here (builds the kernel on first call)."""
    return library() is not None


def _self_check(lib) -> bool:
    """The built kernel agrees with torch on a small problem (with an 8-column tail and a ragged row chunk)."""
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(40, 37, generator=g), torch.randn(7, 37, generator=g)
    y = _apply(lib, x, _pack(lib, w), 40)
    ok = torch.allclose(y, x @ w.t(), atol=1e-4, rtol=1e-4)
    if not ok:
        log.warning("engine/gemm.c disagrees with torch here: the CPU engine uses oneDNN instead")
    return ok


def _pack(lib, weight: torch.Tensor) -> torch.Tensor:
    w = weight.detach().float().contiguous()                             # [N, K]
    n, k = w.shape
    if n % COLUMN_ALIGN:                                                 # zero columns up to the block size
        w = torch.cat([w, w.new_zeros(COLUMN_ALIGN - n % COLUMN_ALIGN, k)])
    packed = torch.empty(w.numel())
    lib.chattts_pack(w.data_ptr(), w.shape[0], k, packed.data_ptr())
    return packed


def _apply(lib, x: torch.Tensor, packed: torch.Tensor, n: int) -> torch.Tensor:
    k = x.shape[-1]
    x2 = x.reshape(-1, k)
    if x2.dtype != torch.float32 or not x2.is_contiguous():
        x2 = x2.float().contiguous()
    n_pad = packed.numel() // k
    y = torch.empty(x2.shape[0], n_pad)
    lib.chattts_gemm(x2.data_ptr(), x2.shape[0], k, packed.data_ptr(), n_pad, y.data_ptr(),
                     torch.get_num_threads())
    if n_pad != n:
        y = y[:, :n].contiguous()
    return y.view(*x.shape[:-1], n)


class GemmLinear(nn.Module):
    """fp32 linear through engine/gemm.c with the weight packed once (CPU).  The dense `weight` stays (the HF
    model shares it: engine.llama.share_weights_with_hf); `packed` is the kernel's blocked copy."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.lib = library()
        if self.lib is None:
            raise RuntimeError("engine/gemm.c is not available here (see engine.gemm.available)")
        self.weight = weight                                             # [N, K] fp32, dense
        self.out_features, self.in_features = weight.shape
        self.packed = _pack(self.lib, weight)                            # [ceil8(N) * K] blocked

    def forward(self, x):                                                # x [..., K] fp32 -> [..., N]
        if torch._C._autograd._profiler_enabled():                      # a range the profile counts as GEMM
            with torch.profiler.record_function(PROFILE_RANGE):
                return _apply(self.lib, x, self.packed, self.out_features)
        return _apply(self.lib, x, self.packed, self.out_features)
