"""EngineOptions: one validator that names the conflict, and the per-device batch default."""
from __future__ import annotations

import pytest

from engine.api import DEFAULT_MAX_BATCH, EngineOptions


@pytest.mark.parametrize("kw, words", [
    (dict(int8=True, device="cuda"), 'int8=True needs device="cpu"'),
    (dict(cuda_graphs=True), 'cuda_graphs=True needs device="cuda"'),
    (dict(dtype="fp16"), 'dtype="fp16" needs device="cuda"'),
    (dict(int8=True, dtype="bf16"), 'int8=True quantizes fp32 linears'),
    (dict(max_batch=0), "max_batch"),
])
def test_validate_names_the_conflict(kw, words):
    with pytest.raises(ValueError, match=words):
        EngineOptions(**kw)


def test_batch_defaults_per_device_and_explicit_wins():
    assert EngineOptions().batch == DEFAULT_MAX_BATCH["cpu"] == 32
    assert EngineOptions(device="cuda").batch == DEFAULT_MAX_BATCH["cuda"]
    assert EngineOptions(max_batch=5, device="cuda").batch == 5
    assert EngineOptions().max_batch is None
