"""engine/kernels.c's shared library: built once per machine with the C compiler, cached, loaded with its ABI
checked (engine/kernels.py wraps its entry points).

    lib = load()                      # the ctypes library, or None (a warning says why)
    path = build(cache, strict=True)  # the tests' build: -Wall -Wextra -Werror

The cache key hashes everything the bits or the load depend on (source, flags, compiler, machine, C library);
`-ffp-contract=off`; a failed build is remembered; `$CHATTTS_RENDER_KERNELS_LIB` names a library built ahead.  The
library's OpenMP is torch's own libgomp.  The build, the checks at load and OpenMP: docs/modules.md, "The kernels'
shared library".
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
from pathlib import Path

import torch  # imported lazily (by engine.cpu users), never by engine.api

from engine.assets import cache_root
from engine.atomic import atomic_path, write_bytes

SOURCE = Path(__file__).with_name("kernels.c")
CFLAGS = ("-O3", "-mavx2", "-mfma", "-ffp-contract=off", "-fopenmp", "-fPIC")   # no -ffast-math: the FMA chains stay
                                  # in order; no contraction the source does not write
STRICT_FLAGS = ("-Wall", "-Wextra", "-Werror")   # build(strict=True): the tests' build
ABI_VERSION = 3                   # kernels.c's CHATTTS_ABI: the entry points' signatures and struct chattts_layer
FAILED_SUFFIX = ".failed"         # kernels-<key>.failed: a failed build, remembered (its reason inside)
VERSION_TIMEOUT = 20              # s: `cc --version`
LIB_ENV = "CHATTTS_RENDER_KERNELS_LIB"   # a library built ahead (build()'s output): loaded instead of building
BUILD_TIMEOUT = 120               # s

log = logging.getLogger(__name__)


def cpu_flags() -> set[str]:
    """The CPU's /proc/cpuinfo flags (empty where there is no such file)."""
    try:
        line = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    return set(line.split(":", 1)[1].split())


def cpu_ok() -> bool:
    """x86-64 with AVX2 and FMA (Linux: /proc/cpuinfo; elsewhere torch's own dispatch level)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = cpu_flags()
    if flags:
        return {"avx2", "fma"} <= flags
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


def build(cache: Path | None = None, strict: bool = False, extra: tuple[str, ...] = ()) -> Path:
    """Compile kernels.c (once per build_key) into `cache` (default <cache_root()>/kernels) and return the shared
    library's path; `strict`: with STRICT_FLAGS (-Wall -Wextra -Werror); `extra`: more compiler arguments (the
    tests' -DCHATTTS_AMX_EMULATE: never a library load() builds).  Raises RuntimeError when there is no
    compiler or the build fails — and remembers a failure in kernels-<key>.failed, so that later calls (in any
    process) raise it again without running the compiler."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or $CC)")
    compile_args = CFLAGS + (STRICT_FLAGS if strict else ()) + tuple(extra)
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
                ("scale", ctypes.c_void_p * 4),                                # their int8 column scales, or NULL
                ("comp", ctypes.c_void_p * 4)]                                 # their "i8" column offsets, or NULL


def expected_layout() -> tuple[int, ...]:
    """What kernels.c's chattts_layout must report: sizeof and field offsets of struct chattts_layer (Layer),
    then sizeof(long) and sizeof(void *) — 8 each: `long *` and pointer-array arguments are int64 tensors —
    and sizeof(float)."""
    return (ctypes.sizeof(Layer), Layer.attn_norm.offset, Layer.ffn_norm.offset, Layer.w.offset,
            Layer.scale.offset, Layer.comp.offset, 8, 8, 4)


def abi_problem(lib) -> str | None:
    """Why the loaded library does not match this module (ABI version, table layout), or None."""
    try:
        version, layout = lib.chattts_abi_version, lib.chattts_layout
    except AttributeError:
        return "it exports no chattts_abi_version / chattts_layout (built from an older kernels.c)"
    version.argtypes, version.restype = [], ctypes.c_int
    if version() != ABI_VERSION:
        return f"its ABI version is {version()}, engine/kernelbuild.py expects {ABI_VERSION}"
    want = expected_layout()
    buf = (ctypes.c_long * len(want))()
    layout.argtypes, layout.restype = [ctypes.c_void_p, ctypes.c_long], ctypes.c_long
    n = layout(buf, len(want))
    got = tuple(buf[:min(n, len(want))])
    if n != len(want) or got != want:
        return f"its table layout {got} differs from engine/kernelbuild.py's {want}"
    return None


def load():
    """The built (or LIB_ENV's) library, loaded with its ABI checked and its entry points typed, or None (a warning
    says why) where the CPU lacks AVX2/FMA, there is no compiler, the build or the load fails or the ABI differs."""
    if not cpu_ok():
        return None
    try:
        lib = ctypes.CDLL(os.environ.get(LIB_ENV, "").strip() or str(build()))
    except (RuntimeError, OSError) as e:
        log.warning("engine/kernels.c not usable (%s): the CPU engine uses oneDNN instead", e)
        return None
    problem = abi_problem(lib)
    if problem is not None:
        log.warning("engine/kernels.c not usable (ABI mismatch: %s): the CPU engine uses oneDNN instead", problem)
        return None
    P, L, N = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
    for name, args in (("chattts_pack", [P, L, L, P]), ("chattts_pack_q8", [P, L, L, P]),
                       ("chattts_pack_bf16", [P, L, L, P]), ("chattts_pack_i8", [P, L, L, P, P]),
                       ("chattts_pack_amx_bf16", [P, L, L, P]), ("chattts_pack_amx_i8", [P, L, L, P, P]),
                       ("chattts_linear", [N, P, L, L, P, P, P, L, P, N]),
                       ("chattts_attend", [P, P, P, L, L, L, L, L, P, P, ctypes.c_float, P, N]),
                       ("chattts_step", [P, L, L, L, L, L, L, L, ctypes.c_float, P, P, P, N, P, N, L, P, P, P, P, P,
                                         P, N, P]),
                       ("chattts_kinds", []), ("chattts_amx_enable", [])):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, (N if name in ("chattts_kinds", "chattts_amx_enable") else None)
    return lib
