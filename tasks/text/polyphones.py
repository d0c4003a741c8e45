"""Chinese polyphones (多音字) a user can steer: which characters have more than one reading in use, the words of a
book that contain them (`inspect --polyphones`), and a lexicon reading turned into a spelling ChatTTS can only
read one way (`银行<TAB>yin2 hang2` -> 银航).

ChatTTS reads characters, not pinyin, so the only lever on a polyphone is a homophone spelling: each character
whose readings are not exactly the asked one is replaced by a common character that pypinyin reads only that way
(SINGLE_READINGS, a committed table built by `build_table`; its provenance is in its header).  Syllables are kept
in one form everywhere: pypinyin's TONE3, `v` for ü, 5 for the neutral tone (`hang2`, `lv4`, `de5`).

pypinyin is imported lazily (its dictionaries take ~0.5 s to load): a book without reading entries never loads it.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# ---------------------------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------------------------
SINGLE_READINGS = Path(__file__).with_name("single_readings.tsv")   # toned syllable -> common character
PHRASE_ATTESTED_MIN = 2      # phrases of pypinyin's phrase dictionary a reading must occur in to count as in use
PHRASE_SHARE_MIN = 0.05      # ... and this share of the character's occurrences there (说 yue4: 2 of 266, archaic)
COMMON_CHARS = 4_000         # "common": the most frequent characters by jieba dict.txt counts (see build_table)
TONE_SANDHI = "一不"          # their other readings are tone sandhi, which ChatTTS applies by rule: not listed
SAMPLE_CHARS = 10            # characters either side of a word in its sample (inspect --polyphones)
NEUTRAL = "5"                # the neutral tone's digit

_RE_NUMBERED = re.compile(r"[a-zü]+[1-5]")                    # an unbracketed reading: yin2 hang2
_RE_SYLLABLE = re.compile(r"[a-zāáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜüêńňǹḿ:]+[0-5]?")


@lru_cache(maxsize=1)
def _pp():
    """pypinyin's functions and dictionaries (lazy: a heavy import)."""
    from pypinyin import Style, lazy_pinyin
    from pypinyin.contrib.tone_convert import to_normal, to_tone, to_tone3
    from pypinyin.phrases_dict import phrases_dict
    from pypinyin.pinyin_dict import pinyin_dict
    return Style, lazy_pinyin, to_normal, to_tone, to_tone3, phrases_dict, pinyin_dict


def _tone3(mark: str) -> str:
    """A pypinyin reading (tone marks) in our form: TONE3, v for ü, 5 for the neutral tone."""
    return _pp()[4](mark, neutral_tone_with_five=True).replace("ü", "v")


def marks(syllable: str) -> str:
    """`hang2` -> `háng`, `lv4` -> `lǜ`, `de5` -> `de` (for people)."""
    return _pp()[3](syllable[:-1] if syllable.endswith(NEUTRAL) else syllable)


# ---------------------------------------------------------------------------------------------------------------
# Readings of characters and words
# ---------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _char_readings() -> dict[str, tuple[str, ...]]:
    """Every character pypinyin knows -> its readings, the default first (pypinyin's single-character dictionary)."""
    return {chr(k): tuple(dict.fromkeys(_tone3(r) for r in v.split(","))) for k, v in _pp()[6].items()}


@lru_cache(maxsize=1)
def _phrase_readings() -> dict[str, Counter]:
    """character -> Counter of the readings pypinyin's phrase dictionary gives it (one count per phrase)."""
    out: dict[str, Counter] = {}
    for phrase, rs in _pp()[5].items():
        if len(phrase) == len(rs):
            for c, r in zip(phrase, rs):
                out.setdefault(c, Counter())[_tone3(r[0])] += 1
    return out


def readings(c: str) -> tuple[str, ...]:
    """All of a character's readings in pypinyin's dictionary (literary and archaic ones included)."""
    return _char_readings().get(c, ())


@lru_cache(maxsize=65_536)
def readings_in_use(c: str) -> tuple[str, ...]:
    """The readings a reader meets: the default one, and any other that pypinyin's phrase dictionary gives the
    character in PHRASE_ATTESTED_MIN phrases and PHRASE_SHARE_MIN of its phrases; a neutral-tone variant of another
    of these is no reading of its own (子 zi5/zi3, 头 tou5/tou2: the neutral tone is the context's).  行 -> (xing2,
    hang2); 说 -> (shuo1,), its yue4 (不亦说乎) being in 2 of 266 phrases; 浩 -> (hao4,), gao3 and ge2 in none."""
    rs = readings(c)
    if not rs:
        return ()
    seen = _phrase_readings().get(c, Counter())
    total = sum(seen.values())
    use = rs[:1] + tuple(r for r in rs[1:] if seen[r] >= max(PHRASE_ATTESTED_MIN, PHRASE_SHARE_MIN * total))
    toned = {r[:-1] for r in use if not r.endswith(NEUTRAL)}
    return tuple(r for r in use if not (r.endswith(NEUTRAL) and r[:-1] in toned))


def is_polyphone(c: str) -> bool:
    """A character with two or more readings in use (一 and 不, whose others are tone sandhi, are not)."""
    return c not in TONE_SANDHI and len(readings_in_use(c)) > 1


@lru_cache(maxsize=65_536)
def word_reading(word: str) -> tuple[str, ...]:
    """The reading pypinyin gives a word (its phrase dictionary where the word is in it), one syllable per char."""
    Style, lazy_pinyin, *_ = _pp()
    out = lazy_pinyin(word, style=Style.TONE3, neutral_tone_with_five=True, errors=lambda s: ["?"] * len(s))
    return tuple(s.replace("ü", "v") for s in out) if len(out) == len(word) else ("?",) * len(word)


def in_phrase_dict(word: str) -> bool:
    return word in _pp()[5]


# ---------------------------------------------------------------------------------------------------------------
# Lexicon readings: `yin2 hang2` / `[yín háng]` -> a spelling
# ---------------------------------------------------------------------------------------------------------------
def parse_reading(word: str, text: str) -> tuple[str, ...] | None:
    """The syllables of a lexicon replacement that is a reading, None when it is a plain replacement.  A reading is
    `[...]` (tone marks or numbers) or tone-numbered syllables alone (`yin2 hang2`), one per character of `word`.
    Raises ValueError naming the problem (bad pinyin, a count that does not match, a word that is not Chinese)."""
    bracketed = text.startswith("[") and text.endswith("]")
    tokens = (text[1:-1] if bracketed else text).lower().split()
    if not bracketed and not (tokens and all(_RE_NUMBERED.fullmatch(t) for t in tokens)):
        return None
    if not tokens:
        raise ValueError("an empty reading []")
    syllables = tuple(_syllable(t) for t in tokens)
    if not all("\u4e00" <= c <= "\u9fff" for c in word):
        raise ValueError(f"a reading needs a word of Chinese characters only, not {word!r}")
    if len(syllables) != len(word):
        raise ValueError(f"{len(syllables)} syllables for the {len(word)} characters of {word!r} (one per character)")
    return syllables


def _syllable(token: str) -> str:
    """One syllable in our form, or ValueError("bad pinyin ...")."""
    t = token.replace("u:", "v").replace("ü", "v")
    if not _RE_SYLLABLE.fullmatch(token) or t[-1:] == "0":
        raise ValueError(f"bad pinyin {token!r} (a syllable with a tone number 1-5, or tone marks inside [ ])")
    s = t if t[-1].isdigit() else _tone3(t.replace("v", "ü"))
    if s[:-1] not in _bases():
        raise ValueError(f"bad pinyin {token!r}: no such syllable")
    return s


@lru_cache(maxsize=1)
def _bases() -> frozenset[str]:
    return frozenset(r[:-1] for rs in _char_readings().values() for r in rs)


def spell(word: str, syllables: tuple[str, ...]) -> str:
    """`word` spelled so that it has only the asked readings.  A character stays when its one reading in use is
    the asked one (银 in 银行; 大 would not: dài is in use too); for the neutral tone (5) a character stays when it
    has a reading of that syllable in any tone (the neutral tone is the context's: 地 in 慢慢地 de5).  Any other
    character is replaced by SINGLE_READINGS's character for the syllable (行 hang2 -> 航).  Where the table has
    none, a character whose default reading is the asked one stays (大 in 长大 zhang3 da4 -> 掌大: no common
    character reads only da4); otherwise ValueError."""
    table = single_readings()
    out = []
    for c, s in zip(word, syllables):
        if readings_in_use(c) == (s,) or (s.endswith(NEUTRAL) and any(r[:-1] == s[:-1] for r in readings(c))):
            out.append(c)
        elif s in table:
            out.append(table[s])
        elif readings(c)[:1] == (s,):
            out.append(c)
        else:
            raise ValueError(f"no common character reads only {s} ({marks(s)}), for {c} in {word!r}: "
                             "write a replacement word instead of a reading")
    return "".join(out)


@lru_cache(maxsize=1)
def single_readings() -> dict[str, str]:
    """The committed table: toned syllable -> its character."""
    table = {}
    for line in SINGLE_READINGS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            syllable, char, *_ = line.split("\t")
            table[syllable] = char
    return table


def build_table() -> list[tuple[str, str, int]]:
    """SINGLE_READINGS from the installed dictionaries, deterministically: (syllable, character, count) rows.

    A candidate is a Simplified character (OpenCC t2s leaves it as it is) of U+4E00-U+9FFF among the COMMON_CHARS
    most frequent (count: the jieba dict.txt counts of every word holding it, summed) that pypinyin reads one way
    in every context: that reading is its default, no phrase of pypinyin's phrase dictionary reads it otherwise,
    and no other reading is in use (readings_in_use; 浩 hao4 qualifies, its gao3 and ge2 being archaic).  Per
    syllable the candidate with the highest count, then the lower code point."""
    import jieba
    import opencc

    t2s = opencc.OpenCC("t2s")
    counts: Counter = Counter()
    with open(Path(jieba.__file__).with_name("dict.txt"), encoding="utf-8") as f:
        for line in f:
            w, n, *_ = line.split()
            for c in set(w):
                counts[c] += int(n)
    ranked = [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if "\u4e00" <= c <= "\u9fff"]
    common = set(ranked[:COMMON_CHARS])
    phrase = _phrase_readings()
    best: dict[str, tuple[int, int, str]] = {}
    for c in sorted(common):
        rs = readings(c)
        if not rs or t2s.convert(c) != c or set(phrase.get(c, ())) - {rs[0]} or readings_in_use(c) != rs[:1]:
            continue
        key = (counts[c], -ord(c), c)
        if rs[0] not in best or key > best[rs[0]]:
            best[rs[0]] = key
    return [(s, c, n) for s, (n, _, c) in sorted(best.items())]


# ---------------------------------------------------------------------------------------------------------------
# A book's polyphonic words (inspect --polyphones)
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Word:
    count: int
    name: str
    sample: str


def polyphone_words(texts: Iterable[tuple[str, str]]) -> list[dict]:
    """The words (jieba, dictionary only, as the segmenter cuts) of `texts` — (segment name, spoken text) pairs —
    that hold a polyphone (is_polyphone), most frequent first (then in book order): the word, its count, the
    reading pypinyin gives it (`reading`, tone marks; `lexicon`, the line's tone-number form), whether pypinyin's
    phrase dictionary fixes that reading (`phrase`), each polyphone's readings in use, and the first segment it
    occurs in with the text around it."""
    import jieba
    jieba.setLogLevel(60)
    found: dict[str, _Word] = {}
    poly: dict[str, bool] = {}
    for name, text in texts:
        pos = 0
        for w in jieba.cut(text, HMM=False):
            at, pos = pos, pos + len(w)
            hit = poly.get(w)
            if hit is None:
                hit = poly[w] = any("\u4e00" <= c <= "\u9fff" and is_polyphone(c) for c in w)
            if not hit:
                continue
            if w in found:
                found[w].count += 1
            else:
                sample = text[max(0, at - SAMPLE_CHARS):pos + SAMPLE_CHARS]
                found[w] = _Word(1, name, sample)
    out = []
    for w, f in sorted(found.items(), key=lambda kv: -kv[1].count):       # stable: book order among equals
        r = word_reading(w)
        out.append({"word": w, "count": f.count, "reading": " ".join(marks(s) if s != "?" else s for s in r),
                    "lexicon": " ".join(r), "phrase": in_phrase_dict(w),
                    "polyphones": {c: [marks(s) for s in readings_in_use(c)] for c in dict.fromkeys(w)
                                   if is_polyphone(c)},
                    "sample": {"name": f.name, "text": f.sample}})
    return out
