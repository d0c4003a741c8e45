"""What a render shows while it runs and when it ends: a tqdm bar on a terminal (pipeline.render(on_done=...)),
and in the Prefect UI a throttled progress artifact and table artifacts with stable keys."""
from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

PROGRESS_EVERY_S = 2.0      # seconds between progress-artifact updates



class TqdmProgress:
    """on_done(done, total) → a tqdm bar on stderr (shown only on a terminal)."""

    def __init__(self, desc: str = "segments"):
        self.desc = desc
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int) -> None:
        bar = self.bar
        if bar is None:
            from tqdm import tqdm

            bar = self.bar = tqdm(total=total, desc=self.desc, unit="seg", disable=None, dynamic_ncols=True)
        bar.total = total
        bar.n = done
        bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def artifact_key(prefix: str, name: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) unique to name."""
    ascii_part = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{prefix}-{ascii_part}-{digest}" if ascii_part else f"{prefix}-{digest}"


def table_artifact(prefix: str, name: str, rows: list[dict], description: str) -> None:
    from prefect.artifacts import create_table_artifact

    create_table_artifact(key=artifact_key(prefix, name), table=rows, description=description)


class ArtifactProgress:
    """on_done(done, total) → a Prefect progress artifact (throttled) plus tqdm on a terminal."""

    def __init__(self):
        self.artifact_id = None
        self.last = 0.0
        self.tqdm = TqdmProgress()

    def __call__(self, done: int, total: int) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        self.tqdm(done, total)
        pct = 100.0 * done / total if total else 100.0
        now = time.monotonic()
        if self.artifact_id is None:
            self.artifact_id = create_progress_artifact(progress=pct, key="render-progress",
                                                        description="segments rendered")
        elif done == total or now - self.last >= PROGRESS_EVERY_S:
            update_progress_artifact(artifact_id=self.artifact_id, progress=pct)
        else:
            return
        self.last = now
