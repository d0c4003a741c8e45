"""The user's lexicon: `word<TAB>replacement` lines (a replacement may be a reading, `yin2 hang2`), from the global
file, the book's and --lexicon's, applied before TN by tasks/text/normalize.py (NormalizeOptions.lexicon)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tasks.errors import BookError
from tasks.text.polyphones import parse_reading, spell
from tasks.text.t2s import simplified


@dataclass(frozen=True)
class Lexicon:
    """User replacements applied before TN: `word<TAB>replacement` lines, `#` comments, UTF-8.  A replacement may
    be a reading, `yin2 hang2` or `[yín háng]` (one syllable per character): it becomes a spelling ChatTTS can
    only read that way (tasks/text/polyphones.spell: 银行 -> 银航), which is what `entries` holds; `readings`
    keeps the syllables, so that a Traditional key is spelled from its Simplified form under t2s (頭髮 fa4: 发).

    Longest match wins; later files override earlier ones (global first, then the book's).  Keys are matched
    after Traditional -> Simplified conversion, so a Simplified key also matches Traditional text."""
    entries: tuple[tuple[str, str], ...] = ()
    readings: tuple[tuple[str, tuple[str, ...]], ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @classmethod
    def load(cls, *paths: str | Path) -> Lexicon:
        merged: dict[str, str] = {}
        readings: dict[str, tuple[str, ...]] = {}
        for path in paths:
            try:
                text = Path(path).read_text(encoding="utf-8-sig")
            except FileNotFoundError:
                raise BookError(str(path), "lexicon file not found") from None
            except UnicodeDecodeError:
                raise BookError(str(path), "lexicon file is not UTF-8") from None
            for lineno, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if "\t" not in line:
                    raise BookError(str(path), f"line {lineno}: expected word<TAB>replacement")
                word, repl = line.split("\t", 1)
                word, repl = word.strip(), repl.strip()
                if not word:
                    raise BookError(str(path), f"line {lineno}: empty word")
                try:
                    if (syllables := parse_reading(word, repl)) is not None:
                        repl = spell(word, syllables)
                except ValueError as e:
                    raise BookError(str(path), f"line {lineno}: {e}") from None
                merged[word] = repl
                readings.pop(word, None)
                if syllables is not None:
                    readings[word] = syllables
        return cls(tuple(merged.items()), tuple(readings.items()))

    def pattern(self, t2s: bool) -> tuple[re.Pattern | None, dict[str, str]]:
        key = ("t2s" if t2s else "raw")
        if key not in self._cache:
            table: dict[str, str] = {}
            syllables = dict(self.readings)
            for word, repl in self.entries:
                table[word] = repl
                if t2s:
                    simple = simplified(word)
                    if word in syllables and simple != word and len(simple) == len(word):
                        try:
                            repl = spell(simple, syllables[word])
                        except ValueError:
                            pass                  # the Traditional spelling, which load() accepted, stands
                    table.setdefault(simple, repl)
            words = sorted(table, key=len, reverse=True)
            pat = re.compile("|".join(map(re.escape, words))) if words else None
            self._cache[key] = (pat, table)
        return self._cache[key]
