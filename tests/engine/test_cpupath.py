"""engine/cpupath.py: which back-end a CPU engine runs — the candidates of a request, the stable choice (the fixed
order's first unless another is faster by MARGIN in every round) measured once and remembered on disk (one answer
per machine, whoever measures first), a book's record followed without measuring, CHATTTS_RENDER_KERNELS and the
tests' random choice.  The choice's machinery runs on an injected timer over every kind (no expected value depends
on this CPU or a timing); the real timer is only checked to time every path it is given."""
from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from engine import cpu, cpupath, kernels  # noqa: E402
from engine.api import EngineMismatch, EngineRecord  # noqa: E402
from engine.cpu import NO_KERNELS, CpuBackend  # noqa: E402
from engine.cpupath import BY_NAME, MARGIN, MEASURE_ROUNDS, PATHS, candidates, choose, follow, runnable  # noqa: E402
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
    monkeypatch.delenv(cpupath.RANDOM_ENV, raising=False)
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    monkeypatch.setattr(cpu, "onednn_available", lambda: True)
    return tmp_path


class Timer:
    """An injected measure: ms per step by path name, the same every round or one value a round (a list);
    counts its calls and the paths it was given."""

    def __init__(self, **ms):
        self.ms, self.calls = ms, []

    def __call__(self, paths, shape, rows):
        self.calls.append(tuple(p.name for p in paths))
        rounds = {p.name: self.ms.get(p.name.replace("-", "_"), 100) for p in paths}
        return {name: [t / 1e3 for t in (v if isinstance(v, list) else [v] * MEASURE_ROUNDS)]
                for name, v in rounds.items()}


def chose(backend, name: str) -> bool:
    return backend.name == name and backend.path is BY_NAME[name]


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
    assert chose(choose("auto", False, SHAPE, 32, fast_bf16), "bf16-avx512")
    assert fast_bf16.calls == [("fp32-avx2", "fp32-avx512", "bf16-avx512", "bf16-amx")]
    [file] = (every_kind / cpupath.CACHE_DIR).iterdir()
    data = json.loads(file.read_text())
    assert data["path"] == "bf16-avx512" and data["step_ms"]["fp32-avx2"] == [9] * MEASURE_ROUNDS
    assert data["key"]["rows"] == 32 and data["key"]["margin"] == MARGIN
    assert chose(choose("auto", False, SHAPE, 32, fast_bf16), "bf16-avx512")     # this process: no file read
    monkeypatch.setattr(cpupath, "_CHOSEN", {})                                    # another process
    other_day = Timer(fp32_avx2=1)
    assert chose(choose("auto", False, SHAPE, 32, other_day), "bf16-avx512") and other_day.calls == []
    assert chose(choose("auto", False, SHAPE, 4, other_day), "fp32-avx2")        # another batch: its own
    assert len(other_day.calls) == 1 and len(list((every_kind / cpupath.CACHE_DIR).iterdir())) == 2


def test_whoever_writes_first_decides_for_every_process(every_kind):
    """A process that measured while another wrote its answer takes the written one: one machine, one path."""
    key = cpupath.cache_key(candidates("auto", False), "auto", False, SHAPE, 8)

    def rival(paths, shape, rows):                 # the other process writes while this one measures
        folder = every_kind / cpupath.CACHE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        name = cpupath._cache_file(key)
        name.write_text(json.dumps({"key": key, "path": "fp32-avx512"}))
        return {p.name: [1e-3 if p.name == "bf16-avx512" else 1.0] * MEASURE_ROUNDS for p in paths}

    assert chose(choose("auto", False, SHAPE, 8, rival), "fp32-avx512")


def test_a_damaged_cache_file_is_measured_again_and_replaced(every_kind):
    key = cpupath.cache_key(candidates("fp32", False), "fp32", False, SHAPE, 8)
    file = cpupath._cache_file(key)
    file.parent.mkdir(parents=True)
    file.write_text("{not json")
    t = Timer(fp32_avx512=1)
    assert chose(choose("fp32", False, SHAPE, 8, t), "fp32-avx512") and len(t.calls) == 1
    assert json.loads(file.read_text())["path"] == "fp32-avx512"


def test_one_candidate_is_taken_without_measuring_and_none_without_kernels(every_kind, monkeypatch):
    t = Timer()
    monkeypatch.setattr(kernels, "kinds", lambda: tuple(k for k in kernels.KINDS if k not in kernels.TILE_KINDS))
    assert chose(choose("bf16", False, SHAPE, 8, t), "bf16-avx512") and t.calls == []   # no AMX: one bf16
    monkeypatch.setattr(kernels, "kinds", lambda: ("f32", "q8"))                         # an AVX2-only CPU
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    assert chose(choose("auto", False, SHAPE, 8, t), "fp32-avx2") and t.calls == []
    bf16 = choose("bf16", False, SHAPE, 8, t)                                         # torch's bf16 then
    assert (bf16.name, bf16.path, bf16.kind, bf16.dtype) == (NO_KERNELS, None, "torch", "bf16")
    monkeypatch.setattr(kernels, "available", lambda: False)
    int8 = choose("auto", True, SHAPE, 8, t)                                          # oneDNN's, W8A8 beside it
    assert (int8.name, int8.path, int8.kind, int8.dtype, int8.int8) == (NO_KERNELS, None, "onednn", "fp32", True)


def test_the_environment_names_the_paths_allowed(every_kind, monkeypatch):
    t = Timer(bf16_avx512=1)
    monkeypatch.setenv(kernels.ENV, "fp32-avx2,int8-vnni")
    assert chose(choose("auto", False, SHAPE, 8, t), "fp32-avx2") and t.calls == []
    assert chose(choose("auto", True, SHAPE, 8, t), "int8-vnni")
    assert [b.name for b in runnable("auto", False)] == ["fp32-avx2"]               # none without kernels either
    assert runnable("bf16", False) == ()
    with pytest.raises(ValueError, match="none of them runs --dtype bf16 on this CPU"):
        choose("bf16", False, SHAPE, 8, t)
    monkeypatch.setenv(kernels.ENV, "fp64-avx9")
    with pytest.raises(ValueError, match=r"no path fp64-avx9 .*fp32-avx2"):
        choose("auto", False, SHAPE, 8, t)
    monkeypatch.setenv(kernels.ENV, "off")                                            # read at every choice
    assert choose("auto", False, SHAPE, 8, t).name == NO_KERNELS and t.calls == []
    assert runnable("auto", False) == (CpuBackend.without_kernels("fp32", False),)


@pytest.mark.parametrize("fp32_avx512, bf16, chosen", [
    ([95] * 7, [95] * 7, "fp32-avx2"),                           # 5 % faster: within the margin, the default stays
    ([85] * 7, [95] * 7, "fp32-avx512"),                         # 15 % faster in every round: displaces it
    ([85] * 7, [80] * 7, "fp32-avx512"),                         # bf16 beats fp32-avx2, not the one held by 10 %
    ([85] * 7, [50] * 7, "bf16-avx512"),                         # ... and here it does
    ([100] * 7, [50] * 6 + [95], "fp32-avx2"),                   # twice as fast but one round within the margin
    ([100] * 7, [50] * 3 + [150] + [50] * 3, "fp32-avx2"),       # one round slower: not sure, the default stays
    ([100] * 7, [100] * 7, "fp32-avx2"),                         # a tie: the fixed order's first
])
def test_a_candidate_displaces_the_default_only_when_faster_by_the_margin_in_every_round(every_kind, fp32_avx512,
                                                                                        bf16, chosen):
    """fp32-avx2 (the fixed order's first) at 100 ms a step in every round; the others as given, round by round."""
    t = Timer(fp32_avx2=100, fp32_avx512=fp32_avx512, bf16_avx512=bf16)
    assert chose(choose("auto", False, SHAPE, 8, t), chosen)
    assert cpupath.stable_choice(list(candidates("auto", False)), t(candidates("auto", False), SHAPE, 8)).name \
        == chosen


def test_the_choice_does_not_depend_on_the_order_of_the_timings(every_kind):
    """The same timings in any order of the measure's answer: the fixed order (PATHS) decides ties, not the dict."""
    paths = list(candidates("auto", False))
    seconds = {p.name: [1.0] * 3 for p in paths}
    assert cpupath.stable_choice(paths, seconds).name == "fp32-avx2"
    assert cpupath.stable_choice(paths, dict(reversed(seconds.items()))).name == "fp32-avx2"


def test_the_random_switch_takes_any_runnable_back_end_and_keeps_it_for_the_process(every_kind, monkeypatch):
    """CHATTTS_RENDER_RANDOM_ENGINE (tests only): a random one of every back-end this process could run — that
    without our kernels included — measured never, the same for the rest of the process."""
    monkeypatch.setenv(cpupath.RANDOM_ENV, "1")
    t = Timer()
    seen = set()
    for _ in range(100):
        monkeypatch.setattr(cpupath, "_CHOSEN", {})                                   # a new process
        b = choose("auto", False, SHAPE, 8, t)
        assert choose("auto", False, SHAPE, 8, t) is b                                # one answer per process
        seen.add(b.name)
    assert seen == {"fp32-avx2", "fp32-avx512", "bf16-avx512", "bf16-amx", NO_KERNELS} and t.calls == []
    assert not list(every_kind.rglob("*.json"))                                     # nothing remembered on disk
    monkeypatch.setattr(kernels, "kinds", lambda: ("f32", "q8"))                    # this AVX2 EPYC: two still
    assert {b.name for b in runnable("auto", False)} == {"fp32-avx2", NO_KERNELS}
    monkeypatch.setenv(kernels.ENV, "fp32-avx2")                                    # restricted: that one only
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    assert chose(choose("auto", False, SHAPE, 8, t), "fp32-avx2")


def record_of(backend: CpuBackend, version: str = "v") -> EngineRecord:
    return EngineRecord(path=backend.name, dtype=backend.dtype, int8=backend.int8, kind=backend.kind,
                        backend=backend.tag, version=version)


def test_a_books_record_is_followed_without_measuring_where_its_arithmetic_runs(every_kind, monkeypatch):
    """follow(record): the back-end of the record's arithmetic (the recorded path where several share it), never
    timed; EngineMismatch naming both where this process has none (its CPU, or CHATTTS_RENDER_KERNELS)."""
    avx2 = CpuBackend.of(BY_NAME["fp32-avx2"])
    assert follow(record_of(avx2)) == avx2
    assert follow(record_of(CpuBackend.of(BY_NAME["fp32-avx512"]))).name == "fp32-avx512"
    assert follow(replace_path(record_of(avx2), "")).name == "fp32-avx2"          # a row's version: the first
    off = CpuBackend.without_kernels("fp32", False)
    assert follow(record_of(off)) == off                                            # oneDNN, kernels or not
    bf16 = record_of(CpuBackend.of(BY_NAME["bf16-avx512"]), "ours6-fp-bf16-cpu-kernels_avx512bf16-aten_avx2")
    monkeypatch.setattr(kernels, "kinds", lambda: ("f32", "q8"))                   # an AVX2-only CPU
    with pytest.raises(EngineMismatch, match=r"cannot run the book's engine bf16-avx512 \(ours6-fp-bf16-cpu-kern"
                                             r"els_avx512bf16-aten_avx2\): it runs off \(aten_"):
        follow(bf16)
    monkeypatch.setenv(kernels.ENV, "off")
    with pytest.raises(EngineMismatch, match=r"engine fp32-avx2 .*: it runs off \(onednn-.*CHATTTS_RENDER_KERNELS=off"):
        follow(record_of(avx2))
    monkeypatch.setenv(kernels.ENV, "fp32-avx2")
    with pytest.raises(EngineMismatch, match=r"engine off .*: it runs fp32-avx2 \(kernels-aten_"):
        follow(record_of(off))
    with pytest.raises(EngineMismatch, match="it runs no back-end of its dtype"):
        follow(record_of(CpuBackend.of(BY_NAME["int8-avx2"])))


def replace_path(record: EngineRecord, path: str) -> EngineRecord:
    from dataclasses import replace

    return replace(record, path=path)


def test_the_real_timer_times_a_step_of_every_path_it_is_given():
    have = [p for p in candidates("auto", False) + candidates("auto", True) if why_not(p.kind) is None]
    if not have:
        pytest.skip(why_not("f32"))
    seconds = cpupath.measure_steps(have, SHAPE, 3)
    assert set(seconds) == {p.name for p in have}
    assert all(len(v) == MEASURE_ROUNDS for v in seconds.values())                # one step a round
    assert all(0 < s < 10 and math.isfinite(s) for v in seconds.values() for s in v)


def test_an_auto_engine_adopts_the_fp32_versions():
    """Whatever auto runs here, it keeps what the fp32 engine (auto before the paths), every other float path and
    the back-end without our kernels rendered; an explicit dtype keeps its own."""
    from engine.api import EngineOptions
    from engine.engine import ADOPTED_VERSIONS, adopted_versions, engine_version

    fp, auto = "fp", EngineOptions(dtype="auto")
    off = CpuBackend.without_kernels("fp32", False)
    every = [CpuBackend.of(p) for p in candidates("auto", False)] + [off]
    for b in every:
        adopts = adopted_versions(fp, auto, b.dtype, b)
        mine = engine_version(fp, auto, b.dtype, cpu=b)
        assert mine not in adopts
        assert {engine_version(fp, auto, o.dtype, cpu=o) for o in every} - {mine} <= set(adopts)
        assert {f"ours{v}-fp-fp32-cpu" for v in ADOPTED_VERSIONS} <= set(adopts)
    fp32 = EngineOptions(dtype="fp32")
    assert not any("bf16" in v for v in adopted_versions(fp, fp32, "fp32", CpuBackend.of(BY_NAME["fp32-avx512"])))
