"""`--dtype auto` on CPU runs the fastest exact float path this CPU has (engine/cpupath.py), which may be bf16: a book
rendered before with the fp32 default is not rendered again, and what it lacks renders on the new path."""
from __future__ import annotations

import re

import pytest

import manifests
from flows.cli import main
from tests.conftest import ROOT
from tests.engine.kinds import why_not

BOOK = ROOT / "tests" / "data" / "cast" / "dialogue.txt"      # two chapters


def _render(out, capsys, *extra) -> tuple[list[dict], int]:
    assert main([str(BOOK), "--model", "random-tiny", "--out", str(out), *extra]) == 0
    line = capsys.readouterr().out
    return manifests.load(out / "dialogue").to_pylist(), int(re.search(r"\((\d+) rendered", line).group(1))


def test_a_book_rendered_in_fp32_resumes_under_auto_on_bf16_without_rendering_it_again(tmp_path, capsys,
                                                                                        monkeypatch):
    """auto made to take the bf16 path (CHATTTS_RENDER_KERNELS: the one this CPU may measure fastest): chapter 1
    rendered in fp32 before stays (rows, keys, audio), chapter 2 renders in bf16, and a rerun renders nothing."""
    if why := why_not("bf16"):
        pytest.skip(why)
    out = tmp_path / "out"
    first, n = _render(out, capsys, "--dtype", "fp32", "--chapters", "1")
    done = {r["content_key"]: r for r in first if r["status"] == "done"}
    assert n == len(done) > 0 and {r["chapter"] for r in done.values()} == {0}
    fp32 = {r["engine_version"] for r in done.values()}
    assert len(fp32) == 1 and "-fp32-cpu-" in next(iter(fp32))
    monkeypatch.setenv("CHATTTS_RENDER_KERNELS", "bf16-avx512")
    rows, n = _render(out, capsys)
    assert n == sum(r["chapter"] == 1 for r in rows) > 0                        # chapter 2 only
    for r in rows:
        if r["chapter"] == 0:                                                    # kept: key, audio, version
            assert r["content_key"] in done and r["engine_version"] in fp32
            assert r["audio_path"] == done[r["content_key"]]["audio_path"]
        else:
            assert "-bf16-cpu-kernels_avx512bf16-" in r["engine_version"]
    again, n = _render(out, capsys)
    assert n == 0 and [r["content_key"] for r in again] == [r["content_key"] for r in rows]
