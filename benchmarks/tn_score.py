"""Chinese TN scoring: exact-match rates of our normalize() and of wetext alone, on three public golden sets
(regression) and on our held-out sets of real sentences, each on its own line.

    python -m benchmarks.tn_score                 # rates + misses (ours)
    python -m benchmarks.tn_score --baseline      # also wetext alone, and its misses with -v
    python -m benchmarks.tn_score --speed         # also: normalize the whole of 紅樓夢 and report chars/s

Sets (in tests/data/tn, see its README): NeMo nemo/*.txt (`input~output`), PaddleSpeech
paddlespeech/textnorm_test_cases.txt (`input|output`), WeTextProcessing wetextprocessing/*.txt
(`input => output`); held-out heldout/*.tsv (`input<TAB>reading<TAB>source`, `#` comments), written before any
rule was changed for it: `heldout` is the first batch (cases.tsv, whose misses then guided general rules),
`heldout-2` the second (cases-2.tsv, scored on its own line: the one that says how unseen text is read;
docs/text-frontend.md has its first-run rate and the one rule that came after it), `heldout-3` the third (cases-3.tsv:
ordinals, clock hours and clock-style durations, the 两/二 and h:mm:ss rules of issue 25).  Both sides of a comparison
go through the same punctuation/whitespace canonicalization (our punctuation table, no TN), so a case scores on
its reading, not on which comma the golden file happened to use.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
TN_DIR = ROOT / "tests" / "data" / "tn"
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
HONGLOUMENG = CORPUS / "txt" / "gutenberg-zh" / "24264-0.txt"     # --speed only

# name -> (files under TN_DIR, field separator).  The first three are regression sets; `heldout` was held out
# until its misses guided rules; `heldout-2` and `heldout-3` are held out (tests/data/tn/heldout/README.md).
SETS = {
    "nemo": ("nemo/*.txt", "~"),
    "paddlespeech": ("paddlespeech/textnorm_test_cases.txt", "|"),
    "wetext": ("wetextprocessing/*.txt", " => "),
    "heldout": ("heldout/cases.tsv", "\t"),
    "heldout-2": ("heldout/cases-2.tsv", "\t"),
    "heldout-3": ("heldout/cases-3.tsv", "\t"),
}
HELD_OUT = ("heldout-2", "heldout-3")   # the held-out batches: their lines are marked


def load_cases(name: str, root: Path = TN_DIR) -> list[tuple[str, str, str]]:
    """[(input, expected, origin)] of one set; origin is file:line (and the source, for the held-out set)."""
    pattern, sep = SETS[name]
    cases = []
    for path in sorted(root.glob(pattern)):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if sep not in line or line.startswith("#"):
                continue
            inp, exp, *source = line.split(sep)
            cases.append((inp, exp, " ".join([f"{path.name}:{lineno}", *source])))
    return cases


def canon(text: str) -> str:
    """Punctuation and whitespace through our table (no TN, no t2s), for a fair comparison."""
    from tasks.text.normalize import normalize
    return normalize(text, t2s=False, tn=False)


def score(fn: Callable[[str], str], cases: list[tuple[str, str, str]]) -> tuple[float, list[tuple[str, ...]]]:
    """(exact-match rate, misses as (origin, input, expected, got))."""
    misses = []
    for inp, exp, origin in cases:
        got = fn(inp)
        if canon(got) != canon(exp):
            misses.append((origin, inp, exp, got))
    rate = 1.0 - len(misses) / len(cases) if cases else 0.0
    return rate, misses


def ours(text: str) -> str:
    from tasks.text.normalize import normalize
    return normalize(text)


def wetext_alone(text: str) -> str:
    from tasks.text.normalize import _wetext
    return _wetext().normalize(text)


def speed(path: Path = HONGLOUMENG) -> tuple[int, float]:
    """(characters, seconds) to normalize a whole book file."""
    from tasks.text.normalize import normalize
    text = path.read_text(encoding="utf-8-sig")
    normalize("预热1次")                     # load OpenCC and the FSTs outside the timing
    t0 = time.perf_counter()
    normalize(text)
    return len(text), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", action="store_true", help="also score wetext alone")
    ap.add_argument("--speed", action="store_true", help="time normalizing 紅樓夢")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    for name in SETS:
        cases = load_cases(name)
        rate, misses = score(ours, cases)
        line = f"{name:13s} ours {rate:6.1%} ({len(cases) - len(misses)}/{len(cases)})"
        if args.baseline:
            brate, bmisses = score(wetext_alone, cases)
            line += f"   wetext alone {brate:6.1%} ({len(cases) - len(bmisses)}/{len(cases)})"
        print(line + ("   held out" if name in HELD_OUT else ""))
        if args.verbose or not args.baseline:
            for origin, inp, exp, got in misses:
                print(f"    miss {origin:32s} {inp!r} -> {got!r}  (want {exp!r})")
    if args.speed:
        n, sec = speed()
        print(f"紅樓夢 {n:,} chars normalized in {sec:.1f} s ({n / sec:,.0f} chars/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
