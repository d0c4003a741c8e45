"""Segment diff: is a Chinese book segmented and normalized exactly as before? (issue 25, acceptance 4)

    python -m benchmarks.segment_diff --save /tmp/BASE.json              # on the commit before a change
    python -m benchmarks.segment_diff --against /tmp/BASE.json [-n 40]   # after it: counts, first N differences
    python -m benchmarks.segment_diff --books 24264,daodejing --against /tmp/BASE.json   # a subset (24264: 紅樓夢)

Books: the examples (examples/daodejing.epub and the TXT chapters it is made from) and the corpus's Chinese books
(`../shared/corpus/txt/gutenberg-zh/*.txt`, the Chinese EPUB pg25288), every chapter.  Each book is read with
`load_book`, its language resolved as prepare does (`tasks.text.segment.book_options`, --language auto), and
segmented and audited by `tasks.plan.prepare.segment_book`; every segment's (chapter, index, text, source_text,
pause_after) is kept with its content key as the plan computes it (`tasks.plan.rows.plan_rows`, with a fixed voice
string and a fixed engine version: a key depends only on (text, voice, seed, engine version), the seed on (text,
voice), so with those two fixed the key is the plan's key for the same voice and model - no model is loaded).

`--against`: per book, the segments changed / added / removed (each chapter's sequence of segments aligned by
difflib on (content key, source_text, pause_after), so an inserted segment does not shift the rest), the first
N differences, exit 1 if any book differs (or is missing on one side).  The JSON stays out of git (/tmp).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
EXAMPLES = (ROOT / "examples" / "daodejing.epub", *sorted((ROOT / "examples" / "daodejing").glob("*.txt")))
CORPUS_BOOKS = ("txt/gutenberg-zh/*.txt", "epub/gutenberg/pg25288-*.epub")   # globs under CORPUS
VOICE = "segment-diff-voice"             # any fixed voice string: keys compare only between runs of this tool
ENGINE_VERSION = "segment-diff-engine"   # any fixed engine version (the model is not loaded)
FORMAT = 1                                # of the saved JSON
DEFAULT_SHOWN = 20                        # differences printed


def books(only: list[str] | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every book compared, in order; `only`: names containing one of these substrings."""
    found = [(p.relative_to(ROOT).as_posix(), p) for p in EXAMPLES if p.is_file()]
    for pattern in CORPUS_BOOKS:
        found += [(f"corpus/{p.relative_to(CORPUS).as_posix()}", p) for p in sorted(CORPUS.glob(pattern))
                  if p.name != "LICENSE.txt"]
    return [(n, p) for n, p in found if not only or any(o in n for o in only)]


def book_segments(path: Path) -> tuple[str, list[dict]]:
    """(title, rows) of one book as the plan would make them: chapter, index, text, source_text, pause_after, key."""
    from tasks.ingest import load_book
    from tasks.plan.prepare import segment_book
    from tasks.plan.rows import plan_rows
    from tasks.text.segment import SegmentOptions, book_options

    book = load_book(path)
    segments, _ = segment_book(book, book_options(book, SegmentOptions()))
    rows = plan_rows(book, segments, VOICE, ENGINE_VERSION, Path("/nonexistent/segment-diff"))
    return book.meta.title, [{"chapter": r["chapter"], "index": r["segment"], "text": r["text"],
                              "source_text": r["source_text"], "pause_after": r["pause_after"],
                              "key": r["content_key"]} for r in rows]


def collect(only: list[str] | None = None, quiet: bool = False) -> dict:
    """{"commit", "books": {name: {"title", "segments": [...]}}} for the selected books."""
    out: dict = {"format": FORMAT, "commit": _commit(), "books": {}}
    for name, path in books(only):
        t0 = time.perf_counter()
        title, segs = book_segments(path)
        out["books"][name] = {"title": title, "segments": segs}
        if not quiet:
            print(f"  {name} ({title}): {len(segs)} segments, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _ident(s: dict) -> tuple:
    return s["key"], s["source_text"], s["pause_after"]


def compare(base: dict, new: dict) -> dict:
    """{name: {"changed", "added", "removed", "diffs": [(kind, old seg | None, new seg | None)]}} for every book
    in either; a book on one side only counts all its segments as added or removed."""
    result = {}
    for name in list(base["books"]) + [n for n in new["books"] if n not in base["books"]]:
        old = base["books"].get(name, {}).get("segments", [])
        cur = new["books"].get(name, {}).get("segments", [])
        r = {"changed": 0, "added": 0, "removed": 0, "diffs": [],
             "missing": "new" if name not in new["books"] else "base" if name not in base["books"] else ""}
        for ch in sorted({s["chapter"] for s in old} | {s["chapter"] for s in cur}):
            a = [s for s in old if s["chapter"] == ch]
            b = [s for s in cur if s["chapter"] == ch]
            sm = difflib.SequenceMatcher(None, [_ident(s) for s in a], [_ident(s) for s in b], autojunk=False)
            for op, i0, i1, j0, j1 in sm.get_opcodes():
                if op == "equal":
                    continue
                pairs = min(i1 - i0, j1 - j0) if op == "replace" else 0
                r["changed"] += pairs
                r["removed"] += (i1 - i0) - pairs
                r["added"] += (j1 - j0) - pairs
                for k in range(max(i1 - i0, j1 - j0)):
                    sa = a[i0 + k] if i0 + k < i1 else None
                    sb = b[j0 + k] if j0 + k < j1 else None
                    r["diffs"].append(("changed" if sa and sb else "removed" if sa else "added", sa, sb))
        result[name] = r
    return result


def _show(seg: dict | None) -> str:
    return "-" if seg is None else f"{seg['chapter'] + 1}.{seg['index'] + 1} {seg['text']!r}"


def report(result: dict, shown: int = DEFAULT_SHOWN) -> bool:
    """Print the counts per book and the first `shown` differences; True when nothing differs."""
    same = True
    left = shown
    for name, r in result.items():
        n = r["changed"] + r["added"] + r["removed"]
        note = f"   (only in the {'baseline' if r['missing'] == 'new' else 'new run'})" if r["missing"] else ""
        print(f"{name:48s} changed {r['changed']:5d}  added {r['added']:5d}  removed {r['removed']:5d}{note}")
        same = same and n == 0 and not r["missing"]
        for kind, sa, sb in r["diffs"][:max(left, 0)]:
            print(f"    {kind:7s} was {_show(sa)}")
            print(f"            now {_show(sb)}")
            if sa and sb and sa["source_text"] != sb["source_text"]:
                print(f"            source was {sa['source_text']!r}")
                print(f"            source now {sb['source_text']!r}")
        left -= len(r["diffs"])
    print("same segments and keys" if same else "DIFFERENT")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", metavar="JSON", type=Path, help="write the segments of this tree")
    g.add_argument("--against", metavar="JSON", type=Path, help="compare this tree with a saved baseline")
    ap.add_argument("--books", help="comma-separated substrings of the book names (default: all)")
    ap.add_argument("-n", type=int, default=DEFAULT_SHOWN, help=f"differences shown (default {DEFAULT_SHOWN})")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    only = [b.strip() for b in args.books.split(",") if b.strip()] if args.books else None
    if args.against is not None:
        try:
            base = json.loads(args.against.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"segment_diff: {args.against}: cannot read the baseline ({e})", file=sys.stderr)
            return 2
        if base.get("format") != FORMAT:
            print(f"segment_diff: {args.against}: not a segment_diff baseline of format {FORMAT}", file=sys.stderr)
            return 2
        if only:
            base = {**base, "books": {n: b for n, b in base["books"].items() if any(o in n for o in only)}}
    if not books(only):
        print("segment_diff: no book matches " + (args.books or "(corpus absent?)"), file=sys.stderr)
        return 2
    data = collect(only)
    if args.save is not None:
        args.save.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        print(f"{sum(len(b['segments']) for b in data['books'].values())} segments of {len(data['books'])} "
              f"books at {data['commit']} -> {args.save}")
        return 0
    print(f"baseline {base.get('commit')}  vs  {data['commit']}")
    return 0 if report(compare(base, data), args.n) else 1


if __name__ == "__main__":
    raise SystemExit(main())
