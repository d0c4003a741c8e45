"""What the text stage makes of a sentence: `python scripts/normalize.py [--en] TEXT...` (or `-` for stdin) prints
the normalized text ChatTTS is given, and on stderr what was removed and why; --en reads it as an English book
(tasks/text/normalize.py; `chattts-render inspect BOOK --segments` shows the same for a whole book)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's tasks/, not an installed one
from tasks.text.normalize import NormalizeOptions, normalize_with_map, printable, removals


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    english = args[:1] == ["--en"]
    args = args[1:] if english else args
    text = sys.stdin.read() if args == ["-"] else " ".join(args)
    out, spans = normalize_with_map(text, NormalizeOptions(lang="en" if english else "zh"))
    print(out)
    for r in removals(spans, text):
        print(f"  removed {printable(r.text)!r} at {r.start}: {r.reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
