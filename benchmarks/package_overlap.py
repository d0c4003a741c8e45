"""Packaging with the chapter files encoded beside the main thread (tasks.audio.package: the next chapter's
preparation and the M4B go on meanwhile) against every file encoded on the main thread, one after another (what
it did before), in one run.

    python -m benchmarks.package_overlap --chapters 1 --minutes 20 --repeat 2      # book_throughput's book: one chapter
    python -m benchmarks.package_overlap --chapters 4 --minutes 5

A synthetic book (voiced, speech-like audio at SAMPLE_RATE) is packaged to FLAC chapter files and one M4B with
each way, alternating, --repeat times; prints each way's median seconds and the ratio one-by-one / overlapped
(above 1: the overlap is faster), and checks that both ways wrote the same bytes.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.units import SAMPLE_RATE  # noqa: E402

FORMATS = ("flac", "m4b")


def book(chapters: int, minutes: float, seed: int = 0):
    """[(index, title, ChapterAudio)]: a syllable-rate envelope over a gliding harmonic voice, per chapter."""
    import numpy as np

    from tasks.audio.assemble import AssembleOptions, assemble_arrays

    out = []
    for c in range(chapters):
        rng = np.random.default_rng([seed, c])
        n = int(minutes * 60 * SAMPLE_RATE)
        t = np.arange(n) / SAMPLE_RATE
        phase = 2 * np.pi * np.cumsum(130 + 30 * np.sin(2 * np.pi * 0.7 * t)) / SAMPLE_RATE
        x = sum(np.sin(k * phase) / k for k in range(1, 8)) * np.sin(2 * np.pi * 2.5 * t) ** 2
        x = (0.1 * x + 0.005 * rng.standard_normal(n)).astype(np.float32)
        out.append((c, f"Chapter {c + 1}", assemble_arrays([x], ["chapter"], [f"chapter {c + 1}"],
                                                           AssembleOptions(trim=False))))
    return out


def run(chapters: int = 1, minutes: float = 20.0, repeat: int = 2) -> dict:
    import tasks.audio.package as P
    from tasks.audio.options import PackageOptions
    from tasks.book import BookMeta

    chs, meta = book(chapters, minutes), BookMeta(title="Overlap", author="benchmark", language="en")
    opts = PackageOptions(formats=FORMATS, subtitles=())
    encoders = P.CHAPTER_ENCODERS
    times: dict[str, list[float]] = {"overlapped": [], "one_by_one": []}
    files: dict[str, dict[str, bytes]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            for way in times:
                P.CHAPTER_ENCODERS = encoders if way == "overlapped" else 0
                try:
                    t = time.perf_counter()
                    rep = P.package_book(Path(tmp) / f"{way}{r}", chs, meta, opts)
                    times[way].append(time.perf_counter() - t)
                finally:
                    P.CHAPTER_ENCODERS = encoders
                files[way] = {p.name: p.read_bytes() for p in rep.files if p.suffix != ".json"}
    med = {way: statistics.median(v) for way, v in times.items()}
    return {"chapters": chapters, "minutes_per_chapter": minutes, "formats": list(FORMATS), "repeat": repeat,
            "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
            "median_s": {k: round(v, 2) for k, v in med.items()},
            "one_by_one_over_overlapped": round(med["one_by_one"] / med["overlapped"], 3),
            "same_bytes": files["overlapped"] == files["one_by_one"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=20.0, help="per chapter")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.chapters < 1 or a.minutes <= 0 or a.repeat < 1:
        ap.error("--chapters and --repeat must be >= 1 and --minutes > 0")
    r = run(a.chapters, a.minutes, a.repeat)
    print(f"package {a.chapters} chapter(s) x {a.minutes:g} min to {', '.join(FORMATS)}: overlapped "
          f"{r['median_s']['overlapped']:.2f} s, one by one {r['median_s']['one_by_one']:.2f} s (medians of "
          f"{a.repeat}); one_by_one / overlapped {r['one_by_one_over_overlapped']:.3f}; same bytes: {r['same_bytes']}")
    if a.json:
        a.json.write_text(json.dumps(r, indent=1), encoding="utf-8")
    return 0 if r["same_bytes"] else 1


if __name__ == "__main__":
    sys.exit(main())
