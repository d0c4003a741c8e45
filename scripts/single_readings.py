"""Rebuild tasks/text/single_readings.tsv (the lexicon readings' table) from the installed pypinyin, jieba and
OpenCC: `python scripts/single_readings.py`.  Deterministic: the same versions write the same bytes
(tasks/text/polyphones.build_table says how each syllable's character is chosen)."""
from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's tasks/, not an installed one
from tasks.text.polyphones import COMMON_CHARS, SINGLE_READINGS, build_table


def main() -> None:
    rows = build_table()
    head = [
        "# toned syllable -> the common character pypinyin reads only that way (lexicon readings: yin2 hang2 -> 银航)",
        f"# built by scripts/single_readings.py from pypinyin {version('pypinyin')} (pinyin_dict, phrases_dict), "
        f"jieba {version('jieba')} (dict.txt counts), opencc {version('opencc')} (t2s)",
        f"# a character: Simplified, U+4E00-U+9FFF, among the {COMMON_CHARS} most frequent "
        "(jieba counts summed over the words holding it), read one way by pypinyin in every phrase, "
        "no other reading in use;",
        "# per syllable the highest count, then the lower code point (tasks/text/polyphones.build_table)",
        "# syllable\tcharacter\tcount",
    ]
    SINGLE_READINGS.write_text("\n".join(head + ["\t".join(map(str, r)) for r in rows]) + "\n", encoding="utf-8")
    print(f"{SINGLE_READINGS}: {len(rows)} syllables")


if __name__ == "__main__":
    main()
