"""The batch-invariance tests of the real kernels at every CPU dispatch level the machine has, on one machine.

oneDNN and MKL pick their kernels (and so which call sizes keep a row's bits) by the CPU's instruction set: on
AVX2 oneDNN's packed linear takes rows in blocks of 6 and a block of 1-3 rows differs, on AVX-512 every size is
invariant, with bf16 or AMX other kernels again.  Both honour an environment cap read once at start-up
(ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS; ATEN_CPU_CAPABILITY holds torch's own vectorized ops likewise), so
each level runs the invariance tests in a fresh interpreter: the default (no cap), then every oneDNN cap of
LEVELS the CPU supports (engine.cpu.ONEDNN_ISAS: the /proc/cpuinfo flags each needs); a level the CPU lacks is
skipped with the flags it misses.  So an AVX-512 machine also covers what an AVX2-only one runs, wherever CI runs.

The children run only the real kernels' invariance tests, at one thread, with the smallest workloads
(INVARIANCE_TESTS: MKL's dense linears and oneDNN's packed ones, batched == alone and one padded call per step).
The tests of the machinery run on test doubles, which no cap changes, and engine/kernels.c's own code takes no
cap: both run once, in the suite itself.  A new path whose kernels a cap changes adds its test here.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from engine.cpu import ONEDNN_ISAS
from engine.kernelbuild import cpu_flags

ROOT = Path(__file__).resolve().parents[2]
CHILD = "CHATTTS_RENDER_ISA_CHILD"          # set in the child: this file never runs inside itself
TIMEOUT_S = 600
ISA_VARS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")
# level (a oneDNN ISA name) -> (its caps for oneDNN, MKL and ATen; what oneDNN's verbose "isa:" line then says,
# and what it must not say).  MKL's and ATen's nearest levels: MKL AVX512_E3 is AVX-512 with VNNI and bf16,
# AVX512_E4 adds AMX; ATen has no level above avx512.
LEVELS = {
    "default": ((), None, None),
    "avx2": (("AVX2", "AVX2", "avx2"), "AVX2", "AVX-512"),
    "avx512_core": (("AVX512_CORE", "AVX512", "avx512"), "AVX-512", "DL Boost"),
    "avx512_core_bf16": (("AVX512_CORE_BF16", "AVX512_E3", "avx512"), "bfloat16", "AMX"),
    "avx512_core_amx": (("AVX512_CORE_AMX", "AVX512_E4", "avx512"), "AMX", None),
}
INVARIANCE_TESTS = (                        # only these run in the child: seconds, not the suite
    "tests/engine/test_generate.py::test_forced_count_and_batched_equals_alone_bitwise[False]",
    "tests/engine/test_generate.py::test_forced_count_and_batched_equals_alone_bitwise[True]",
    "tests/engine/test_generate.py::test_one_padded_call_per_step_and_batched_equals_alone[1-False]",
    "tests/engine/test_generate.py::test_one_padded_call_per_step_and_batched_equals_alone[1-True]",
)


def child_env(level: str) -> dict:
    """The environment of the child at `level`: this one without any ISA cap, plus the level's caps."""
    env = {k: v for k, v in os.environ.items() if k not in ISA_VARS}
    caps = LEVELS[level][0]
    env.update(dict(zip(ISA_VARS, caps)), **{CHILD: "1", "OMP_NUM_THREADS": "1"})
    return env


def missing_flags(level: str) -> set[str]:
    """The /proc/cpuinfo flags this CPU lacks for oneDNN's `level` (none for the default)."""
    if level == "default":
        return set()
    return dict(ONEDNN_ISAS)[level] - cpu_flags()


def test_every_level_is_a_onednn_isa_of_engine_cpu():
    """Each level caps oneDNN at its own name, one engine.cpu.ONEDNN_ISAS knows the CPU flags of."""
    assert all(level in dict(ONEDNN_ISAS) and caps[0].lower() == level
               for level, (caps, _, _) in LEVELS.items() if level != "default")


@pytest.mark.skipif(os.environ.get(CHILD) == "1", reason="already the child of test_isa_levels")
# The default level (no cap) is what the suite itself runs INVARIANCE_TESTS at: its child run is slow only.
@pytest.mark.parametrize("level", [pytest.param(lv, marks=pytest.mark.slow) if lv == "default" else lv
                                   for lv in LEVELS])
def test_invariance_tests_pass_at_each_cpu_dispatch_level(level):
    if level != "default" and platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"{level} is an x86-64 level")
    if missing := missing_flags(level):
        pytest.skip(f"this CPU has no {level}: it lacks {' '.join(sorted(missing))}")
    # ONEDNN_VERBOSE=check: oneDNN prints its ISA when it starts (and errors only); -s lets it through pytest
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *INVARIANCE_TESTS],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                       env={**child_env(level), "ONEDNN_VERBOSE": "check"})
    isa = next((line for line in r.stdout.splitlines() if ",isa:" in line), "")
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
    assert r.returncode == 0, f"{level} ({isa or 'no oneDNN'}):\n{tail}"
    assert " passed" in tail and " failed" not in tail, tail
    _, says, not_says = LEVELS[level]
    if isa and says:                       # without oneDNN there is nothing to cap, and nothing is printed
        assert says in isa and (not_says is None or not_says not in isa), isa
