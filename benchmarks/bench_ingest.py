"""Ingest speed with a same-run baseline.

    python benchmarks/bench_ingest.py            # 紅樓夢 TXT, all Gutenberg TXT, the EPUB corpus walk
    python benchmarks/bench_ingest.py --big 50   # plus a 50 MB single-paragraph TXT (time, peak RSS)

Baselines (same run, same files): TXT = read + strict decode of the file; EPUB = open the ZIP and
decompress every entry.  The ratio ingest/baseline is the number to compare across machines."""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus"
REPEATS = 3  # runs per measurement; the median is reported


def _median_s(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _txt_baseline(p: Path) -> None:
    data = p.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        data.decode("gb18030")


def _epub_baseline(files: list[Path]) -> None:
    for f in files:
        try:
            with zipfile.ZipFile(f) as zf:
                for info in zf.infolist():
                    zf.read(info)
        except (zipfile.BadZipFile, OSError, ValueError):
            pass


def _epub_walk(files: list[Path]) -> tuple[int, int]:
    from tasks.errors import BookError
    from tasks.ingest import load_book

    ok = err = 0
    for f in files:
        try:
            load_book(f)
            ok += 1
        except BookError:
            err += 1
    return ok, err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=0, help="also ingest an N-MB single-paragraph TXT")
    args = ap.parse_args()
    from tasks.ingest import load_book

    hlm = CORPUS / "txt" / "gutenberg-zh" / "24264-0.txt"
    if hlm.exists():
        t = _median_s(lambda: load_book(hlm))
        b = _median_s(lambda: _txt_baseline(hlm))
        n = len(load_book(hlm).chapters)
        print(f"紅樓夢 24264-0.txt ({hlm.stat().st_size / 1e6:.1f} MB, {n} chapters): ingest {t:.3f} s, "
              f"baseline read+decode {b:.4f} s, ratio {t / b:.0f}x")
    for p in sorted((CORPUS / "txt").rglob("*.txt")):
        if p.name == "LICENSE.txt":
            continue
        t0 = time.perf_counter()
        book = load_book(p)
        print(f"  {p.parent.name}/{p.name}: {len(book.chapters)} chapters, {book.meta.encoding}, "
              f"{time.perf_counter() - t0:.3f} s")
    files = sorted((CORPUS / "epub").rglob("*.epub"))
    if files:
        t = _median_s(lambda: _epub_walk(files))
        b = _median_s(lambda: _epub_baseline(files))
        ok, err = _epub_walk(files)
        print(f"EPUB corpus walk ({len(files)} files: {ok} books, {err} BookErrors): ingest {t:.2f} s, "
              f"baseline unzip-all {b:.2f} s, ratio {t / b:.1f}x")
    if args.big:
        import psutil

        unit = "天地玄黃，宇宙洪荒。日月盈昃，辰宿列張。"
        n_chars = args.big * 1024 * 1024 // 3
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "big.txt"
            p.write_text((unit * (n_chars // len(unit) + 1))[:n_chars], encoding="utf-8")
            rss0 = psutil.Process().memory_info().rss
            t0 = time.perf_counter()
            load_book(p)
            t = time.perf_counter() - t0
            b = _median_s(lambda: _txt_baseline(p))
            peak = _peak_rss_mb()
            print(f"{args.big} MB single paragraph: ingest {t:.2f} s, baseline read+decode {b:.3f} s, "
                  f"RSS before {rss0 / 1e6:.0f} MB, peak RSS {peak:.0f} MB")


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


if __name__ == "__main__":
    main()
