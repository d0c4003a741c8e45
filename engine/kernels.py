"""Our kernels for the CPU decode step: engine/kernels.c's entry points (engine/kernelbuild.py builds and loads it).

    if kernels.available():
        lin = GemmLinear(weight)          # weight [N, K] fp32; packs it once (kind "f32": AVX2 + FMA)
        y = lin(x)                        # x [..., K] fp32 -> [..., N]
        lin = GemmLinear(weight, "f32_512")   # the same bits on AVX-512 (where kinds() has it)
        q8 = GemmInt8Linear(wq, scale)    # --int8: int8 weights, fp32 activations (a quarter of the bytes)
        b16 = GemmBf16Linear(weight)      # bf16 weights and activations, fp32 sums (AVX512_BF16)
        w8a8 = GemmW8A8Linear(wq, scale)  # int8 weights and activations, exact int32 sums (AVX512_VNNI)
        tiles = GemmBf16Linear(weight, "amx_bf16")   # the same operands on AMX tiles (where kinds() has it)
        attend = decode_attention(slots, lens)     # one step's rows: cache slots [B], valid lengths
        o = attend(q, k_cache, v_cache)            # q [B, H, 1, D] -> [B, H, 1, D], each row over its own prefix
        step = DecodeStep(llama)                   # a Llama whose projections are all one kind of ours
        h = step(x, pos, cache, slots, lens)       # x [B, 1, C] -> [B, 1, C]: every layer and the final norm

**The linear.**  The decode step multiplies a few rows by ~750 MB of GPT weights, so it is bound by how fast the weights
stream from memory.  On this project's AVX2 machines oneDNN's packed kernel reads them at ~12 GB/s at 4-16 rows
and MKL's sgemm at 5-7 GB/s, while memory gives ~27 GB/s; this kernel streams each weight once per call in
16-column blocks (measured with 20 layers' distinct weights, 2 threads: 4 rows 34 ms vs oneDNN 57, 16 rows 52 vs
80, 32 rows 86 vs 105).  And every output is one in-order chain, so a row's bits depend on nothing else in the
call: any call size is batch-invariant (no padding rows) and the thread count does not matter either
(engine/generate.py measures it all the same).  That holds for every *kind* (KINDS: the weights' format and the
instructions that multiply them, engine/kernels.c's header): fp32 and int8 weights on AVX2 ("f32", "q8") or
AVX-512 ("f32_512", "q8_512": the same chains, so the same bits — checked at load), bf16 weights and activations
("bf16": AVX512_BF16's vdpbf16ps, half the bytes of fp32 and twice its products per instruction), int8 weights
and activations ("i8": AVX512_VNNI's vpdpbusd, exact int32 sums), and the last two on AMX tiles ("amx_bf16":
tdpbf16ps, its own rounding order; "amx_i8": tdpbusd, exact, so "i8"'s bits; every row count padded to whole
tiles).  `kinds()` is what this CPU and this build have; engine/cpupath.py chooses among them.

**The self-checks.**  Every kind must agree with float64 over its rounded operands (within the fp32 sums' bound),
give a row the same bits alone as in a call of 14 or 35 rows, the W8A8 kinds the exact W8A8 reference's bits
(engine.cpu.Int8Linear's arithmetic, w8a8_reference), a kind of SAME_BITS its twin's where the CPU has the twin
(`kind_problem`).  The AMX kinds are checked in a child process first (`_tile_kinds`): Linux lets a process use
the tiles only after it asks (arch_prctl, engine/kernels.c's chattts_amx_enable), and a refused permission, an
illegal instruction or a wrong kernel there kills or fails the child, never a render; only kinds the child passed
are enabled and offered here.  **No AMX CPU has run the AMX kinds yet**: they are written against the ISA
reference and compile with gcc >= 11 / clang >= 12, their layouts, padding, epilogues and thread split are
tested on any CPU through a build that emulates the tile instructions in C (CHATTTS_AMX_EMULATE,
tests/engine/test_amx.py), and the kinds themselves are tested where the CPU has AMX (skipped elsewhere).

Not available — and the engine falls back to oneDNN's linear and per-row SDPA — without AVX2/FMA, without a C
compiler, when the build, the ABI check or a self-check fails, or with CHATTTS_RENDER_KERNELS=off.  A kind is
left out of kinds() (the others stay) where the CPU lacks its flags, this compiler cannot build it (gcc < 10 has
no AVX512_BF16, gcc < 11 no AMX: chattts_kinds says what was built) or its self-check fails; no code of a kind
the CPU lacks is ever called (its functions are compiled for their instructions alone, __attribute__((target))).
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import torch  # imported lazily (by engine.cpu users), never by engine.api
import torch.nn as nn
import torch.nn.functional as F

from engine.kernelbuild import LIB_ENV, Layer, cpu_flags, load

ENV = "CHATTTS_RENDER_KERNELS"    # "off": never use these kernels (the engine then uses oneDNN and SDPA)
GEMM_RANGE = "gemm"               # record_function name of a linear while the torch profiler runs (benchmarks/limits;
                                  # the attention runs inside engine/llama.py's "attention" range)
COLUMN_ALIGN = 8                  # the kernel's output columns come in blocks of 16 and a last block of 8
AVX512 = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})
AMX = frozenset({"amx_tile"})
# kernels.c's kinds: name -> (its KIND_* number, the /proc/cpuinfo flags it needs beyond AVX2 + FMA, weight dtype)
KINDS = {"f32": (0, frozenset(), "fp32"), "q8": (1, frozenset(), "int8"),
         "f32_512": (2, AVX512, "fp32"), "q8_512": (3, AVX512, "int8"),
         "bf16": (4, AVX512 | {"avx512_bf16"}, "bf16"), "i8": (5, AVX512 | {"avx512_vnni"}, "int8"),
         "amx_bf16": (6, AMX | {"amx_bf16"}, "bf16"), "amx_i8": (7, AMX | {"amx_int8"}, "int8")}
SAME_BITS = {"f32_512": "f32", "q8_512": "q8", "amx_i8": "i8"}   # kinds that run another's chains exactly
ACTIVATIONS = {"bf16": "bf16", "amx_bf16": "bf16", "i8": "int8", "amx_i8": "int8"}   # kinds that round their rows
W8A8 = ("i8", "amx_i8")           # int8 weights and rows, exact int32 sums: w8a8_reference's bits
TILE_KINDS = ("amx_bf16", "amx_i8")   # checked in a child process first (_tile_kinds)
TILE_CHECK_TIMEOUT = 300          # s: the child's import of torch, the library's load and the checks
CHECK_ROWS = 35                   # rows of the self-check's batch-invariance call (three row tiles, a ragged one)

log = logging.getLogger(__name__)
_LOCK = threading.RLock()         # kinds() holds it while library() takes it
_LIB: list = []                   # [ctypes library or None] once tried


def library():
    with _LOCK:
        if not _LIB:
            lib = None if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false") else load()
            _LIB.append(lib if lib is None or _self_check(lib) else None)
        return _LIB[0]


def available() -> bool:
    """Whether GemmLinear and decode_attention work here (builds the kernels on first call)."""
    return library() is not None


_KINDS: list = []                 # [the usable kinds] once checked


def kinds() -> tuple[str, ...]:
    """The kinds (KINDS order) usable here: built by this compiler (chattts_kinds), the CPU has their flags, and
    each passes its self-check (kind_problem; the AMX kinds in a child process first: _tile_kinds).  () without
    the kernels."""
    with _LOCK:
        if not _KINDS:
            lib, flags = library(), cpu_flags()
            built = lib.chattts_kinds() if lib is not None else 0
            have = [k for k, (i, need, _) in KINDS.items() if built >> i & 1 and need <= flags]
            tiles = _tile_kinds(lib, [k for k in have if k in TILE_KINDS]) if lib is not None else ()
            _KINDS.append(tuple(k for k in have if k in tiles or (k not in TILE_KINDS and _kind_check(lib, k))))
        return _KINDS[0]


def _self_check(lib) -> bool:
    """The built kernels agree with torch on small problems (the linear with an 8-column tail and a ragged row
    chunk; the attention with a padding row and lengths that are not multiples of 8)."""
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(40, 37, generator=g), torch.randn(7, 37, generator=g)
    ok = torch.allclose(Packed(lib, w).multiply(x), x @ w.t(), atol=1e-4, rtol=1e-4)
    k, v, q = torch.randn(3, 2, 24, 16, generator=g), torch.randn(3, 2, 24, 16, generator=g), torch.randn(2, 2, 1, 16)
    o = _attend(lib, q, k, v, torch.tensor([2, 0]), torch.tensor([19, 0]))
    ref = F.scaled_dot_product_attention(q[:1], k[2:, :, :19], v[2:, :, :19])
    ok = ok and torch.allclose(o[:1], ref, atol=1e-5, rtol=1e-4) and not o[1].any()
    if not ok:
        log.warning("engine/kernels.c disagrees with torch here: the CPU engine uses oneDNN instead")
    return ok


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 weights per output channel, symmetric: (wq [N, K] int8, scale [N] fp32), weight ~ scale[:, None] * wq."""
    w = weight.detach().float()                                                  # [N, K]
    scale = (w.abs().amax(1) / 127.0).clamp_min(1e-12)                           # [N]
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] fp32 -> (xq [M, K] int8, s [M, 1] fp32), x ~ s * xq: each row on its own (its absmax / 127), as the
    W8A8 linears quantize their activations (engine.cpu.Int8Linear, and "i8" inside engine/kernels.c)."""
    s = (x.abs().amax(-1, keepdim=True) / 127.0).clamp_min(1e-12)                # [M, 1]
    return torch.round(x / s).clamp(-127, 127).to(torch.int8), s


def rounded_operands(kind: str, x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, weight) in float64 as `kind` rounds them before it multiplies (fp32 kinds: as they are; bf16 kinds: both
    to bf16; int8 kinds: the weight quantized per column, the W8A8 ones the rows too): a reference's operands."""
    wdtype = KINDS[kind][2]
    if wdtype == "int8":
        wq, scale = quantize_weight(weight)
        weight = wq.double() * scale.double()[:, None]
    if ACTIVATIONS.get(kind) == "bf16":
        x, weight = x.bfloat16(), weight.bfloat16()
    if ACTIVATIONS.get(kind) == "int8":
        xq, s = quantize_rows(x)
        x = xq.double() * s.double()
    return x.double(), weight.double()


def w8a8_reference(x: torch.Tensor, wq: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] fp32 times int8 weights wq [N, K] with column scales [N] as the W8A8 kinds define it (engine.cpu.
    Int8Linear's arithmetic): each row quantized (quantize_rows), the product in int64 (exact), one fp32 rescale."""
    xq, s = quantize_rows(x)
    return (xq.to(torch.int64) @ wq.t().to(torch.int64)).float() * (s * scale)


def kind_problem(kind: str, multiply, twin=None) -> str | None:
    """What is wrong with `multiply(weight, scale, x) -> y` as `kind`'s linear, or None.  A small problem (33
    columns: two 16-column blocks, a lone one, a tail of 8 after padding; K = 37: odd, not a multiple of 4; 14 rows:
    a ragged chunk of every width) against float64 over the operands as the kind rounds them (rounded_operands),
    within 1e-5 of the sum of the products' magnitudes (the fp32 sums' rounding); the W8A8 kinds bit for bit
    against w8a8_reference; `twin` (another kind's multiply: SAME_BITS) bit for bit; and every row of a call of
    CHECK_ROWS alone, and the first 14 of them, with the same bits as in that call (batch invariance: the AMX kinds
    pad rows to whole tiles)."""
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(33, 37, generator=g), torch.randn(CHECK_ROWS, 37, generator=g)
    weight, scale = quantize_weight(w) if KINDS[kind][2] == "int8" else (w, None)
    y = multiply(weight, scale, x[:14])
    xr, wr = rounded_operands(kind, x[:14], w)
    if not bool(((y.double() - xr @ wr.t()).abs() <= 1e-5 * (xr.abs() @ wr.abs().t())).all()):
        return "its products are off the float64 reference by more than the fp32 sums' rounding"
    if kind in W8A8 and scale is not None and not torch.equal(y, w8a8_reference(x[:14], weight, scale)):
        return "its W8A8 products are not the exact reference's bits"
    if twin is not None and not torch.equal(y, twin(weight, scale, x[:14])):
        return f"it does not give {SAME_BITS.get(kind, 'its twin')}'s bits"
    full = multiply(weight, scale, x)
    if not torch.equal(full[:14], y) or not all(torch.equal(multiply(weight, scale, x[i:i + 1]), full[i:i + 1])
                                                 for i in range(CHECK_ROWS)):
        return "a row's bits depend on the other rows of its call"
    return None


def _kind_check(lib, kind: str) -> bool:
    """kind_problem for engine/kernels.c's `kind` (its SAME_BITS twin compared where this CPU has the twin's flags).
    A kind that fails is not used (a warning says why)."""
    def make(k):
        return lambda weight, scale, x: Packed(lib, weight, k, scale).multiply(x)

    twin = SAME_BITS.get(kind)
    twin_here = twin is not None and KINDS[twin][1] <= cpu_flags() and lib.chattts_kinds() >> KINDS[twin][0] & 1
    problem = kind_problem(kind, make(kind), make(twin) if twin_here else None)
    if problem is not None:
        log.warning("engine/kernels.c's %s kernel fails its self-check here (%s): not used", kind, problem)
    return problem is None


ROOT = Path(__file__).resolve().parents[1]      # where `engine` is importable from (the tile check's child)


def _tile_command(kinds: list[str]) -> list[str]:
    """The child process of _tile_kinds (its last line of output: tile_child's JSON)."""
    return [sys.executable, "-c", "from engine.kernels import tile_child; tile_child()", *kinds]


def tile_child(kinds: list[str] | None = None) -> dict:
    """The AMX self-check's child process (_tile_kinds runs it; the kinds are its arguments): asks for the tiles
    (chattts_amx_enable) and runs _kind_check on each kind, printing {"kinds": {kind: passed}} as one JSON line, or
    {"error": why} where the library or the permission is missing.  Returns what it printed."""
    names = list(sys.argv[1:] if kinds is None else kinds)
    lib = library()
    if lib is None:
        out: dict = {"error": "engine/kernels.c is not available in the child process"}
    elif (err := lib.chattts_amx_enable()) != 0:
        out = {"error": f"the OS refused the tiles (arch_prctl ARCH_REQ_XCOMP_PERM: {os.strerror(err)})"}
    else:
        out = {"kinds": {k: k in TILE_KINDS and _kind_check(lib, k) for k in names}}
    print(json.dumps(out), flush=True)
    return out


def _tile_kinds(lib, kinds: list[str]) -> tuple[str, ...]:
    """The AMX kinds (of `kinds`) this process may run: each passed its self-check in a child process (on this
    CPU, with the same library: a refused permission, an illegal instruction or a wrong kernel there ends or fails
    the child, never this process), then the tiles were enabled here.  () and a warning otherwise."""
    if not kinds:
        return ()
    env = {**os.environ, LIB_ENV: str(lib._name),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    try:
        r = subprocess.run(_tile_command(kinds), capture_output=True, text=True, timeout=TILE_CHECK_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        why = f"took over {TILE_CHECK_TIMEOUT} s"
    except OSError as e:
        why = f"could not start ({e.strerror or e})"
    else:
        lines = (r.stdout or "").strip().splitlines()
        try:
            verdict = json.loads(lines[-1]) if lines else {}
        except ValueError:
            verdict = {}
        if r.returncode != 0 or not isinstance(verdict, dict) or not ("kinds" in verdict or "error" in verdict):
            rc = r.returncode
            died = (f"was killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals()
                    else f"exited with status {rc}" if rc else "printed no verdict")
            last = ((r.stderr or "").strip().splitlines() or [""])[-1][:200]
            why = f"{died}{': ' + last if last else ''}"
        elif "error" in verdict:
            why = str(verdict["error"])
        else:
            passed = tuple(k for k in kinds if verdict["kinds"].get(k) is True)
            for k in kinds:
                if k not in passed:
                    log.warning("engine/kernels.c's %s kernel failed its self-check (in a child process): not used", k)
            if passed and (err := lib.chattts_amx_enable()) != 0:
                log.warning("engine/kernels.c's AMX kinds are not used: the OS refused this process the tiles "
                            "(arch_prctl ARCH_REQ_XCOMP_PERM: %s)", os.strerror(err))
                return ()
            return passed
    log.warning("engine/kernels.c's AMX kinds (%s) are not used: their self-check's child process %s",
                ", ".join(kinds), why)
    return ()


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


class Packed:
    """A weight [N, K] packed once for one kind (engine/kernels.c's layouts; N padded with zero columns to a multiple
    of COLUMN_ALIGN, the AMX kinds' packed copy to whole tiles): `packed` flat (fp32, int8, or bf16 bits as int16),
    `scale` [N_pad] fp32 column scales (int8 kinds: weight ~ scale[n] * wq[n]), `comp` [N_pad] int32 column offsets
    (W8A8), and multiply(x)."""

    def __init__(self, lib, weight: torch.Tensor, kind: str = "f32", scale: torch.Tensor | None = None):
        if kind not in KINDS:
            raise ValueError(f"engine/kernels.c: no kind {kind!r} (one of {', '.join(KINDS)})")
        wdtype = KINDS[kind][2]
        _check("weight", weight, INT8 if wdtype == "int8" else FP32, dims=2)
        if weight.shape[0] < 1 or weight.shape[1] < 1:
            raise ValueError(f"engine/kernels.c: weight has shape {tuple(weight.shape)}; N and K must be at least 1")
        if (scale is not None) != (wdtype == "int8"):
            raise ValueError("engine/kernels.c: int8 weights need their column scales, fp32 weights none")
        if scale is not None:
            _check("scale", scale, FP32, dims=1)
            if scale.shape[0] != weight.shape[0]:
                raise ValueError(f"engine/kernels.c: {scale.shape[0]} column scales for {weight.shape[0]} columns")
        self.lib, self.kind = lib, kind
        self.out_features, self.in_features = weight.shape
        w = _pad_rows(weight.detach())                                   # [N_pad, K], contiguous
        n, k = w.shape
        self.comp = None
        if wdtype == "bf16":
            self.packed = torch.empty(_packed_size(kind, n, k), dtype=torch.int16)    # K padded (even, tiles)
            pack = lib.chattts_pack_amx_bf16 if kind in TILE_KINDS else lib.chattts_pack_bf16
            pack(w.data_ptr(), n, k, self.packed.data_ptr())
        elif kind in W8A8:
            self.packed = torch.empty(_packed_size(kind, n, k), dtype=torch.int8)     # K padded (to 4, tiles)
            self.comp = torch.empty(n, dtype=torch.int32)
            pack = lib.chattts_pack_amx_i8 if kind in TILE_KINDS else lib.chattts_pack_i8
            pack(w.data_ptr(), n, k, self.packed.data_ptr(), self.comp.data_ptr())
        else:
            self.packed = torch.empty(w.numel(), dtype=w.dtype)
            (lib.chattts_pack_q8 if wdtype == "int8" else lib.chattts_pack)(w.data_ptr(), n, k, self.packed.data_ptr())
        self.scale = _pad_rows(scale.float(), 1.0) if scale is not None else None     # [N_pad] fp32

    def multiply(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., K] fp32 -> [..., N]."""
        k, n, n_pad = self.in_features, self.out_features, _padded(self.out_features)
        _check("x", x, FP32)
        if x.dim() < 1 or x.shape[-1] != k:
            raise ValueError(f"engine/kernels.c: x has shape {tuple(x.shape)}; the weight takes K = {k}")
        self._check_packed(n_pad, k)
        x2 = x.reshape(-1, k).contiguous()                               # [M, K]
        y = torch.empty(x2.shape[0], n_pad)
        self.lib.chattts_linear(KINDS[self.kind][0], x2.data_ptr(), x2.shape[0], k, self.packed.data_ptr(),
                                _ptr(self.scale), _ptr(self.comp), n_pad, y.data_ptr(), torch.get_num_threads())
        if n_pad != n:
            y = y[:, :n].contiguous()
        return y.view(*x.shape[:-1], n)


    def _check_packed(self, n_pad: int, k: int) -> None:
        """ValueError unless the packed weight, scales and offsets are what C reads for this kind and shape."""
        wdtype = KINDS[self.kind][2]
        _check("packed weight", self.packed, {"fp32": FP32, "int8": INT8, "bf16": (torch.int16,)}[wdtype], dims=1,
               contiguous=True)
        if self.packed.numel() != _packed_size(self.kind, n_pad, k):
            raise ValueError(f"engine/kernels.c: the packed weight holds {self.packed.numel()} values, not "
                             f"{_packed_size(self.kind, n_pad, k)} ({n_pad} x {k}, {self.kind})")
        for name, t, dtypes, need in (("column scales", self.scale, FP32, wdtype == "int8"),
                                      ("column offsets", self.comp, (torch.int32,), self.kind in W8A8)):
            if need != (t is not None):
                raise ValueError(f"engine/kernels.c: {self.kind} weights {'need' if need else 'take no'} {name}")
            if t is not None:
                _check(name, t, dtypes, dims=1, contiguous=True)
                if t.numel() != n_pad:
                    raise ValueError(f"engine/kernels.c: {t.numel()} {name} for {n_pad} columns")


def _packed_size(kind: str, n: int, k: int) -> int:
    """Values in a packed weight of n (padded) columns and K = k: bf16 pads K to even, "i8" to a multiple of 4; the
    AMX kinds pad n to 16 and K to whole tiles (32 bf16, 64 int8)."""
    if kind in TILE_KINDS:
        return -(-n // 16) * 16 * (32 * -(-k // 32) if kind == "amx_bf16" else 64 * -(-k // 64))
    return n * {"bf16": 2 * (-(-k // 2)), "i8": 4 * (-(-k // 4))}.get(kind, k)


def _ptr(t: torch.Tensor | None):
    return None if t is None else t.data_ptr()


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
    if L != 1 or D % 8 or Dc != D or hkv < 1 or H % hkv:
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


def _usable(kind: str):
    """The library, where `kind` is usable here (kinds()); RuntimeError otherwise."""
    lib = library()
    if lib is None:
        raise RuntimeError("engine/kernels.c is not available here (see engine.kernels.available)")
    if kind not in kinds():
        raise RuntimeError(f"engine/kernels.c's {kind} kernel is not usable here (this CPU and build have "
                           f"{', '.join(kinds())})")
    return lib


class GemmLinear(nn.Module, Packed):
    """fp32 linear through engine/kernels.c with the weight packed once (CPU), on AVX2 ("f32") or AVX-512
    ("f32_512", the same bits).  The dense `weight` stays (the HF model shares it:
    engine.codemodel.share_weights_with_hf); `packed` is the kernel's blocked copy."""

    RUNS: tuple[str, ...] = ("f32", "f32_512")     # the kinds this class runs

    def __init__(self, weight: torch.Tensor, kind: str = "f32"):
        nn.Module.__init__(self)
        Packed.__init__(self, self._lib(kind), weight, kind)
        self.weight = weight                                             # [N, K] fp32, dense

    @classmethod
    def _lib(cls, kind: str):
        if kind not in cls.RUNS:
            raise ValueError(f"engine/kernels.c: {cls.__name__} runs {' or '.join(cls.RUNS)}, not {kind!r}")
        return _usable(kind)

    def forward(self, x):                                                # x [..., K] fp32 -> [..., N]
        if torch._C._autograd._profiler_enabled():                      # a range the profile counts as GEMM
            with torch.profiler.record_function(GEMM_RANGE):
                return self.multiply(x)
        return self.multiply(x)


class GemmBf16Linear(GemmLinear):
    """bf16 weights (rounded once, at load) and activations (each row rounded as it enters), fp32 sums in a fixed
    order (AVX512_BF16's vdpbf16ps, "bf16"; or AMX tiles' tdpbf16ps, "amx_bf16": its own order): half the bytes of
    fp32 and twice (tiles: far more) the products per instruction; every row's bits its own, as GemmLinear's.  The
    dense fp32 `weight` stays, as GemmLinear's."""

    RUNS = ("bf16", "amx_bf16")

    def __init__(self, weight: torch.Tensor, kind: str = "bf16"):
        super().__init__(weight, kind)


class GemmInt8Linear(GemmLinear):
    """int8 weights with a scale per output column (quantize_weight: per output channel, symmetric), fp32
    activations and sums, through engine/kernels.c (CPU; "q8" on AVX2, "q8_512" the same bits on AVX-512): a step
    streams a quarter of the fp32 weight bytes.  Weight-only, so unlike the W8A8 engine.cpu.Int8Linear and
    GemmW8A8Linear the activations are not rounded; batch-invariant like GemmLinear."""

    RUNS: tuple[str, ...] = ("q8", "q8_512")

    def __init__(self, wq: torch.Tensor, scale: torch.Tensor, kind: str = "q8"):   # wq [N, K] int8, scale [N] fp32
        nn.Module.__init__(self)
        Packed.__init__(self, self._lib(kind), wq, kind, scale)


class GemmW8A8Linear(GemmInt8Linear):
    """W8A8 through AVX512_VNNI's vpdpbusd ("i8") or AMX tiles' tdpbusd ("amx_i8"): int8 weights per output column
    as GemmInt8Linear's, each row quantized to int8 as it enters (quantize_rows: its absmax / 127), exact int32
    sums, one fp32 rescale — the arithmetic of engine.cpu.Int8Linear (torch), so the same bits (w8a8_reference), at
    the speed of four products an instruction (tiles: a 16 x 16 x 64 block)."""

    RUNS = ("i8", "amx_i8")

    def __init__(self, wq: torch.Tensor, scale: torch.Tensor, kind: str = "i8"):
        super().__init__(wq, scale, kind)


PROJECTIONS = ("wqkv", "wo", "w13", "w2")   # a Block's linears, in chattts_step's table order


class DecodeStep:
    """engine/kernels.c's chattts_step: a decode step of the whole Llama (every layer, then the final norm) in one
    call, for a model whose block projections are all of one class and kind of ours (GemmLinear, GemmBf16Linear,
    GemmInt8Linear, GemmW8A8Linear: engine.attention.CStep runs it).
    The per-row path's decode step otherwise costs ~30 small torch ops per layer (norms, RoPE, cache writes,
    SiLU, residual adds) and a kernel call per projection, each with its own OpenMP fork; here one team does the
    lot.  Holds references to every tensor it points at.  `times` adds up the seconds spent in its GEMMs,
    attention and the rest (benchmarks/limits.step_profile reads them)."""

    def __init__(self, model):
        s = model.s
        self.lib = library()
        if self.lib is None or not self.supports(model):
            raise ValueError("chattts_step needs engine/kernels.c and projections all of one kind of ours")
        blocks = model.layers
        self.kind = blocks[0].wqkv.kind
        self.kv_dtype = torch.bfloat16 if KINDS[self.kind][2] == "bf16" else torch.float32   # the KV cache it reads
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
                t.w[i], t.scale[i], t.comp[i] = lin.packed.data_ptr(), _ptr(lin.scale), _ptr(lin.comp)
                self.keep += [a for a in (lin.packed, lin.scale, lin.comp) if a is not None]
        self.s = s
        self.times = torch.zeros(3, dtype=torch.float64)                 # GEMM, attention, rest (s)

    @staticmethod
    def supports(model) -> bool:
        """fp32 on CPU, every projection the same class and kind of ours, no padded output columns, 8-wide C, D,
        F."""
        s = model.s
        lins = [getattr(b, n) for b in model.layers for n in PROJECTIONS]
        cls, kind = (type(lins[0]), getattr(lins[0], "kind", None)) if lins else (None, None)
        return (isinstance(lins[0] if lins else None, GemmLinear)
                and all(type(lin) is cls and lin.kind == kind for lin in lins)
                and all(lin.out_features % COLUMN_ALIGN == 0 for lin in lins)
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
                              ctypes.addressof(self.table), kc.data_ptr(), vc.data_ptr(),
                              int(self.kv_dtype == torch.bfloat16), self.norm.data_ptr(), KINDS[self.kind][0], S,
                              sl.data_ptr(), ps.data_ptr(), ln.data_ptr(), self.cos.data_ptr(), self.sin.data_ptr(),
                              out.data_ptr(), torch.get_num_threads(), self.times.data_ptr())
        return out.view(B, 1, s.hidden)

    def _check_cache(self, cache) -> int:
        """The cache's length S, once every layer's keys and values are [cache.slots, Hkv, S, D] contiguous CPU
        tensors of this model's geometry in kv_dtype (ValueError otherwise)."""
        s, S = self.s, cache.max_len
        if len(cache.k) != s.layers or len(cache.v) != s.layers:
            raise ValueError(f"chattts_step: a cache of {len(cache.k)} layers for a model of {s.layers}")
        want = (cache.slots, s.kv_heads, S, s.head_dim)
        for name, tensors in (("k", cache.k), ("v", cache.v)):
            for t in tensors:
                _check(f"cache.{name}", t, (self.kv_dtype,), contiguous=True)
                if tuple(t.shape) != want:
                    raise ValueError(f"chattts_step: cache.{name} has shape {tuple(t.shape)}; expected {want}")
        return S
