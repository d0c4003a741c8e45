"""engine/vocoder.py's dtype: Decoder + Vocos in bf16 on a bf16 CPU path — each row still alone (batch-invariant),
close to fp32 but not fp32, the fp32 modules untouched — and the engine version that names it."""
from __future__ import annotations

import numpy as np
import pytest

from engine.api import EngineOptions
from engine.assets import SHAPES
from engine.units import samples_for_tokens

torch = pytest.importorskip("torch")

C = SHAPES["random-tiny"].gpt_hidden


@pytest.fixture(scope="module")
def tiny():
    from engine.loader import load_chattts

    torch.set_num_threads(1)
    return load_chattts("random-tiny")


def _rows(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(t, C, generator=g) for t in lengths]


def _snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    return float(10 * np.log10((ref.astype(np.float64) ** 2).sum() / ((ref - x).astype(np.float64) ** 2).sum()))


def test_bf16_rows_are_decoded_alone_near_fp32_and_leave_fp32_as_it_was(tiny):
    from engine.vocoder import decode

    lengths = [30, 17, 1, 0, 30]
    rows = _rows(lengths)
    fp32 = decode(tiny, rows)
    bf16 = decode(tiny, rows, "bf16")
    for t, b in zip(lengths, bf16):
        assert b.dtype == np.float32 and b.shape == (samples_for_tokens(t),) and np.isfinite(b).all()
    for r, b in zip(rows, bf16):
        assert np.array_equal(decode(tiny, [r], "bf16")[0], b)           # a row's samples: its own
    assert not np.array_equal(fp32[0], bf16[0])                          # really another arithmetic ...
    assert _snr_db(fp32[0], bf16[0]) > 20 and _snr_db(fp32[1], bf16[1]) > 20   # ... near fp32 (~30 dB here)
    assert all(p.dtype == torch.float32 for m in (tiny.decoder, tiny.vocos) for p in m.parameters())
    assert all(np.array_equal(a, b) for a, b in zip(decode(tiny, rows), fp32))   # the fp32 modules untouched


def test_code_rows_stay_fp32_and_a_bad_dtype_is_refused(tiny):
    from engine.vocoder import decode

    codes = [torch.randint(0, 625, (12, 4), generator=torch.Generator().manual_seed(1))]
    assert np.array_equal(decode(tiny, codes, "bf16")[0], decode(tiny, codes)[0])
    with pytest.raises(ValueError, match="dtype 'fp16'"):
        decode(tiny, _rows([3]), "fp16")


def test_the_vocoder_follows_the_cpu_paths_dtype():
    from engine.cpupath import PATHS
    from engine.vocoder import vocoder_dtype

    assert vocoder_dtype(None) == "fp32"                                   # CUDA, onnx, no kernels of ours
    assert {p.name: vocoder_dtype(p) for p in PATHS} == {p.name: p.dtype for p in PATHS}
    assert {vocoder_dtype(p) for p in PATHS if p.int8} == {"fp32"}


def test_a_bf16_vocoder_has_its_own_version_and_keeps_what_fp32_vocoding_rendered():
    """fp32 vocoding names nothing (every existing version is what it was); bf16 adds +vocoder_bf16, and a bf16
    path's engine adopts the same paths' fp32-vocoder versions (books rendered before this change)."""
    from engine.cpupath import BY_NAME
    from engine.engine import adopted_versions, engine_version

    auto = EngineOptions(dtype="auto")
    bf16, fp32 = BY_NAME["bf16-avx512"], BY_NAME["fp32-avx2"]
    mine = engine_version("fp", auto, "bf16", path=bf16)
    before = engine_version("fp", auto, "bf16", path=bf16, vocoder="fp32")
    assert mine == before + "+vocoder_bf16" and "vocoder" not in before
    assert "vocoder" not in engine_version("fp", auto, "fp32", path=fp32)
    assert engine_version("fp", auto, "fp32", path=fp32) == engine_version("fp", auto, "fp32", path=fp32,
                                                                           vocoder="fp32")
    adopts = adopted_versions("fp", auto, "bf16", bf16)
    assert before in adopts and mine not in adopts
    assert engine_version("fp", auto, "bf16", path=BY_NAME["bf16-amx"]) in adopts
    int8 = EngineOptions(dtype="auto", int8=True)
    assert not any("vocoder" in v for v in adopted_versions("fp", int8, "fp32", BY_NAME["int8-avx2"]))
