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

**The build.**  The shared library is compiled from kernels.c (package data: it ships in the wheel) with `$CC`
(or cc/gcc) into `<cache_root()>/kernels/kernels-<key>.so` on first use and loaded with ctypes.  The key hashes
everything the bits or the load depend on: the source, the flags, the compiler's path and `--version` line,
the machine architecture and the C library's version.  `-ffp-contract=off`: the compiler may not fuse a
multiply and an add on its own (the FMAs are the intrinsics'), so the bits do not depend on its contraction
choices.  A failed build is remembered beside it (`kernels-<key>.failed`, holding the reason): another process
does not run the compiler again (delete the file to retry).  `$CHATTTS_RENDER_KERNELS_LIB` names a library built
ahead instead (the container image builds it in its build stage, which has the compiler its final stage lacks):
it is loaded as it is, never built, and checked like a built one.  At load the library's ABI version and the layout
of its per-layer table (struct chattts_layer) must equal what this module passes (ABI_VERSION, Layer),
else it is not used (a warning names the mismatch).  Every entry point checks its tensors (shape, dtype,
device, contiguity, slot and length ranges, the cache's geometry) and raises ValueError before C sees them.

**OpenMP.**  The library's threads are OpenMP's, and the process has one OpenMP runtime: torch's.  torch's
wheel bundles its libgomp under torch/lib; the library is linked against that file itself (with an rpath to
it), not against the compiler's libgomp.  Measured on this project's Debian 12 machines (torch 2.11.0+cu130,
gcc 12.2): torch/lib/libgomp.so.1 has the soname libgomp.so.1, as the system's /lib/x86_64-linux-gnu/libgomp.so.1
does, so even a library linked the plain way (`-fopenmp`) got torch's copy (the loader reuses a loaded soname):
/proc/<pid>/maps of a process that imported torch and loaded the kernel lists torch/lib/libgomp.so.1 only.  A
wheel whose libgomp carries a hashed soname (libgomp-<hash>.so.1) would instead have loaded the system's beside
it — two thread pools, each spinning while the other works — which the explicit link avoids.  Without a
bundled libgomp (another torch build) the library links the compiler's (`-fopenmp`).

Not available — and the engine falls back to oneDNN's linear and per-row SDPA — without AVX2/FMA, without a C
compiler, when the build, the ABI check or a self-check fails, or with CHATTTS_RENDER_KERNELS=off.
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
import torch.nn.functional as F

from engine.assets import cache_root
from engine.atomic import atomic_path, write_bytes

SOURCE = Path(__file__).with_name("kernels.c")
CFLAGS = ("-O3", "-mavx2", "-mfma", "-ffp-contract=off", "-fopenmp", "-fPIC")   # no -ffast-math: the FMA chains stay
                                  # in order; no contraction the source does not write
STRICT_FLAGS = ("-Wall", "-Wextra", "-Werror")   # build(strict=True): the tests' build
ABI_VERSION = 1                   # kernels.c's CHATTTS_ABI: the entry points' signatures and struct chattts_layer
FAILED_SUFFIX = ".failed"         # kernels-<key>.failed: a failed build, remembered (its reason inside)
VERSION_TIMEOUT = 20              # s: `cc --version`
ENV = "CHATTTS_RENDER_KERNELS"    # "off": never use these kernels (the engine then uses oneDNN and SDPA)
LIB_ENV = "CHATTTS_RENDER_KERNELS_LIB"   # a library built ahead (build()'s output): loaded instead of building
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


def _compiler_version(cc: str) -> str:
    """The first line of `cc --version` ("" when it prints nothing or cannot run)."""
    try:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (r.stdout.strip().splitlines() or [""])[0]


def _libc() -> str:
    """The C library and its version: "glibc 2.36" (os.confstr), else platform.libc_ver()."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or " ".join(platform.libc_ver())
    except (AttributeError, ValueError, OSError):
        return " ".join(platform.libc_ver())


def _openmp_link() -> tuple[str, ...]:
    """Link arguments for OpenMP: torch's own libgomp (torch/lib/libgomp*.so*, with an rpath to it) where its wheel
    bundles one, so the process holds one OpenMP runtime; else the compiler's (-fopenmp)."""
    lib = Path(torch.__file__).parent / "lib"
    bundled = sorted(lib.glob("libgomp*.so*"))
    return (str(bundled[0]), f"-Wl,-rpath,{lib}") if bundled else ("-fopenmp",)


def build_key(cc: str, compile_args: tuple[str, ...], link_args: tuple[str, ...]) -> str:
    """What the library's bits and load depend on, hashed: the source, the flags, the compiler (path and version
    line), the machine architecture and the C library."""
    parts = (cc, _compiler_version(cc), platform.machine(), _libc(), *compile_args, "--link", *link_args)
    return hashlib.sha256(SOURCE.read_bytes() + "\0".join(parts).encode()).hexdigest()[:16]


def _run(cmd: list[str]) -> None:
    """Run one compiler command; RuntimeError with its last line of output when it fails."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{cmd[0]} {SOURCE.name}: took over {BUILD_TIMEOUT} s") from None
    except OSError as e:
        raise RuntimeError(f"{cmd[0]} {SOURCE.name}: cannot run it ({e.strerror or e})") from None
    if r.returncode != 0:
        last = ((r.stderr or r.stdout).strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise RuntimeError(f"{cmd[0]} {SOURCE.name}: {last}")


def build(cache: Path | None = None, strict: bool = False) -> Path:
    """Compile kernels.c (once per build_key) into `cache` (default <cache_root()>/kernels) and return the shared
    library's path; `strict`: with STRICT_FLAGS (-Wall -Wextra -Werror).  Raises RuntimeError when there is no
    compiler or the build fails — and remembers a failure in kernels-<key>.failed, so that later calls (in any
    process) raise it again without running the compiler."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or $CC)")
    compile_args = CFLAGS + (STRICT_FLAGS if strict else ())
    link_args = _openmp_link()
    folder = Path(cache) if cache is not None else cache_root() / "kernels"
    lib = folder / f"kernels-{build_key(cc, compile_args, link_args)}.so"
    failed = lib.with_suffix(FAILED_SUFFIX)
    if lib.is_file():
        return lib
    if failed.is_file():
        reason = failed.read_text(encoding="utf-8", errors="replace").strip()
        raise RuntimeError(f"{reason} (a failed build, remembered in {failed}; delete it to retry)")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(lib) as tmp:                  # two processes building at once: each renames its own
            obj = tmp.with_name(tmp.name + ".o")
            try:                                       # compile, then link (without -fopenmp's own libgomp)
                _run([cc, *compile_args, "-c", str(SOURCE), "-o", str(obj)])
                _run([cc, "-shared", str(obj), *link_args, "-o", str(tmp)])
            finally:
                obj.unlink(missing_ok=True)
    except RuntimeError as e:
        write_bytes(failed, f"{e}\n".encode())
        raise
    return lib


class Layer(ctypes.Structure):
    """kernels.c's struct chattts_layer: one layer's weights for chattts_step."""
    _fields_ = [("attn_norm", ctypes.c_void_p), ("ffn_norm", ctypes.c_void_p),   # [C] fp32 each
                ("w", ctypes.c_void_p * 4),                                    # PROJECTIONS, packed
                ("scale", ctypes.c_void_p * 4)]                                # their int8 column scales, or NULL


def expected_layout() -> tuple[int, ...]:
    """What kernels.c's chattts_layout must report: sizeof and field offsets of struct chattts_layer (Layer),
    then sizeof(long) and sizeof(void *) — 8 each: `long *` and pointer-array arguments are int64 tensors —
    and sizeof(float)."""
    return (ctypes.sizeof(Layer), Layer.attn_norm.offset, Layer.ffn_norm.offset, Layer.w.offset,
            Layer.scale.offset, 8, 8, 4)


def _abi_problem(lib) -> str | None:
    """Why the loaded library does not match this module (ABI version, table layout), or None."""
    try:
        version, layout = lib.chattts_abi_version, lib.chattts_layout
    except AttributeError:
        return "it exports no chattts_abi_version / chattts_layout (built from an older kernels.c)"
    version.argtypes, version.restype = [], ctypes.c_int
    if version() != ABI_VERSION:
        return f"its ABI version is {version()}, engine/kernels.py expects {ABI_VERSION}"
    want = expected_layout()
    buf = (ctypes.c_long * len(want))()
    layout.argtypes, layout.restype = [ctypes.c_void_p, ctypes.c_long], ctypes.c_long
    n = layout(buf, len(want))
    got = tuple(buf[:min(n, len(want))])
    if n != len(want) or got != want:
        return f"its table layout {got} differs from engine/kernels.py's {want}"
    return None


def _load():
    """The checked ctypes library, or None (see the module docstring); tried once per process."""
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if not _cpu_ok():
        return None
    try:
        lib = ctypes.CDLL(os.environ.get(LIB_ENV, "").strip() or str(build()))
    except (RuntimeError, OSError) as e:
        log.warning("engine/kernels.c not usable (%s): the CPU engine uses oneDNN instead", e)
        return None
    problem = _abi_problem(lib)
    if problem is not None:
        log.warning("engine/kernels.c not usable (ABI mismatch: %s): the CPU engine uses oneDNN instead", problem)
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
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(40, 37, generator=g), torch.randn(7, 37, generator=g)
    ok = torch.allclose(_apply(lib, x, _pack(lib, w), 40, 37), x @ w.t(), atol=1e-4, rtol=1e-4)
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


def _padded(n: int) -> int:
    return -(-n // COLUMN_ALIGN) * COLUMN_ALIGN


def _check(name: str, t, dtypes: tuple, dims: int | None = None, contiguous: bool = False) -> None:
    """ValueError unless `t` is a CPU tensor of one of `dtypes` (with `dims` dimensions; contiguous)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"engine/kernels.c: {name} must be a tensor, not {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"engine/kernels.c: {name} is on {t.device}; the kernels take CPU tensors")
    if t.dtype not in dtypes:
        raise ValueError(f"engine/kernels.c: {name} is {t.dtype}; expected {' or '.join(map(str, dtypes))}")
    if dims is not None and t.dim() != dims:
        raise ValueError(f"engine/kernels.c: {name} has shape {tuple(t.shape)}; expected {dims} dimensions")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"engine/kernels.c: {name} must be contiguous")


FP32, INT8, INTS = (torch.float32,), (torch.int8,), (torch.int64, torch.int32, torch.int16, torch.uint8)


def _pack(lib, weight: torch.Tensor) -> torch.Tensor:
    """weight [N, K] fp32 or int8 -> the blocked layout (N padded with zero columns), flat, same dtype."""
    _check("weight", weight, FP32 + INT8, dims=2)
    if weight.shape[0] < 1 or weight.shape[1] < 1:
        raise ValueError(f"engine/kernels.c: weight has shape {tuple(weight.shape)}; N and K must be at least 1")
    w = _pad_rows(weight.detach())                                       # [ceil8(N), K], contiguous
    packed = torch.empty(w.numel(), dtype=w.dtype)
    (lib.chattts_pack_q8 if w.dtype == torch.int8 else lib.chattts_pack)(w.data_ptr(), w.shape[0], w.shape[1],
                                                                         packed.data_ptr())
    return packed


def _apply(lib, x: torch.Tensor, packed: torch.Tensor, n: int, k: int,
           scale: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] fp32 times a packed weight (n outputs, k inputs) -> [..., n]; int8 weights with their (padded)
    column scales."""
    _check("x", x, FP32)
    if x.dim() < 1 or x.shape[-1] != k:
        raise ValueError(f"engine/kernels.c: x has shape {tuple(x.shape)}; the weight takes K = {k}")
    _check("packed weight", packed, FP32 + INT8, dims=1, contiguous=True)
    n_pad = _padded(n)
    if packed.numel() != n_pad * k:
        raise ValueError(f"engine/kernels.c: the packed weight holds {packed.numel()} values, not {n_pad} x {k}")
    q8 = packed.dtype == torch.int8
    if q8 != (scale is not None):
        raise ValueError("engine/kernels.c: int8 weights need their column scales, fp32 weights none")
    if q8:
        _check("scale", scale, FP32, dims=1, contiguous=True)
        if scale.numel() != n_pad:
            raise ValueError(f"engine/kernels.c: {scale.numel()} column scales for {n_pad} columns")
    x2 = x.reshape(-1, k).contiguous()                                   # [M, K]
    y = torch.empty(x2.shape[0], n_pad)
    if not q8:
        lib.chattts_gemm(x2.data_ptr(), x2.shape[0], k, packed.data_ptr(), n_pad, y.data_ptr(),
                         torch.get_num_threads())
    else:
        lib.chattts_gemm_q8(x2.data_ptr(), x2.shape[0], k, packed.data_ptr(), scale.data_ptr(), n_pad,
                            y.data_ptr(), torch.get_num_threads())
    if n_pad != n:
        y = y[:, :n].contiguous()
    return y.view(*x.shape[:-1], n)


def _check_rows(slots: torch.Tensor, lens: torch.Tensor, slots_n: int, S: int, what: str) -> None:
    """ValueError unless every slot is in 0..slots_n-1 and every length in 0..S (the cache's geometry)."""
    if slots.numel() and (int(slots.min()) < 0 or int(slots.max()) >= slots_n):
        raise ValueError(f"{what}: a slot outside the cache ({slots.tolist()}; it has {slots_n} slots)")
    if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > S):
        raise ValueError(f"{what}: a length outside the cache ({lens.tolist()}; it holds {S} positions)")


def _attend(lib, q, k_cache, v_cache, slots: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """q [B, H, 1, D] over k_cache, v_cache [slots, Hkv, S, D] (all fp32, CPU) -> [B, H, 1, D]; slots, lens [B]
    int64."""
    _check("q", q, FP32, dims=4)
    _check("k_cache", k_cache, FP32, dims=4)
    _check("v_cache", v_cache, FP32, dims=4)
    B, H, L, D = q.shape
    slots_n, hkv, S, Dc = k_cache.shape
    if L != 1 or D % 8 or D != Dc or hkv < 1 or H % hkv:
        raise ValueError(f"decode attention needs one fp32 query per row, D % 8 == 0 and the cache's D and heads "
                         f"(q {tuple(q.shape)}, cache {tuple(k_cache.shape)})")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"decode attention: k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("decode attention needs contiguous caches")
    if slots.shape != (B,) or lens.shape != (B,):
        raise ValueError(f"decode attention: {B} rows need a slot and a length each ({slots.numel()}, {lens.numel()})")
    _check_rows(slots, lens, slots_n, S, "decode attention")
    qc = q.contiguous()
    out = torch.empty(B, H, 1, D)
    lib.chattts_attend(qc.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), B, H, hkv, S, D,
                       slots.data_ptr(), lens.data_ptr(), D ** -0.5, out.data_ptr(), torch.get_num_threads())
    return out


def _ints(name: str, values) -> torch.Tensor:
    """A contiguous int64 CPU tensor of integer `values` (a tensor or a list); ValueError otherwise."""
    if isinstance(values, torch.Tensor):
        _check(name, values, INTS)
        return values.reshape(-1).to(torch.int64).contiguous()
    if not all(isinstance(v, int) for v in values):
        raise ValueError(f"engine/kernels.c: {name} must be integers")
    return torch.tensor(list(values), dtype=torch.int64).reshape(-1)


def decode_attention(slots: torch.Tensor, lens: list[int]):
    """attend(q [B, H, 1, D], k_cache, v_cache [slots, Hkv, S, D]) -> [B, H, 1, D] for one decode step's rows:
    row b over cache[slots[b], :, :lens[b]] (lens[b] == 0: a padding row, zeros).  engine.attention.CAttention
    makes one per step and every layer calls it."""
    lib = library()
    sl = _ints("slots", slots)
    ln = _ints("lengths", lens)
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
        _check("weight", weight, FP32, dims=2)
        self.weight = weight                                             # [N, K] fp32, dense
        self.out_features, self.in_features = weight.shape
        self.packed = _pack(self.lib, weight)                            # [ceil8(N) * K] blocked

    scale = None                                                         # fp32 weights: no column scales

    def forward(self, x):                                                # x [..., K] fp32 -> [..., N]
        if torch._C._autograd._profiler_enabled():                      # a range the profile counts as GEMM
            with torch.profiler.record_function(GEMM_RANGE):
                return _apply(self.lib, x, self.packed, self.out_features, self.in_features, self.scale)
        return _apply(self.lib, x, self.packed, self.out_features, self.in_features, self.scale)


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
        _check("int8 weight", wq, INT8, dims=2)
        _check("scale", scale, FP32, dims=1)
        if scale.shape[0] != wq.shape[0]:
            raise ValueError(f"engine/kernels.c: {scale.shape[0]} column scales for {wq.shape[0]} columns")
        self.out_features, self.in_features = wq.shape
        self.packed = _pack(self.lib, wq)                                # [ceil8(N) * K] int8, blocked
        self.scale = _pad_rows(scale, 1.0)                               # [ceil8(N)] fp32


PROJECTIONS = ("wqkv", "wo", "w13", "w2")   # a Block's linears, in chattts_step's table order


class DecodeStep:
    """engine/kernels.c's chattts_step: a decode step of the whole Llama (every layer, then the final norm) in one
    call, for a model whose block projections are all GemmLinear or all GemmInt8Linear (engine.attention.CStep
    runs it).
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
        for name, w in (("norm", self.norm), ("cos", self.cos), ("sin", self.sin)):
            _check(name, w, FP32, dims=1 if name == "norm" else 2, contiguous=True)
        if self.norm.shape != (s.hidden,) or self.cos.shape[1:] != (s.head_dim,) or self.sin.shape != self.cos.shape:
            raise ValueError(f"chattts_step: norm {tuple(self.norm.shape)}, RoPE tables {tuple(self.cos.shape)}")
        self.keep = []                                                   # the weights the table points at
        self.table = (Layer * len(blocks))()                             # struct chattts_layer [layers]
        for t, b in zip(self.table, blocks):
            lins = [getattr(b, n) for n in PROJECTIONS]
            for name in ("attn_norm", "ffn_norm"):
                w = getattr(b, name).weight
                _check(name, w, FP32, dims=1, contiguous=True)
                if w.shape != (s.hidden,):
                    raise ValueError(f"chattts_step: {name} has shape {tuple(w.shape)}, not ({s.hidden},)")
                setattr(t, name, w.data_ptr())
                self.keep.append(w)
            for i, lin in enumerate(lins):
                t.w[i] = lin.packed.data_ptr()
                t.scale[i] = lin.scale.data_ptr() if self.q8 else None
                self.keep += [lin.packed] + ([lin.scale] if self.q8 else [])
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
        lengths [B] valid keys after writing (0: a padding row) -> the final-normed hidden states [B, 1, C].
        ValueError for anything outside what chattts_step may read or write."""
        s = self.s
        _check("x", x, FP32, dims=3)
        B = x.shape[0]
        if x.shape[1:] != (1, s.hidden):
            raise ValueError(f"chattts_step: x has shape {tuple(x.shape)}; expected [B, 1, {s.hidden}]")
        ps, sl, ln = _ints("positions", pos), _ints("slots", slots), _ints("lengths", lengths)
        if ps.numel() != B or sl.numel() != B or ln.numel() != B:
            raise ValueError(f"chattts_step: {B} rows need one position, slot and length each")
        S = self._check_cache(cache)
        if B and (int(ps.min()) < 0 or int(ps.max()) >= min(S, self.cos.shape[0])):
            raise ValueError(f"chattts_step: a position outside the cache ({ps.tolist()}; it holds {S} positions)")
        _check_rows(sl, ln, cache.slots, S, "chattts_step")
        xs = x.reshape(B, s.hidden).clone()                              # becomes the residual stream
        kc = torch.tensor([t.data_ptr() for t in cache.k], dtype=torch.int64)
        vc = torch.tensor([t.data_ptr() for t in cache.v], dtype=torch.int64)
        out = torch.empty(B, s.hidden)
        self.lib.chattts_step(xs.data_ptr(), B, s.hidden, s.heads, s.kv_heads, s.head_dim, s.ffn, s.layers, s.eps,
                              ctypes.addressof(self.table), kc.data_ptr(), vc.data_ptr(), self.norm.data_ptr(),
                              int(self.q8), S, sl.data_ptr(), ps.data_ptr(), ln.data_ptr(), self.cos.data_ptr(),
                              self.sin.data_ptr(), out.data_ptr(), torch.get_num_threads(),
                              self.times.data_ptr())
        return out.view(B, 1, s.hidden)

    def _check_cache(self, cache) -> int:
        """The cache's length S, once every layer's keys and values are [cache.slots, Hkv, S, D] fp32 contiguous
        CPU tensors of this model's geometry (ValueError otherwise)."""
        s, S = self.s, cache.max_len
        if len(cache.k) != s.layers or len(cache.v) != s.layers:
            raise ValueError(f"chattts_step: a cache of {len(cache.k)} layers for a model of {s.layers}")
        want = (cache.slots, s.kv_heads, S, s.head_dim)
        for name, tensors in (("k", cache.k), ("v", cache.v)):
            for t in tensors:
                _check(f"cache.{name}", t, FP32, contiguous=True)
                if tuple(t.shape) != want:
                    raise ValueError(f"chattts_step: cache.{name} has shape {tuple(t.shape)}; expected {want}")
        return S
