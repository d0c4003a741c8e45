"""What a recording says against what it should say, as an error rate over comparable units.

Both sides go through the same path, so only differences a listener hears count:

    zh  our normalizer (t2s, digits/dates/units read aloud) -> one toneless pinyin syllable per Han character
        (pypinyin Style.NORMAL over each run of Han characters, so polyphones read in context), a lower-case word
        per Latin word; punctuation and spaces dropped.  Homophones and proper-noun spellings (王英汉 / 王应汉)
        are the same syllables, Traditional and Simplified the same characters.
    en  lower-case words; a token holding a digit or a symbol is read aloud by wetext's English grammar first
        ("23" -> twenty three, "$12" -> twelve dollars); punctuation dropped, hyphens split words, apostrophes
        dropped ("dream's" is "dreams", "it's" is "its": the same sounds).

cer = Levenshtein(ref units, hyp units) / max(1, len(ref units)); for English that is a word error rate.  Each unit
remembers the characters of the original text it came from, so the differences (ops) show the original text.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tasks.text.english import wetext_en
from tasks.text.normalize import normalize_with_map

LANGUAGES = ("zh", "en")

_RE_HAN_RUN = re.compile(r"[\u4e00-\u9fff\u3007]+")
_RE_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)*")
_RE_TOKEN = re.compile(r"\S+")
_RE_NEEDS_TN = re.compile(r"[0-9$€£¥%&+@#°]")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})


@dataclass(frozen=True)
class Comparison:
    cer: float                              # edit distance / max(1, len(ref)); can exceed 1
    ref: list[str]                          # the intended text's units
    hyp: list[str]                          # the transcript's units
    ops: list[tuple[str, str, str]]         # (op, ref_text, hyp_text), runs of one op merged; original text
    matched: int                            # intended units heard as themselves (equal in the edit script)
    last_matched: int                       # the index of the last of them in ref; -1 when none
    heard_after: int                        # transcript units after the last intended unit heard as itself (all
                                            # of them when none was): 0 = nothing heard in place of the text's tail


@dataclass(frozen=True)
class _Unit:
    key: str                                # what is compared: a syllable or a lower-case word
    start: int                              # the original characters [start, end) it came from
    end: int


def detect_language(text: str) -> str:
    """"en" when Latin letters outnumber Han characters, else "zh" (the project's books are Chinese first)."""
    han = sum(1 for c in text if "\u4e00" <= c <= "\u9fff" or c == "\u3007")
    latin = sum(1 for c in text if c.isascii() and c.isalpha())
    return "en" if latin > han else "zh"


def units(text: str, language: str) -> list[str]:
    """The comparable units of `text` (see the module doc)."""
    return [u.key for u in _units(text, language)]


def unit_spans(text: str, language: str) -> list[tuple[str, int, int]]:
    """The comparable units of `text`, each with the characters [start, end) of `text` it came from."""
    return [(u.key, u.start, u.end) for u in _units(text, language)]


def compare(intended: str, transcript: str, language: str) -> Comparison:
    ref, hyp = _units(intended, language), _units(transcript, language)
    steps = align([u.key for u in ref], [u.key for u in hyp])
    dist = sum(op != "equal" for op, _, _ in steps)
    return Comparison(cer=dist / max(1, len(ref)), ref=[u.key for u in ref], hyp=[u.key for u in hyp],
                      ops=_merge(steps, ref, hyp, intended, transcript),
                      matched=sum(op == "equal" for op, _, _ in steps),
                      last_matched=max((i for op, i, _ in steps if op == "equal" and i is not None), default=-1),
                      heard_after=len(hyp) - 1 - max((j for op, _, j in steps if op == "equal" and j is not None),
                                                     default=-1))


# ------------------------------------------------------------------------------------------------ units

def _units(text: str, language: str) -> list[_Unit]:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} must be one of {', '.join(LANGUAGES)}")
    return _zh_units(text) if language == "zh" else _en_units(text)


def _zh_units(text: str) -> list[_Unit]:
    out, spans = normalize_with_map(text)
    src: list[tuple[int, int]] = []                  # [len(out)]: the source range of each output character
    for s in spans:
        one_to_one = s.aligned and len(s.out) == s.end - s.start
        src += [(s.start + i, s.start + i + 1) if one_to_one else (s.start, s.end) for i in range(len(s.out))]
    found: list[tuple[int, list[_Unit]]] = []
    for m in _RE_HAN_RUN.finditer(out):
        found.append((m.start(), [_Unit(syl, *src[m.start() + i]) for i, syl in enumerate(_pinyin(m.group()))]))
    for m in _RE_LATIN_WORD.finditer(out):
        found.append((m.start(), [_Unit(m.group().lower(), src[m.start()][0], src[m.end() - 1][1])]))
    return [u for _, us in sorted(found, key=lambda f: f[0]) for u in us]


def _pinyin(run: str) -> list[str]:
    """One toneless syllable per Han character of `run`, read in context."""
    syllables = list(_lazy_pinyin(run))
    if len(syllables) != len(run):                  # a character pypinyin does not know: per character
        syllables = [_lazy_pinyin(c)[0] for c in run]
    return syllables


@lru_cache(maxsize=65_536)
def _lazy_pinyin(run: str) -> tuple[str, ...]:
    return tuple(_pypinyin()(run))


@lru_cache(maxsize=1)
def _pypinyin():
    from pypinyin import Style, lazy_pinyin  # a main dependency; imported only when a check runs

    def each(chars: str) -> Any:                    # what pypinyin cannot read: one item per character (a list,
        return list(chars)                          # which pypinyin takes; its annotation says str)

    return lambda run: lazy_pinyin(run, style=Style.NORMAL, errors=each)


def _en_units(text: str) -> list[_Unit]:
    out = []
    for m in _RE_TOKEN.finditer(text):                 # a unit points at its whole token of the original
        token = unicodedata.normalize("NFKC", m.group()).translate(_APOSTROPHES)
        spoken = _en_tn(token) if _RE_NEEDS_TN.search(token) else token
        out += [_Unit(w.lower().replace("'", ""), m.start(), m.end())
                for w in _RE_LATIN_WORD.findall(spoken.replace("-", " "))]
    return out


@lru_cache(maxsize=65_536)
def _en_tn(token: str) -> str:
    return wetext_en().normalize(token)


# ------------------------------------------------------------------------------------------- alignment

def align(ref: list[str], hyp: list[str]) -> list[tuple[str, int | None, int | None]]:
    """A minimal edit script: (op, ref index | None, hyp index | None) in order.  Levenshtein with unit costs;
    among the minimal scripts, the one with the most equal units (甚至出现交易 / 甚至交易停滞 is 2 deletions
    and 2 insertions around 交易, not 4 substitutions)."""
    n, m = len(ref), len(hyp)
    # d[i][j] = (edits, -equal units) of ref[:i] against hyp[:j], compared as tuples   [n+1][m+1]
    d = [[(j, 0) for j in range(m + 1)]] + [[(i, 0)] + [(0, 0)] * m for i in range(1, n + 1)]
    for i in range(1, n + 1):
        row, prev, r = d[i], d[i - 1], ref[i - 1]
        for j in range(1, m + 1):
            e, q = prev[j - 1]
            diag = (e, q - 1) if r == hyp[j - 1] else (e + 1, q)
            up, left = prev[j], row[j - 1]
            row[j] = min(diag, (up[0] + 1, up[1]), (left[0] + 1, left[1]))
    steps: list[tuple[str, int | None, int | None]] = []
    i, j = n, m
    while i or j:
        if i and j:
            e, q = d[i - 1][j - 1]
            same = ref[i - 1] == hyp[j - 1]
            if d[i][j] == ((e, q - 1) if same else (e + 1, q)):
                steps.append(("equal" if same else "sub", i - 1, j - 1))
                i, j = i - 1, j - 1
                continue
        if i and d[i][j] == (d[i - 1][j][0] + 1, d[i - 1][j][1]):
            steps.append(("del", i - 1, None))
            i -= 1
        else:
            steps.append(("ins", None, j - 1))
            j -= 1
    return steps[::-1]


def _merge(steps, ref: list[_Unit], hyp: list[_Unit], intended: str, transcript: str) -> list[tuple[str, str, str]]:
    """Runs of one op, each side shown as the original characters its units came from."""
    runs: list[tuple[str, list[int], list[int]]] = []
    for op, i, j in steps:
        if not runs or runs[-1][0] != op:
            runs.append((op, [], []))
        if i is not None:
            runs[-1][1].append(i)
        if j is not None:
            runs[-1][2].append(j)
    return [(op, _original(intended, [ref[i] for i in ri]), _original(transcript, [hyp[j] for j in hj]))
            for op, ri, hj in runs]


def _original(text: str, us: list[_Unit]) -> str:
    if not us:
        return ""
    start, end = min(u.start for u in us), max(u.end for u in us)
    return text[start:end] if 0 <= start < end <= len(text) else " ".join(u.key for u in us)
