"""The synthesize stage's options, each with its defaults and its one validator: the duration guard's
(GuardOptions, tasks/synthesize/guard.py) and an audition's (AuditionOptions, tasks/synthesize/audition.py).  Light to
import (no numpy, no pyarrow): the render schema and the command line read their defaults (flows/params.py,
flows/arguments.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from engine.voice import MAX_SEED
from tasks.plan.rows import MAX_ATTEMPTS

MIN_RATIO = 0.4           # duration / expected below this is truncated
MAX_RATIO = 2.5           # duration / expected above this is babbling
SLACK_S = 1.0             # s, absolute slack on both sides of the band (short texts vary most)
DEFAULT_COUNT = 12                 # an audition's seed candidates
DEFAULT_FROM_SEED = 2222           # its first seed: the default voice (tasks.voice.voices.DEFAULT_VOICE)
MAX_COUNT = 100
Schedule = Literal["length", "chapters"]   # the order rows start in (tasks/synthesize/render.py); "length" the default
SCHEDULES = get_args(Schedule)


@dataclass(frozen=True)
class GuardOptions:
    min_ratio: float = MIN_RATIO
    max_ratio: float = MAX_RATIO
    slack_s: float = SLACK_S
    max_attempts: int = MAX_ATTEMPTS
    enabled: bool = True

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if not 0 <= self.min_ratio < self.max_ratio:
            raise ValueError(f"guard min_ratio {self.min_ratio} must be in [0, max_ratio={self.max_ratio})")
        if self.slack_s < 0:
            raise ValueError(f"guard slack_s {self.slack_s} must be >= 0")
        if self.max_attempts < 1:
            raise ValueError("guard max_attempts must be at least 1")



@dataclass(frozen=True)
class AuditionOptions:
    count: int = DEFAULT_COUNT               # seed candidates
    from_seed: int = DEFAULT_FROM_SEED       # the first seed candidate
    text: str | None = None                  # the passage; None: the first ~15 s of the first chapter

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if not 0 <= self.count <= MAX_COUNT:
            raise ValueError(f"--count {self.count}: must be in 0..{MAX_COUNT}")
        if not 0 <= self.from_seed <= MAX_SEED - self.count:
            raise ValueError(f"--from-seed {self.from_seed}: seeds must stay in 0..2**63-1")
        if self.text is not None and not self.text.strip():
            raise ValueError("--text is empty")
