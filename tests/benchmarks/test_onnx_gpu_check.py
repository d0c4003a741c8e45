"""benchmarks/onnx_gpu_check.py (gpu_check.sh's ONNX step): its comparison numbers, its CPU path on random-tiny's
graphs (the model cache's export), and one line when the exporter is missing."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from benchmarks import onnx_gpu_check as check


def test_metrics():
    a = np.ones(100)
    m = check._metrics(a, a + 0.01 * (-1.0) ** np.arange(100))   # noise power 1e-4 per sample: 40 dB
    assert m["snr_db"] == pytest.approx(40.0) and m["max_abs"] == pytest.approx(0.01)
    assert m["cosine"] == pytest.approx(1 / np.sqrt(1.0001), abs=1e-12)
    assert check._metrics(a, -a)["cosine"] == pytest.approx(-1.0)
    assert check._metrics(a, a)["snr_db"] == float("inf")
    assert "shape" in check._metrics(a, np.ones(99))


def test_missing_exporter_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "engine.onnxgraph", None)       # import raises ImportError
    assert check.main(["--device", "cpu", "--report", str(tmp_path / "r.txt")]) == 2
    line = "onnx_gpu_check: engine.onnxgraph is not importable: ONNX step skipped"
    assert capsys.readouterr().err.strip() == line and (tmp_path / "r.txt").read_text().strip() == line


def test_cpu_path_on_random_tiny(tmp_path):
    for mod in ("onnx", "onnxruntime", "onnxscript", "ChatTTS"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    if importlib.util.find_spec("engine.onnxgraph") is None:
        pytest.skip("engine.onnxgraph is not in this tree yet (the onnx branch adds it; wired at merge)")
    report = tmp_path / "onnx.txt"
    assert check.main(["--device", "cpu", "--dtype", "fp32", "--report", str(report)]) == 0
    text = report.read_text()
    for name in ("prefill", "decode", "heads", "vocoder"):
        assert f"fp32 {name}: trtcheck OK" in text
    assert "fp32 vocoder.wav: PASS" in text and "fp32 decode.hidden: PASS" in text
    assert text.rstrip().endswith("onnx_gpu_check: PASS")
