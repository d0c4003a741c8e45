"""The engine's own time inside a render, however the caller paces it (benchmarks/book_throughput.py and
benchmarks/qa_bench.py)."""
from __future__ import annotations

import time


class EngineClock:
    """Wall time spent inside Engine.synthesize's iterator (the engine's own work), however the caller paces it;
    `method="refine"`: inside Engine.refine's (the refine-text pass)."""

    def __init__(self, method: str = "synthesize"):
        self.seconds = 0.0
        self.method = method

    def __enter__(self):
        """The method (the class's: every stage loads its own Engine object) timed while inside."""
        from engine.engine import Engine  # torch: loaded when a benchmark times the engine

        self._inner = inner = getattr(Engine, self.method)
        clock = self

        def synthesize(engine, requests, *args, **kwargs):
            it = inner(engine, requests, *args, **kwargs)
            while True:
                t0 = time.perf_counter()
                try:
                    res = next(it)
                except StopIteration:
                    clock.seconds += time.perf_counter() - t0
                    return
                clock.seconds += time.perf_counter() - t0
                yield res

        setattr(Engine, self.method, synthesize)
        return self

    def __exit__(self, *exc):
        from engine.engine import Engine

        setattr(Engine, self.method, self._inner)
