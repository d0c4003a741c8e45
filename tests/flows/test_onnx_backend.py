"""`--backend onnx` end to end (random-tiny, ONNX Runtime's CPU provider): a book renders, is SIGKILLed at crash
points and resumes byte-identical; a book rendered with torch and continued with onnx re-renders every segment
(no key, no audio of the other back-end reused); without the onnx extra: one line, exit 2, nothing created."""
from __future__ import annotations

import pytest

import manifests
from engine.api import onnx_missing
from flows.cli import main
from tests.conftest import unavailable
from tests.flows.test_reliability import BOOK_V1, counts
from tests.flows.test_reliability_kill import assert_no_temps, assert_not_rerendered, committed, outputs


@pytest.fixture
def book(tmp_path):
    p = tmp_path / "tiny.txt"
    p.write_text(BOOK_V1, encoding="utf-8")
    return p


@pytest.fixture
def onnx_installed():
    if missing := onnx_missing():
        unavailable(f"the onnx extra is not installed ({', '.join(missing)}): pip install 'chattts-render[onnx]'")


def test_missing_extra_is_one_line_exit_2_and_creates_nothing(book, tmp_path, monkeypatch, capsys):
    import flows.options

    monkeypatch.setattr(flows.options, "onnx_missing", lambda: ["onnxruntime"])
    out = tmp_path / "out"
    assert main([str(book), "--model", "random-tiny", "--backend", "onnx", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "onnxruntime not installed" in err[0] and "chattts-render[onnx]" in err[0], err
    assert not out.exists()


def test_torch_render_continued_with_onnx_rerenders_rather_than_mixing(onnx_installed, book, tmp_path, capsys):
    args = [str(book), "--model", "random-tiny", "--out", str(tmp_path / "out")]
    assert main([*args, "--chapters", "1-2"]) == 0
    old = manifests.load(tmp_path / "out" / "tiny").to_pylist()
    capsys.readouterr()
    assert main([*args, "--backend", "onnx"]) == 0
    rows = manifests.load(tmp_path / "out" / "tiny").to_pylist()
    assert counts(capsys.readouterr().out) == (len(rows), 0)                # every segment rendered again
    assert all("-onnx-ort" in r["engine_version"] for r in rows)
    assert not {r["content_key"] for r in rows} & {r["content_key"] for r in old}
    assert main([*args, "--backend", "onnx"]) == 0 and counts(capsys.readouterr().out) == (0, len(rows))


def test_onnx_book_renders_and_resumes_byte_identical_after_sigkills(onnx_installed, fork_server, book, tmp_path):
    ref_out = tmp_path / "ref"
    base = (str(book), "--model", "random-tiny", "--backend", "onnx")
    r = fork_server.run(*base, "--out", str(ref_out))
    assert r["rc"] == 0, r["output"]
    ref = outputs(ref_out / "tiny")
    out = tmp_path / "out"
    book_dir = out / "tiny"
    for point in ("segment-written:2", "commit:1", "segment-written:1"):
        before = committed(book_dir)
        r = fork_server.run(*base, "--out", str(out), env={"CHATTTS_RENDER_CRASH_AT": point})
        assert r["rc"] == -9 and not r["killed"], (point, r["output"])     # the process killed itself there
        assert_not_rerendered(book_dir, before)
    before = committed(book_dir)
    assert before
    r = fork_server.run(*base, "--out", str(out))
    assert r["rc"] == 0, r["output"]
    assert_not_rerendered(book_dir, before)
    assert_no_temps(book_dir)
    assert outputs(book_dir) == ref
