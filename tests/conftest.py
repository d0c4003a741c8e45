"""Shared test fixtures: the corpus in ../shared (skipped cleanly when absent), one torch thread."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def corpus_path(*parts: str) -> Path:
    """A file under ../shared/corpus, or skip the test when the corpus is not beside the checkout."""
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"corpus file not present: {p}")
    return p


@pytest.fixture
def corpus():
    return corpus_path


def pytest_collection_modifyitems(config, items):
    """`slow` tests run only with RUN_SLOW=1; `gpu` tests only where CUDA is available."""
    run_slow = os.environ.get("RUN_SLOW") == "1"
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: set RUN_SLOW=1"))
