"""The batch-invariance tests at both CPU dispatch levels on one machine: as the CPU is, and held to AVX2.

oneDNN and MKL pick their kernels (and so which call sizes keep a row's bits) by the CPU's instruction set:
on AVX2 oneDNN's packed linear takes rows in blocks of 6 and a block of 1-3 rows differs, on AVX-512 every
size is invariant.  Both honour an environment cap read once at start-up (ONEDNN_MAX_CPU_ISA,
MKL_ENABLE_INSTRUCTIONS; ATEN_CPU_CAPABILITY holds torch's own vectorized ops likewise), so each level runs
the invariance tests in a fresh interpreter.  On an AVX2-only CPU both levels are the same; on an AVX-512 one
this covers what an AVX2-only machine would run, wherever CI runs.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
CHILD = "CHATTTS_RENDER_ISA_CHILD"          # set in the child: this file never runs inside itself
TIMEOUT_S = 600
ISA_VARS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")
LEVELS = {"default": {}, "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                                  "ATEN_CPU_CAPABILITY": "avx2"}}
INVARIANCE_TESTS = (                        # only these run in the child (seconds, not the suite)
    "tests/engine/test_generate.py::test_forced_count_and_batched_equals_alone_bitwise",
    "tests/engine/test_generate.py::test_one_padded_call_per_step_and_batched_equals_alone",
    "tests/engine/test_generate.py::test_calls_at_an_unmeasured_size_break_batched_equals_alone",
    "tests/engine/test_generate.py::test_without_a_call_size_steps_fall_back_to_canonical_chunks",
    "tests/engine/test_engine.py::test_batched_equals_alone_bitwise_under_continuous_refill",
)


def child_env(level: str) -> dict:
    """The environment of the child at `level`: this one without any ISA cap, plus the level's caps."""
    env = {k: v for k, v in os.environ.items() if k not in ISA_VARS}
    env.update(LEVELS[level], **{CHILD: "1", "OMP_NUM_THREADS": "1"})
    return env


@pytest.mark.skipif(os.environ.get(CHILD) == "1", reason="already the child of test_isa_levels")
@pytest.mark.parametrize("level", sorted(LEVELS))
def test_invariance_tests_pass_at_each_cpu_dispatch_level(level):
    if level == "avx2" and platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("AVX2 is an x86-64 level")
    env = child_env(level)
    probe = ("import torch; from engine.cpu import PackedLinear; "
             "PackedLinear(torch.ones(8, 8))(torch.ones(4, 8))")       # oneDNN prints its ISA when it starts
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**env, "ONEDNN_VERBOSE": "1", "PYTHONPATH": str(ROOT)})
    isa = next((line for line in r.stdout.splitlines() if ",isa:" in line), "")
    if level == "avx2" and isa:            # without oneDNN there is nothing to cap, and nothing is printed
        assert "AVX-512" not in isa and "AVX2" in isa, isa
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *INVARIANCE_TESTS],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
    assert r.returncode == 0, f"{level} ({isa or 'no oneDNN'}):\n{tail}"
    assert " passed" in tail and " failed" not in tail, tail
