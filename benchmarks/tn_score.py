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

English and mixed-language sets (issue 25), each normalized with the book language it belongs to
(`NormalizeOptions(lang=...)`): NeMo's English cases nemo-en/ as `nemo-en` (the files an audiobook meets),
`nemo-en-other` (NeMo-specific files: e-mail/URL spelling, telephone and serial numbers, NeMo's tags, its
punctuation-matching mode; on their own line) and `nemo-en-audio` (`~written` followed by its accepted readings:
a case matches when any one does), all with lang="en"; our held-out sets of real sentences `heldout-en`
(heldout-en/cases.tsv, lang="en") and `mixed` (mixed/cases.tsv: Chinese sentences with English in them,
lang="zh").  `codes` (codes/cases.tsv, issue 33) is a held-out set of Chinese sentences with telephone numbers,
postcodes, ID and account numbers, QQ numbers, flights, trains and plates; `rooms` (rooms/cases.tsv, issue 41) one
of room, flat and house numbers and of the `+` of an international prefix, which we read 加 (`codes` and
`paddlespeech` were written with it silent: scored raw and with that convention, `PLUS_SETS`).  `--baseline` is
wetext alone in the set's language (`Normalizer(lang="en")` for the English sets).

English canonicalization (both sides, `canon_en`): a hyphen inside a Latin word is a space (`thirty-two` = thirty
two), quotes and apostrophes at the edge of a word do not count (`'nineties` = nineties), then our punctuation
table (no TN) as for Chinese, then case does not count, periods do not count (an abbreviation's period and a full
stop cannot be told apart: `p.m.` = PM, `U.S.` = US), spellings of one sound are one (metre/meter, litre/liter,
per cent/percent, missus/misses), and spaces around punctuation do not count (`one ,` = one,).  An English case
also misses when the output holds a Han character or a full-width mark that its input does not (English is read
with ASCII punctuation).  Mixed canonicalization (`canon_mixed`): the punctuation table for Chinese, hyphens
inside Latin words as spaces, case does not count, and no space next to a Chinese character or mark counts
(`CCTV 一` = CCTV一).

The NeMo English sets are scored twice: raw, and with NeMo's documented conventions (`CONVENTIONS`: "and" in
numbers and money, a dash between numbers as "to", `2x8` "by", a regnal "the", spaced initials; both sides, these
sets only), both rates on their line; five nemo-en cases of NeMo's punctuation-preserving mode are scored with
nemo-en-other (`NEMO_EN_MOVED`, tests/data/tn/nemo-en/README.md).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tasks.book import Language

ROOT = Path(__file__).resolve().parents[1]
TN_DIR = ROOT / "tests" / "data" / "tn"
CORPUS = Path(os.environ.get("CHATTTS_RENDER_CORPUS", ROOT.parent / "shared" / "corpus"))
HONGLOUMENG = CORPUS / "txt" / "gutenberg-zh" / "24264-0.txt"     # --speed only

Expected = str | tuple[str, ...]     # one reading, or several accepted ones (nemo-en-audio)
Case = tuple[str, Expected, str]              # (input, expected, origin)


@dataclass(frozen=True)
class TnSet:
    """One scored set: `files` are globs under TN_DIR (minus `exclude`, file names); `sep` splits input from
    reading (None: NeMo's audio format, `~written` then one accepted reading a line); `lang` is the book language
    the set is normalized with."""
    files: tuple[str, ...]
    sep: str | None
    lang: Language = "zh"
    exclude: tuple[str, ...] = ()
    note: str = ""                            # printed at the end of the set's line
    drop: tuple[str, ...] = ()                # single cases (`file:line`) left out of the set
    take: tuple[str, ...] = ()                # single cases (`dir/file:line`) taken in from another set's files


# NeMo's English files whose readings make no sense read aloud in a book (tests/data/tn/README.md): own line.
NEMO_EN_OTHER = ("electronic", "telephone", "serial", "special_text", "punctuation_match_input")
NEMO_EN_AUDIO = "test_cases_normalize_with_audio.txt"
_NEMO_EN_EXCLUDE = tuple(f"test_cases_{n}.txt" for n in NEMO_EN_OTHER) + (NEMO_EN_AUDIO,)
# Single cases of the nemo-en files that test NeMo's punctuation-preserving mode (marks kept glued to the words as
# written), scored with nemo-en-other: see tests/data/tn/nemo-en/README.md.
NEMO_EN_MOVED = ("test_cases_measure.txt:10",        # covid-19.5 -> covid- nineteen point five
                 "test_cases_punctuation.txt:31",    # "12's and 3'sssssss" -> "twelve's and three ' sssssss"
                 "test_cases_punctuation.txt:47",    # 11:30EST -> eleven: thirty EST
                 "test_cases_punctuation.txt:54",    # <pitch=-.3>123?123</pitch>: NeMo's tags kept
                 "test_cases_punctuation.txt:60")    # ÀÁÂÃ check §- and ƛ: letters and marks kept as written

# Conventions where NeMo's English readings disagree with each other and ours is one of them (the NeMo English
# sets only, applied to both sides after canon_en; `--set nemo-en` prints the raw rate and the rate with them):
#   "and" after hundred/thousand/... or a currency before more number words (NeMo: 35 readings with it, 19
#   without: one hundred twenty three thousand, twenty dollars fifty cents); a dash between numbers is "to"
#   (NeMo: two - five); `2x8` "by" is "x"; "the" before a regnal ordinal (Sam the second / Sam second); spaced
#   initials are one word (C S Lewis / CS Lewis).
_NUM = (r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|thirty|forty|"
        r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|\w+illion|first|second|third|\w+th|\w+ieth)")
_SCALE_OR_MONEY = (r"(?:hundred|thousand|\w+illion|dollars?|pounds?|euros?|won|yen|cents?|pence|penny|"
                   r"yuan|rupees?)")
CONVENTIONS = ((re.compile(rf"\b({_SCALE_OR_MONEY}) and (?={_NUM}\b)"), r"\1 "),
               (re.compile(rf"\b({_NUM})\s?[-\u2013]\s?(?={_NUM}\b)"), r"\1 to "),
               (re.compile(rf"\b({_NUM}) x (?={_NUM}\b)"), r"\1 by "),
               (re.compile(r"(?<=[a-z]) the (?=(?:first|second|third|\w+th)\b)"), " "),
               (re.compile(r"(?<![\w.])([a-z]) (?=[a-z](?![\w.]))"), r"\1"))
CONVENTION_SETS = ("nemo-en", "nemo-en-other", "nemo-en-audio")
# Sets written with the plus of a country code silent (PaddleSpeech's `+86 18544139121` -> 八六…; codes/, issue 33),
# where we read it 加 (issue 41, rooms/): their with-convention rate drops the 加 our reading puts before a country
# code's digits, in a case whose input has a `+` before digits (ours only: the golden side has no such 加).
PLUS_SETS = ("codes", "paddlespeech")
_RE_PLUS_INPUT = re.compile(r"[+＋]\s?[(（]?\d")
_RE_PLUS_READ = re.compile(r"加(?=[(（]?[零一二三四五六七八九幺])")

# The first three are regression sets; `heldout` was held out until its misses guided rules; `heldout-2`,
# `heldout-3`, `heldout-en`, `mixed` and `codes` are held out (their READMEs in tests/data/tn).
SETS: dict[str, TnSet] = {
    "nemo": TnSet(("nemo/*.txt",), "~"),
    "paddlespeech": TnSet(("paddlespeech/textnorm_test_cases.txt",), "|"),
    "wetext": TnSet(("wetextprocessing/*.txt",), " => "),
    "heldout": TnSet(("heldout/cases.tsv",), "\t"),
    "heldout-2": TnSet(("heldout/cases-2.tsv",), "\t"),
    "heldout-3": TnSet(("heldout/cases-3.tsv",), "\t"),
    "nemo-en": TnSet(("nemo-en/test_cases_*.txt",), "~", "en", _NEMO_EN_EXCLUDE, drop=NEMO_EN_MOVED),
    "nemo-en-other": TnSet(tuple(f"nemo-en/test_cases_{n}.txt" for n in NEMO_EN_OTHER), "~", "en",
                           note="NeMo-specific", take=tuple(f"nemo-en/{c}" for c in NEMO_EN_MOVED)),
    "nemo-en-audio": TnSet((f"nemo-en/{NEMO_EN_AUDIO}",), None, "en", note="any accepted reading"),
    "heldout-en": TnSet(("heldout-en/cases.tsv",), "\t", "en"),
    "mixed": TnSet(("mixed/cases.tsv",), "\t", "zh"),
    "codes": TnSet(("codes/cases.tsv",), "\t"),
    "rooms": TnSet(("rooms/cases.tsv",), "\t"),
}
# held-out batches: their lines are marked
HELD_OUT = ("heldout-2", "heldout-3", "heldout-en", "mixed", "codes", "rooms")


def _files(tn_set: TnSet, root: Path) -> list[Path]:
    found = {p for pattern in tn_set.files for p in root.glob(pattern) if p.name not in tn_set.exclude}
    return sorted(found)


def load_cases(name: str, root: Path = TN_DIR) -> list[Case]:
    """[(input, expected, origin)] of one set; origin is file:line (and the source, for the held-out sets);
    expected is a tuple of accepted readings for NeMo's audio-format file."""
    tn_set = SETS[name]
    cases: list[Case] = []
    taken = {}
    for item in tn_set.take:
        file, _, lineno = item.rpartition(":")
        taken.setdefault(root / file, set()).add(int(lineno))
    for path in _files(tn_set, root) + sorted(taken):
        lines = path.read_text(encoding="utf-8").splitlines()
        if tn_set.sep is None:
            cases.extend(_audio_cases(path.name, lines))
            continue
        for lineno, line in enumerate(lines, 1):
            if tn_set.sep not in line or (tn_set.sep == "\t" and line.startswith("#")):
                continue                        # our TSVs have `#` comments; NeMo's `#mytext#~…` is a case
            if f"{path.name}:{lineno}" in tn_set.drop or (path in taken and lineno not in taken[path]):
                continue
            inp, exp, *source = line.split(tn_set.sep)
            cases.append((inp, exp, " ".join([f"{path.name}:{lineno}", *source])))
    return cases


def _audio_cases(file: str, lines: list[str]) -> list[Case]:
    """NeMo's normalize_with_audio format: `~written` opens a case, each following line is an accepted reading."""
    cases: list[Case] = []
    inp, refs, origin = None, [], ""
    for lineno, line in enumerate(lines + ["~"], 1):
        if line.startswith("~"):
            if inp is not None and refs:
                cases.append((inp, tuple(refs), origin))
            inp, refs, origin = line[1:], [], f"{file}:{lineno}"
        elif line.strip():
            refs.append(line)
    return cases


def canon(text: str) -> str:
    """Punctuation and whitespace through our table (no TN, no t2s), for a fair comparison."""
    from tasks.text.normalize import NormalizeOptions, normalize
    return normalize(text, NormalizeOptions(t2s=False, tn=False))


_RE_WORD_HYPHEN = re.compile(r"(?<=[A-Za-z0-9])[-\u2010\u2011](?=[A-Za-z0-9])")
_RE_EDGE_QUOTE = re.compile(r"(?<![^\W\d_])['\u2018\u2019`]|['\u2018\u2019`](?![^\W\d_])")
_RE_PERIOD = re.compile(r"[.\u3002\uff0e\uff61]")
_RE_SPACE_AT_MARK = re.compile(r"\s*([^\w\s'])\s*")
_SAME_SOUND = ((re.compile(r"metre"), "meter"), (re.compile(r"litre"), "liter"),
               (re.compile(r"\bper cent\b"), "percent"), (re.compile(r"\bmissus\b"), "misses"))
_RE_HAN_OR_WIDE = re.compile("[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
_RE_CJK_OR_WIDE = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_RE_SPACE_AT_CJK = re.compile(f"\\s+(?=[{_RE_CJK_OR_WIDE}])|(?<=[{_RE_CJK_OR_WIDE}])\\s+")


def canon_en(text: str) -> str:
    """English comparison form (module docstring): words and numbers as said, not their spelling or marks."""
    from tasks.text.normalize import NormalizeOptions, normalize
    text = _RE_EDGE_QUOTE.sub("", _RE_WORD_HYPHEN.sub(" ", text))
    text = _RE_PERIOD.sub("", normalize(text, NormalizeOptions(t2s=False, tn=False, lang="en")).casefold())
    for pattern, repl in _SAME_SOUND:
        text = pattern.sub(repl, text)
    return " ".join(_RE_SPACE_AT_MARK.sub(r"\1", text).split())


def conventions_en(text: str) -> str:
    """canon_en with NeMo's documented equivalences (CONVENTIONS) applied: the form both sides take for the
    with-conventions rate of the NeMo English sets."""
    for pass_ in range(2):                       # before canon_en (a spaced dash becomes a comma there) and after
        text = text.casefold() if pass_ == 0 else canon_en(text)
        for pattern, repl in CONVENTIONS:
            text = pattern.sub(repl, text)
    return text


def canon_mixed(text: str) -> str:
    """Mixed-language comparison form: the Chinese table, hyphens in words as spaces, no case, no space at Han."""
    from tasks.text.normalize import NormalizeOptions, normalize
    text = normalize(_RE_WORD_HYPHEN.sub(" ", text), NormalizeOptions(t2s=False, tn=False, lang="zh")).casefold()
    return " ".join(_RE_SPACE_AT_CJK.sub("", text).split())


CANON: dict[str, Callable[[str], str]] = {"zh": canon, "en": canon_en}


def canon_for(name: str, conventions: bool = False) -> Callable[[str], str]:
    """The comparison form of one set: Chinese sets as before, English sets `canon_en`, `mixed` `canon_mixed`;
    with `conventions`, the NeMo English sets `conventions_en`."""
    if conventions and name in CONVENTION_SETS:
        return conventions_en
    return canon_mixed if name == "mixed" else CANON[SETS[name].lang]


def score(fn: Callable[[str], str], cases: list[Case], name: str | None = None,
          conventions: bool = False) -> tuple[float, list[tuple]]:
    """(exact-match rate, misses as (origin, input, expected, got)); `name` picks the set's comparison form
    (default: the Chinese one); `conventions` applies CONVENTIONS (the NeMo English sets) or the silent
    plus (PLUS_SETS)."""
    form = canon_for(name, conventions) if name else canon
    english = name is not None and SETS[name].lang == "en"
    plus_silent = conventions and name in PLUS_SETS
    misses = []
    for inp, exp, origin in cases:
        got = fn(inp)
        if plus_silent and _RE_PLUS_INPUT.search(inp):
            got = _RE_PLUS_READ.sub("", got)
        refs = (exp,) if isinstance(exp, str) else exp
        ok = form(got) in {form(r) for r in refs}
        if ok and english and _RE_HAN_OR_WIDE.search(got) and not _RE_HAN_OR_WIDE.search(inp):
            ok = False                                  # English is read with ASCII marks, never Han
        if not ok:
            misses.append((origin, inp, exp, got))
    rate = 1.0 - len(misses) / len(cases) if cases else 0.0
    return rate, misses


def ours(text: str, lang: Language = "zh") -> str:
    from tasks.text.normalize import NormalizeOptions, normalize
    return normalize(text, NormalizeOptions(lang=lang))


def wetext_alone(text: str, lang: Language = "zh") -> str:
    if lang == "en":
        from tasks.text.english import wetext_en
        if not text.strip():
            return text                     # wetext's English grammar asserts on empty input: nothing to read
        try:
            return wetext_en().normalize(text)
        except Exception as exc:            # noqa: BLE001 - a baseline that fails on a case misses it
            return f"<wetext failed: {type(exc).__name__}>"
    from tasks.text.rules import wetext_zh
    return wetext_zh().normalize(text)


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
    ap.add_argument("--set", dest="sets", action="append", choices=list(SETS), metavar="NAME",
                    help=f"score only this set (repeatable): {', '.join(SETS)}")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    for name in args.sets or SETS:
        cases, lang = load_cases(name), SETS[name].lang
        conv = name in CONVENTION_SETS or name in PLUS_SETS
        rate, misses = score(partial(ours, lang=lang), cases, name)
        line = f"{name:13s} ours {rate:6.1%} ({len(cases) - len(misses)}/{len(cases)})"
        if conv:                                # raw, then with the documented conventions (its misses listed)
            rate, misses = score(partial(ours, lang=lang), cases, name, conventions=True)
            line += f" with conventions {rate:6.1%} ({len(cases) - len(misses)}/{len(cases)})"
        if args.baseline:
            brate, bmisses = score(partial(wetext_alone, lang=lang), cases, name)
            line += f"   wetext alone {brate:6.1%} ({len(cases) - len(bmisses)}/{len(cases)})"
            if conv:
                brate, bmisses = score(partial(wetext_alone, lang=lang), cases, name, conventions=True)
                line += f" with conventions {brate:6.1%} ({len(cases) - len(bmisses)}/{len(cases)})"
        note = "held out" if name in HELD_OUT else SETS[name].note
        print(line + (f"   {note}" if note else ""))
        if args.verbose or not args.baseline:
            for origin, inp, exp, got in misses:
                print(f"    miss {origin:32s} {inp!r} -> {got!r}  (want {exp!r})")
    if args.speed:
        n, sec = speed()
        print(f"紅樓夢 {n:,} chars normalized in {sec:.1f} s ({n / sec:,.0f} chars/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
