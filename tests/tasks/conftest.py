"""Fixtures of the stage tests that need a real engine."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def engine():
    """The random-tiny engine, two rows a batch, one torch thread (Engine.load keeps one model per process)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ChatTTS")
    from engine.api import EngineOptions
    from engine.engine import Engine

    torch.set_num_threads(1)
    return Engine.load(EngineOptions(model="random-tiny", max_batch=2))
