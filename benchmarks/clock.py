"""The engine's own time inside a render, however the caller paces it (benchmarks/book_throughput.py and
benchmarks/qa_bench.py)."""
from __future__ import annotations

import time


class EngineClock:
    """Wall time spent inside Engine.synthesize's iterator (the engine's own work), however the caller paces it."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        """Engine.synthesize (the class's: every stage loads its own Engine object) timed while inside."""
        from engine.engine import Engine  # torch: loaded when a benchmark times the engine

        self._inner = inner = Engine.synthesize
        clock = self

        def synthesize(engine, requests, progress=None, more=None):
            it = inner(engine, requests, progress, more)
            while True:
                t0 = time.perf_counter()
                try:
                    res = next(it)
                except StopIteration:
                    clock.seconds += time.perf_counter() - t0
                    return
                clock.seconds += time.perf_counter() - t0
                yield res

        Engine.synthesize = synthesize
        return self

    def __exit__(self, *exc):
        from engine.engine import Engine

        Engine.synthesize = self._inner
