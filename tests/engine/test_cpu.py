"""engine/cpu.py's CpuBackend: one object builds a CPU engine's back-end and names it.  Its names are the engine
versions' (so every content key's): pinned here, for every path and the back-end without our kernels, to the
strings they had before the object existed — written out from the formula on injected machines (the CPU's flags,
torch's dispatch level, oneDNN present or not, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS), never read from this
one.  And what `pack` builds is what the name says."""
from __future__ import annotations

import ast

import pytest

torch = pytest.importorskip("torch")

from engine import cpu, kernels  # noqa: E402
from engine.api import EngineOptions, EngineRecord  # noqa: E402
from engine.attention import CStep, PerRow  # noqa: E402
from engine.cpu import NO_KERNELS, CpuBackend, Int8Linear, PackedLinear, onednn_available  # noqa: E402
from engine.cpupath import BY_NAME, random_state  # noqa: E402
from engine.engine import engine_version  # noqa: E402
from engine.llama import LlamaShape, build_llama  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.engine.kinds import why_not  # noqa: E402

AVX2 = {"sse4_1", "sse4_2", "avx", "avx2", "fma"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"}
SHAPE = LlamaShape(hidden=64, layers=2, heads=4, kv_heads=4, ffn=128, rope_theta=1e4, eps=1e-6, max_pos=64)

# (machine, request, back-end) -> the engine version; "off" is the back-end without our kernels.  A bf16 path vocodes in
# bf16 too (engine/vocoder.py, issue 43: +vocoder_bf16); torch's own bf16 (off) vocodes in fp32
MACHINES = {"avx2": ("AVX2", AVX2, True, {}), "avx2-mkl": ("AVX2", AVX2, False, {}),
            "avx512": ("AVX512", AVX512, True, {}), "avx512-capped": ("AVX512", AVX512, True,
                                                                         {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
            "avx512-mkl": ("AVX512", AVX512, False, {}), "avx512-mkl-capped": ("AVX512", AVX512, False,
                                                                               {"MKL_ENABLE_INSTRUCTIONS": "AVX2"})}
VERSIONS = [
    ("avx2", "auto", False, "fp32-avx2", "ours6-fp-fp32-cpu-kernels-aten_avx2"),
    ("avx2", "fp32", False, "fp32-avx512", "ours6-fp-fp32-cpu-kernels-aten_avx2"),       # the same bits
    ("avx2", "auto", False, "bf16-avx512", "ours6-fp-bf16-cpu-kernels_avx512bf16-aten_avx2+vocoder_bf16"),
    ("avx2", "auto", True, "int8-avx2", "ours6-fp-fp32-cpu-kernels-aten_avx2+int8"),
    ("avx2", "fp32", True, "int8-avx512", "ours6-fp-fp32-cpu-kernels-aten_avx2+int8"),
    ("avx2", "auto", True, "int8-vnni", "ours6-fp-fp32-cpu-kernels_avx512vnni-aten_avx2+int8"),
    ("avx2", "auto", False, "off", "ours6-fp-fp32-cpu-onednn-avx2-aten_avx2"),
    ("avx2", "bf16", False, "off", "ours6-fp-bf16-cpu-aten_avx2"),
    ("avx2", "auto", True, "off", "ours6-fp-fp32-cpu-onednn-avx2-aten_avx2+int8"),
    ("avx2-mkl", "fp32", False, "off", "ours6-fp-fp32-cpu-mkl-avx2-aten_avx2"),
    ("avx512", "fp32", False, "fp32-avx512", "ours6-fp-fp32-cpu-kernels-aten_avx512"),
    ("avx512", "bf16", False, "bf16-avx512", "ours6-fp-bf16-cpu-kernels_avx512bf16-aten_avx512+vocoder_bf16"),
    ("avx512", "auto", False, "bf16-amx", "ours6-fp-bf16-cpu-kernels_amxbf16-aten_avx512+vocoder_bf16"),
    ("avx512", "auto", True, "int8-vnni", "ours6-fp-fp32-cpu-kernels_avx512vnni-aten_avx512+int8"),
    ("avx512", "auto", True, "int8-amx", "ours6-fp-fp32-cpu-kernels_avx512vnni-aten_avx512+int8"),   # vnni's bits
    ("avx512", "auto", False, "off", "ours6-fp-fp32-cpu-onednn-avx512_core_bf16-aten_avx512"),
    ("avx512", "bf16", False, "off", "ours6-fp-bf16-cpu-aten_avx512"),
    ("avx512-capped", "auto", False, "off", "ours6-fp-fp32-cpu-onednn-avx2-aten_avx512"),
    ("avx512-mkl", "auto", False, "off", "ours6-fp-fp32-cpu-mkl-avx512-aten_avx512"),
    ("avx512-mkl", "fp32", True, "off", "ours6-fp-fp32-cpu-mkl-avx512-aten_avx512+int8"),
    ("avx512-mkl-capped", "auto", False, "off", "ours6-fp-fp32-cpu-mkl-avx2-aten_avx512"),
]


@pytest.fixture
def machine(monkeypatch):
    """Make this process look like one of MACHINES (the back-ends' names read nothing else of it)."""
    def become(name: str) -> None:
        aten, flags, onednn, env = MACHINES[name]
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: aten)
        monkeypatch.setattr(cpu, "cpu_flags", lambda: flags)
        monkeypatch.setattr(cpu, "onednn_available", lambda: onednn)
        for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
            monkeypatch.delenv(var, raising=False)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
    return become


def backend(name: str, dtype: str, int8: bool) -> CpuBackend:
    return CpuBackend.without_kernels("fp32" if dtype == "auto" else dtype, int8) if name == NO_KERNELS \
        else CpuBackend.of(BY_NAME[name])


@pytest.mark.parametrize("where, dtype, int8, name, version", VERSIONS)
def test_every_back_ends_engine_version_is_the_one_it_had(machine, where, dtype, int8, name, version):
    machine(where)
    b = backend(name, dtype, int8)
    opts = EngineOptions(dtype=dtype, int8=int8)       # type: ignore[arg-type]
    assert engine_version("fp", opts, b.dtype, cpu=b) == version
    v5 = f"ours5-fp-{b.dtype}-cpu" + "+int8" * int8 + "+vocoder_bf16" * version.endswith("+vocoder_bf16")
    assert engine_version("fp", opts, b.dtype, "5", cpu=b) == v5
    r = EngineRecord.of_version(version)                         # a book's rows, read back as the back-end they name
    assert r is not None and (r.dtype, r.int8, r.backend, r.version) == (b.dtype, int8, b.tag, version)


def test_versions_that_name_no_cpu_back_end_give_no_record():
    assert EngineRecord.of_version("ours5-fp-fp32-cpu") is None                       # before back-ends were named
    assert EngineRecord.of_version("ours6-fp-bf16-cuda+compile") is None
    assert EngineRecord.of_version("ours6-fp-fp32-cpu-onnx-ort1.32-cpu") is None
    assert EngineRecord.of_version("speech-standin-1") is None                        # a test's stand-in engine


@pytest.fixture
def llama():
    return build_llama(SHAPE, random_state(SHAPE))


def test_the_back_end_without_kernels_builds_what_it_names(llama):
    """oneDNN's packed linears (else MKL's dense F.linear) and per-row SDPA; with --int8 the W8A8 Int8Linear for the
    block projections; bf16 torch's own: dense."""
    head = torch.randn(32, SHAPE.hidden)
    b = CpuBackend.without_kernels("fp32", True)
    heads = b.pack(llama, head)
    assert all(isinstance(getattr(blk, n), Int8Linear) for blk in llama.layers for n in kernels.PROJECTIONS)
    assert isinstance(llama.attention, PerRow)
    if onednn_available():
        assert b.kind == "onednn" and b.tag.startswith("onednn-") and isinstance(heads, PackedLinear)
    else:
        assert b.kind == "mkl" and b.tag.startswith("mkl-") and heads is None
    bf16 = CpuBackend.without_kernels("bf16", False)
    assert (bf16.kind, bf16.model_dtype, bf16.tag) == ("torch", "bf16", cpu.aten_level())


@pytest.mark.parametrize("name", ["fp32-avx2", "int8-avx2"])
def test_a_path_builds_its_kind_and_the_whole_decode_step(llama, name):
    p = BY_NAME[name]
    if why := why_not(p.kind):
        pytest.skip(why)
    b = CpuBackend.of(p)
    heads = b.pack(llama, torch.randn(32, SHAPE.hidden))
    assert all(getattr(blk, n).kind == p.kind for blk in llama.layers for n in kernels.PROJECTIONS)
    assert isinstance(llama.attention, CStep) and heads.kind == p.heads and b.model_dtype == "fp32"
    assert b.tag == f"kernels-{cpu.aten_level()}"


def test_attach_kernels_has_one_caller():
    """The attention strategy follows the projections in one place (engine.cpu.pack_linears, which every
    back-end's pack goes through), so no model keeps a strategy made for other weights."""
    calls = []
    for pkg in ("engine", "tasks", "flows", "benchmarks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) \
                        == "attach_kernels":
                    calls.append(str(path.relative_to(ROOT)))
    assert calls == ["engine/cpu.py"]
