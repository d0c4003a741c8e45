"""著 after Traditional -> Simplified, measured on the corpus's Traditional novels (issue 33).

    python -m benchmarks.t2s_zhe                 # every 著 of the seven books: right before (OpenCC) and after (ours)
    python -m benchmarks.t2s_zhe --books 24264   # 紅樓夢 only
    python -m benchmarks.t2s_zhe --candidates    # list the contexts where 著 may be zhù (to label tests/data/t2s)

Each book is loaded as the pipeline loads it (`load_book`: lines unwrapped) and every unit (title, paragraph) is
normalized alone with TN off (`NormalizeOptions(tn=False)`: OpenCC's t2s, then tasks/text/zhe.py); the
character each source 著 became is read from the aligned text span.  The right form is `tests/data/t2s/zhu.tsv`'s
label where the 著's context (`context`: six characters either side) is listed there - every occurrence next to a
character that may make it zhù (`CANDIDATE_AFTER`, `CANDIDATE_BEFORE`, a book title after it), labelled by hand -
and 着 everywhere else: outside those contexts a Traditional 著 is the particle zhe (看著), zháo (睡著) or zhuó
(穿著, 著急), all 着 in Simplified.  "Before" is OpenCC alone, which keeps every 著 (ChatTTS reads it zhù).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
BOOKS = ("24264", "23962", "23950", "25124", "27166", "23865", "25271")   # gutenberg-zh/<id>-0.txt; 24264: 紅樓夢
LABELS = ROOT / "tests" / "data" / "t2s" / "zhu.tsv"
WINDOW = 6                                   # characters of context either side of a 著
CANDIDATE_AFTER = "作名書者有錄稱述文"            # 著作, 著名, 著書 ...: zhù words (Traditional source)
CANDIDATE_BEFORE = "所顯編論大合原素土卓昭彰專遺譯拙巨名"   # 所著, 顯著, 土著 ...


def context(unit: str, i: int) -> str:
    """The 著 at unit[i] with WINDOW characters either side (the key of its label)."""
    return unit[max(0, i - WINDOW):i + WINDOW + 1]


def candidate(unit: str, i: int) -> bool:
    """Is the 著 at unit[i] next to a character that may make it zhù (so it is labelled by hand)?"""
    before, after = unit[i - 1:i], unit[i + 1:i + 2]
    return (before != "" and before in CANDIDATE_BEFORE) or (after != "" and after in CANDIDATE_AFTER) \
        or after == "《"


def load_labels(path: Path = LABELS) -> dict[str, str]:
    """context -> the right Simplified character (著 or 着), from `context<TAB>form<TAB>book<TAB>note` lines."""
    labels = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            ctx, form, *_ = line.split("\t")
            labels[ctx] = form
    return labels


def occurrences(book: str):
    """(unit, index) of every 著 of a corpus book, its units as the pipeline loads them."""
    from tasks.ingest import load_book
    from tasks.text.segment import chapter_units
    for chapter in load_book(CORPUS / "txt" / "gutenberg-zh" / f"{book}-0.txt").chapters:
        for unit in chapter_units(chapter):
            for i, c in enumerate(unit):
                if c == "著":
                    yield unit, i


def ours(unit: str) -> dict[int, str]:
    """source index -> output character, for the aligned text spans of `unit` normalized with TN off."""
    from tasks.text.normalize import NormalizeOptions, normalize_with_map
    _, spans = normalize_with_map(unit, NormalizeOptions(tn=False))
    return {sp.start + k: ch for sp in spans if sp.kind == "text" and sp.aligned for k, ch in enumerate(sp.out)}


def measure(book: str, labels: dict[str, str]) -> Counter:
    n: Counter = Counter()
    cache: dict[str, dict[int, str]] = {}
    for unit, i in occurrences(book):
        if unit not in cache:
            cache = {unit: ours(unit)}
        right = labels.get(context(unit, i), "着")
        got = cache[unit].get(i, "?")
        n["all"] += 1
        n["zhu"] += right == "著"
        n["before"] += right == "著"                 # OpenCC keeps 著: right only where 著 is zhù
        n["after"] += got == right
        n["kept"] += got == "著"
        n["labelled"] += context(unit, i) in labels
        if got != right:
            n[f"miss {context(unit, i)} -> {got} (want {right})"] += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--books", help=f"comma-separated book ids (default: {','.join(BOOKS)})")
    ap.add_argument("--candidates", action="store_true", help="print the contexts to label, one a line")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    books = args.books.split(",") if args.books else list(BOOKS)
    if args.candidates:
        for book in books:
            for unit, i in occurrences(book):
                if candidate(unit, i):
                    print(f"{context(unit, i)}\t\t{book}")
        return 0
    labels = load_labels()
    total: Counter = Counter()
    for book in books:
        n = measure(book, labels)
        total.update(n)
        print(f"{book}: 著 {n['all']:5d} (zhù {n['zhu']:3d}, labelled {n['labelled']:3d})   right before "
              f"{n['before']:5d} ({n['before'] / n['all']:6.1%})   after {n['after']:5d} ({n['after'] / n['all']:6.1%})"
              f"   still 著 {n['kept']}")
        for key in sorted(k for k in n if k.startswith("miss ")):
            print(f"    {key}")
    print(f"all: 著 {total['all']}, right before {total['before']} ({total['before'] / total['all']:.1%}), "
          f"after {total['after']} ({total['after'] / total['all']:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
