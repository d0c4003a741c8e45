"""Progress reporters for pipeline.render(on_done=...): a tqdm bar for the terminal."""
from __future__ import annotations


class TqdmProgress:
    """on_done(done, total) → a tqdm bar on stderr (shown only on a terminal)."""

    def __init__(self, desc: str = "segments"):
        self.desc = desc
        self.bar = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit="seg", disable=None, dynamic_ncols=True)
        self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
