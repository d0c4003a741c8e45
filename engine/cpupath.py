"""Which path a CPU engine runs: the kernels this CPU has for the dtype asked, the fastest measured once, remembered.

    path = choose("auto", False, shape, rows=32)   # a CpuPath, or None: no kernels of ours here
    path.name, path.dtype, path.tag       # "bf16-avx512", "bf16", "kernels_avx512bf16" (the engine version's)

A *path* is one of engine/kernels.c's kinds for the GPT's block projections — the whole decode step runs on it
(engine.attention.CStep) — and the dtype it makes the engine.  Every path is exact: each output of its linear is
one chain in a fixed order, so a row's bits never depend on its batch or the thread count (engine/kernels.py);
paths differ in speed and in rounding.  The candidates for a request (`candidates`: `--dtype auto` takes the
float paths, fp32 and bf16; `fp32`/`bf16` one dtype; `--int8` the int8 paths — quantization stays opt-in) that
this CPU and build have (kernels.kinds()) are timed on the model's real shapes at the engine's batch: a decode step
of MEASURE_LAYERS layers of random weights (enough to stream from memory as the model does), MEASURE_ROUNDS rounds
in turn, the best of each, on one thread (MEASURE_THREADS: every thread of a team runs the same kernel on its share
of the columns, so one thread ranks the paths as a team does on a quiet machine; on a shared one a team's barrier
spins, while its other thread waits for a busy core, make its timings noise — measured here at 4 rows, 2 threads:
fp32-avx2 31.6 ms against bf16 156 ms one time, 23.9 against 12.5 another).  The choice is written to
`<cache_root()>/paths/<key>.json`, keyed by the CPU's model name and flags, torch's and oneDNN's versions, the
request, the model's shape, the rows and the kernels' source, so later loads pay nothing; the file is written once
(engine.atomic.write_once) and every process
then reads the one answer, so the processes of one machine never run different paths for the same request.

`CHATTTS_RENDER_KERNELS` (engine.kernels.ENV): `off` — none of our kernels (oneDNN, MKL, torch's bf16); a comma
list of path names — only those (a request none of them runs is a ValueError).  The AMX paths (bf16-amx, int8-amx:
engine/kernels.c's tiles, whose sums are again one chain per output in a fixed order, rows padded to whole tiles,
so as exact) are candidates only where kernels.kinds() has their kinds: an AMX CPU whose self-check in a child
process passed (engine/kernels.py).  No AMX CPU has run them yet.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch  # (engine.kernels loads it already)

from engine import kernelbuild, kernels
from engine.assets import cache_root
from engine.atomic import read_json, write_once
from engine.attention import CStep
from engine.cpu import pack_path
from engine.llama import KVCache, build_llama


@dataclass(frozen=True)
class CpuPath:
    name: str                     # what CHATTTS_RENDER_KERNELS and the benchmarks call it
    dtype: str                    # the engine's dtype: "fp32" | "bf16" (int8 paths are fp32 engines, --int8)
    int8: bool
    kind: str                     # engine/kernels.c's kind of the block projections
    heads: str                    # the kind of the code heads (fp32, as upstream; the same bits either way)
    tag: str                      # the engine version's name of its arithmetic: paths of the same bits share one


PATHS = (
    CpuPath("fp32-avx2", "fp32", False, "f32", "f32", "kernels"),
    CpuPath("fp32-avx512", "fp32", False, "f32_512", "f32_512", "kernels"),        # fp32-avx2's bits
    CpuPath("bf16-avx512", "bf16", False, "bf16", "f32_512", "kernels_avx512bf16"),
    CpuPath("int8-avx2", "fp32", True, "q8", "f32", "kernels"),
    CpuPath("int8-avx512", "fp32", True, "q8_512", "f32_512", "kernels"),          # int8-avx2's bits
    CpuPath("int8-vnni", "fp32", True, "i8", "f32_512", "kernels_avx512vnni"),
    CpuPath("bf16-amx", "bf16", False, "amx_bf16", "f32_512", "kernels_amxbf16"),     # its own rounding order
    CpuPath("int8-amx", "fp32", True, "amx_i8", "f32_512", "kernels_avx512vnni"),     # int8-vnni's bits (exact)
)
BY_NAME = {p.name: p for p in PATHS}
FLOAT_DTYPES = ("fp32", "bf16")   # what --dtype auto may take on CPU
MEASURE_BYTES = 96 << 20          # fp32 weights the timed step streams at least: 3x this CPU's 32 MiB L3
MEASURE_POSITIONS = 64            # keys each row attends over in the timed step
MEASURE_ROUNDS = 5                # every candidate's step this many times, in turn; the best of each counts
MEASURE_THREADS = 1               # torch threads of the timed steps (the module docstring says why one)
CACHE_DIR = "paths"               # under cache_root()

_CHOSEN: dict[tuple, CpuPath | None] = {}   # this process's answers


def candidates(dtype: str, int8: bool) -> tuple[CpuPath, ...]:
    """The paths a request may run, on any CPU: `--int8` the int8 ones; `auto` the float ones (fp32, bf16); `fp32`
    or `bf16` that dtype's."""
    if int8:
        return tuple(p for p in PATHS if p.int8)
    want = FLOAT_DTYPES if dtype == "auto" else (dtype,)
    return tuple(p for p in PATHS if not p.int8 and p.dtype in want)


def allowed() -> tuple[str, ...] | None:
    """The path names CHATTTS_RENDER_KERNELS allows (None: any; "off" is engine.kernels' business)."""
    value = os.environ.get(kernels.ENV, "").strip().lower()
    if value in ("", "on", "auto", "off", "0", "no", "false"):
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if bad := [n for n in names if n not in BY_NAME]:
        raise ValueError(f"{kernels.ENV}={value}: no path {', '.join(bad)} (the paths: {', '.join(BY_NAME)})")
    return names


def usable(dtype: str, int8: bool) -> tuple[CpuPath, ...]:
    """The candidates this CPU and build have (kernels.kinds()), within CHATTTS_RENDER_KERNELS; ValueError where
    that variable names paths and none of them runs this request here."""
    have = [p for p in candidates(dtype, int8) if p.kind in kernels.kinds() and p.heads in kernels.kinds()]
    names = allowed()
    if names is None:
        return tuple(have)
    if not (mine := [p for p in have if p.name in names]):
        what = "--int8" if int8 else f"--dtype {dtype}"
        raise ValueError(f"{kernels.ENV}={','.join(names)}: none of them runs {what} on this CPU (it has "
                         f"{', '.join(p.name for p in have) or 'none'})")
    return tuple(mine)


def choose(dtype: str, int8: bool, shape, rows: int, measure=None) -> CpuPath | None:
    """The path a CPU engine of this request runs (see the module docstring): the one usable candidate, or the
    fastest measured (`measure(paths, shape, rows)` -> seconds per step each: measure_steps by default),
    remembered on disk; None where none is usable (no kernels: the engine falls back to oneDNN, MKL or torch)."""
    paths = usable(dtype, int8) if kernels.available() else ()
    if len(paths) < 2:
        return paths[0] if paths else None
    memo = (dtype, int8, shape, rows, tuple(p.name for p in paths))
    if memo not in _CHOSEN:
        _CHOSEN[memo] = _remembered(paths, dtype, int8, shape, rows, measure or measure_steps)
    return _CHOSEN[memo]


def cache_key(paths, dtype: str, int8: bool, shape, rows: int) -> dict:
    """What a measured choice depends on: the CPU, torch and oneDNN, the request, the shapes, the kernels."""
    return {"cpu": _cpu_model(), "flags": sorted(kernelbuild.cpu_flags() & _FLAGS), "machine": platform.machine(),
            "torch": torch.__version__, "onednn": _onednn_version(), "dtype": dtype, "int8": int8,
            "paths": [p.name for p in paths], "shape": [shape.hidden, shape.heads, shape.kv_heads, shape.ffn],
            "rows": rows, "threads": MEASURE_THREADS,
            "kernels": hashlib.sha256(kernelbuild.SOURCE.read_bytes()).hexdigest()[:16]}


def _remembered(paths, dtype, int8, shape, rows, measure) -> CpuPath:
    """The choice in the cache file for this key, else measured and written (once: another process's answer, when
    it wrote first, is the one taken)."""
    key = cache_key(paths, dtype, int8, shape, rows)
    file = _cache_file(key)

    def written() -> CpuPath | None:
        seen = read_json(file)
        return BY_NAME[seen["path"]] if seen.get("key") == key and seen.get("path") in key["paths"] else None

    if (known := written()) is not None:
        return known
    seconds = measure(paths, shape, rows)
    best = min(paths, key=lambda p: seconds[p.name])
    data = (json.dumps({"key": key, "path": best.name, "step_ms": {k: round(v * 1e3, 3) for k, v in seconds.items()}},
                       indent=1) + "\n").encode()
    file.parent.mkdir(parents=True, exist_ok=True)
    if not write_once(file, data):                            # another process measured first, or a damaged file
        if (known := written()) is not None:
            return known
        file.unlink(missing_ok=True)
        write_once(file, data)
    return best


def _cache_file(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / CACHE_DIR / f"{digest}.json"


_FLAGS = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni", "amx_tile",
          "amx_bf16", "amx_int8", "avx512_fp16"}   # the flags a kind may need (the key's, not the whole list)


def _cpu_model() -> str:
    try:
        line = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name"))
        return line.split(":", 1)[1].strip()
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _onednn_version() -> str:
    line = next((ln for ln in torch.__config__.show().splitlines() if "DNN" in ln), "")
    return next((w for w in line.split() if w.startswith("v") and w[1:2].isdigit()), "")


def measure_steps(paths, shape, rows: int) -> dict[str, float]:
    """Seconds per decode step of `rows` rows on each path: random weights of `shape` (its first layers, as many as
    MEASURE_BYTES of fp32 weights need, at least one), rows over MEASURE_POSITIONS keys, MEASURE_THREADS threads;
    MEASURE_ROUNDS rounds of every path in turn, the best of each."""
    per_layer = 4 * shape.hidden * ((shape.heads + 2 * shape.kv_heads) * shape.head_dim + 3 * shape.ffn) \
        + 4 * shape.heads * shape.head_dim * shape.hidden
    s = replace(shape, layers=max(1, min(shape.layers, -(-MEASURE_BYTES // per_layer))))
    state = random_state(s)
    old = torch.get_num_threads()
    torch.set_num_threads(MEASURE_THREADS)
    try:
        steps = {}
        for p in paths:
            llama = pack_path(build_llama(s, state), p)
            cache = KVCache(s, rows, MEASURE_POSITIONS, "cpu", llama.attention.kv_dtype or torch.float32)
            x = torch.randn(rows, 1, s.hidden, generator=torch.Generator().manual_seed(0))
            pos = torch.full((rows, 1), MEASURE_POSITIONS - 1)
            args = (x, pos, cache, torch.arange(rows), [MEASURE_POSITIONS] * rows)
            if not isinstance(llama.attention, CStep):
                raise RuntimeError(f"path {p.name}: its decode step is not whole in engine/kernels.c")
            llama.attention.decode(*args)                                       # warm-up: pages, caches
            steps[p.name] = (llama.attention.decode, args)
        best = {name: float("inf") for name in steps}
        for _ in range(MEASURE_ROUNDS):
            for name, (step, args) in steps.items():
                t0 = time.perf_counter()
                step(*args)
                best[name] = min(best[name], time.perf_counter() - t0)
        return best
    finally:
        torch.set_num_threads(old)


def random_state(s) -> dict:
    """An HF LlamaModel state dict of shape `s` with random weights (std 0.02, norms 1): what build_llama reads."""
    g = torch.Generator().manual_seed(0)
    w = lambda n, k: torch.randn(n, k, generator=g) * 0.02                  # noqa: E731
    D, state = s.head_dim, {"norm.weight": torch.ones(s.hidden)}
    for i in range(s.layers):
        p = f"layers.{i}."
        state.update({p + "self_attn.q_proj.weight": w(s.heads * D, s.hidden),
                      p + "self_attn.k_proj.weight": w(s.kv_heads * D, s.hidden),
                      p + "self_attn.v_proj.weight": w(s.kv_heads * D, s.hidden),
                      p + "self_attn.o_proj.weight": w(s.hidden, s.heads * D),
                      p + "mlp.gate_proj.weight": w(s.ffn, s.hidden), p + "mlp.up_proj.weight": w(s.ffn, s.hidden),
                      p + "mlp.down_proj.weight": w(s.hidden, s.ffn),
                      p + "input_layernorm.weight": torch.ones(s.hidden),
                      p + "post_attention_layernorm.weight": torch.ones(s.hidden)})
    return state
