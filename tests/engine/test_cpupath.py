"""engine/cpupath.py: which path a CPU engine runs — the candidates of a request, the fastest measured once and
remembered on disk (one answer per machine, whoever measures first), CHATTTS_RENDER_KERNELS.  The choice's
machinery runs on an injected timer over every kind (no expected value depends on this CPU); the real timer is
only checked to time every path it is given."""
from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from engine import cpupath, kernels  # noqa: E402
from engine.cpupath import BY_NAME, PATHS, candidates, choose  # noqa: E402
from engine.llama import LlamaShape  # noqa: E402
from tests.engine.kinds import why_not  # noqa: E402

SHAPE = LlamaShape(hidden=64, layers=2, heads=4, kv_heads=4, ffn=128, rope_theta=1e4, eps=1e-6, max_pos=64)


@pytest.fixture
def every_kind(tmp_path, monkeypatch):
    """Every kind usable (as on a CPU with all of them), a fresh cache root and no memory of earlier choices."""
    monkeypatch.setenv("CHATTTS_RENDER_CACHE", str(tmp_path))
    monkeypatch.delenv(kernels.ENV, raising=False)
    monkeypatch.setattr(kernels, "available", lambda: True)
    monkeypatch.setattr(kernels, "kinds", lambda: tuple(kernels.KINDS))
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    return tmp_path


class Timer:
    """An injected measure: seconds per step by path name; counts its calls and the paths it was given."""

    def __init__(self, **ms):
        self.ms, self.calls = ms, []

    def __call__(self, paths, shape, rows):
        self.calls.append(tuple(p.name for p in paths))
        return {p.name: self.ms.get(p.name.replace("-", "_"), 100) / 1e3 for p in paths}


def test_each_request_has_its_candidates_and_paths_of_one_name_share_their_bits():
    assert [p.name for p in candidates("auto", False)] == ["fp32-avx2", "fp32-avx512", "bf16-avx512", "bf16-amx"]
    assert [p.name for p in candidates("fp32", False)] == ["fp32-avx2", "fp32-avx512"]
    assert [p.name for p in candidates("bf16", False)] == ["bf16-avx512", "bf16-amx"]
    assert [p.name for p in candidates("auto", True)] == ["int8-avx2", "int8-avx512", "int8-vnni", "int8-amx"]
    assert {p for r in ("auto", "fp32", "bf16") for i in (False, True) for p in candidates(r, i)} == set(PATHS)
    for a in PATHS:                      # one version name <=> one arithmetic: the kinds run the same chains
        for b in PATHS:
            if a.tag == b.tag and a.int8 == b.int8 and a.dtype == b.dtype and a.kind != b.kind:
                assert kernels.SAME_BITS.get(a.kind) == b.kind or kernels.SAME_BITS.get(b.kind) == a.kind, (a, b)


def test_the_fastest_is_measured_once_and_remembered_on_disk(every_kind, monkeypatch):
    fast_bf16 = Timer(bf16_avx512=3, fp32_avx2=9, fp32_avx512=8)
    assert choose("auto", False, SHAPE, 32, fast_bf16) is BY_NAME["bf16-avx512"]
    assert fast_bf16.calls == [("fp32-avx2", "fp32-avx512", "bf16-avx512", "bf16-amx")]
    [file] = (every_kind / cpupath.CACHE_DIR).iterdir()
    data = json.loads(file.read_text())
    assert data["path"] == "bf16-avx512" and data["step_ms"]["fp32-avx2"] == 9 and data["key"]["rows"] == 32
    assert choose("auto", False, SHAPE, 32, fast_bf16) is BY_NAME["bf16-avx512"]     # this process: no file read
    monkeypatch.setattr(cpupath, "_CHOSEN", {})                                         # another process
    other_day = Timer(fp32_avx2=1)
    assert choose("auto", False, SHAPE, 32, other_day) is BY_NAME["bf16-avx512"] and other_day.calls == []
    assert choose("auto", False, SHAPE, 4, other_day) is BY_NAME["fp32-avx2"]        # another batch: its own
    assert len(other_day.calls) == 1 and len(list((every_kind / cpupath.CACHE_DIR).iterdir())) == 2


def test_whoever_writes_first_decides_for_every_process(every_kind):
    """A process that measured while another wrote its answer takes the written one: one machine, one path."""
    key = cpupath.cache_key(candidates("auto", False), "auto", False, SHAPE, 8)

    def rival(paths, shape, rows):                 # the other process writes while this one measures
        folder = every_kind / cpupath.CACHE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        name = cpupath._cache_file(key)
        name.write_text(json.dumps({"key": key, "path": "fp32-avx512"}))
        return {p.name: (1e-3 if p.name == "bf16-avx512" else 1.0) for p in paths}

    assert choose("auto", False, SHAPE, 8, rival) is BY_NAME["fp32-avx512"]


def test_a_damaged_cache_file_is_measured_again_and_replaced(every_kind):
    key = cpupath.cache_key(candidates("fp32", False), "fp32", False, SHAPE, 8)
    file = cpupath._cache_file(key)
    file.parent.mkdir(parents=True)
    file.write_text("{not json")
    t = Timer(fp32_avx512=1)
    assert choose("fp32", False, SHAPE, 8, t) is BY_NAME["fp32-avx512"] and len(t.calls) == 1
    assert json.loads(file.read_text())["path"] == "fp32-avx512"


def test_one_candidate_is_taken_without_measuring_and_none_without_kernels(every_kind, monkeypatch):
    t = Timer()
    monkeypatch.setattr(kernels, "kinds", lambda: tuple(k for k in kernels.KINDS if k not in kernels.TILE_KINDS))
    assert choose("bf16", False, SHAPE, 8, t) is BY_NAME["bf16-avx512"] and t.calls == []   # no AMX: one bf16
    monkeypatch.setattr(kernels, "kinds", lambda: ("f32", "q8"))                         # an AVX2-only CPU
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    assert choose("auto", False, SHAPE, 8, t) is BY_NAME["fp32-avx2"] and t.calls == []
    assert choose("bf16", False, SHAPE, 8, t) is None                                 # torch's bf16 then
    monkeypatch.setattr(kernels, "available", lambda: False)
    assert choose("auto", True, SHAPE, 8, t) is None


def test_the_environment_names_the_paths_allowed(every_kind, monkeypatch):
    t = Timer(bf16_avx512=1)
    monkeypatch.setenv(kernels.ENV, "fp32-avx2,int8-vnni")
    assert choose("auto", False, SHAPE, 8, t) is BY_NAME["fp32-avx2"] and t.calls == []
    assert choose("auto", True, SHAPE, 8, t) is BY_NAME["int8-vnni"]
    with pytest.raises(ValueError, match="none of them runs --dtype bf16 on this CPU"):
        choose("bf16", False, SHAPE, 8, t)
    monkeypatch.setenv(kernels.ENV, "fp64-avx9")
    with pytest.raises(ValueError, match=r"no path fp64-avx9 .*fp32-avx2"):
        choose("auto", False, SHAPE, 8, t)


def test_the_real_timer_times_a_step_of_every_path_it_is_given():
    have = [p for p in candidates("auto", False) + candidates("auto", True) if why_not(p.kind) is None]
    if not have:
        pytest.skip(why_not("f32"))
    seconds = cpupath.measure_steps(have, SHAPE, 3)
    assert set(seconds) == {p.name for p in have}
    assert all(0 < s < 10 and math.isfinite(s) for s in seconds.values())


def test_an_auto_engine_adopts_the_fp32_versions():
    """Whatever auto runs here, it keeps what the fp32 engine (auto before the paths) and every other float path
    rendered; an explicit dtype keeps its own."""
    from engine.api import EngineOptions
    from engine.engine import ADOPTED_VERSIONS, adopted_versions, engine_version

    fp, auto = "fp", EngineOptions(dtype="auto")
    for path in candidates("auto", False):
        adopts = adopted_versions(fp, auto, path.dtype, path)
        mine = engine_version(fp, auto, path.dtype, path=path)
        assert mine not in adopts
        assert {engine_version(fp, auto, p.dtype, path=p) for p in candidates("auto", False)} - {mine} <= set(adopts)
        assert {f"ours{v}-fp-fp32-cpu" for v in ADOPTED_VERSIONS} <= set(adopts)
    fp32 = EngineOptions(dtype="fp32")
    assert not any("bf16" in v for v in adopted_versions(fp, fp32, "fp32", BY_NAME["fp32-avx512"]))
