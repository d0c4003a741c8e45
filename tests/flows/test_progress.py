"""Progress and artifacts: Prefect artifact keys are valid and distinct per name."""
from __future__ import annotations

from flows.progress import artifact_key


def test_artifact_keys_are_valid_and_distinct():
    import re

    keys = [artifact_key("book", n) for n in ("/o/道德经", "/o/Dao De Jing", "/o/道德经2", "/o/x_y.z")]
    assert all(re.fullmatch(r"[a-z0-9-]+", k) for k in keys)
    assert len(set(keys)) == len(keys)
