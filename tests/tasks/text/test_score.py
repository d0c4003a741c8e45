"""TN exact-match rates on the sets in tests/data/tn (benchmarks/tn_score.py prints them with the misses).

The three public sets are regression sets: they were used while the rules were written, so they are held at the
rates reached (NeMo 94.3 %, 94.6 % since the ordinal rule; PaddleSpeech 95.3 %), and WeTextProcessing's own cases
at least at wetext alone.  The held-out sets (real sentences whose readings were written before any rule was
changed for them) are held at the rates reached, rounded down: the first batch, `heldout` (97.0 %; its misses then
guided rules), and the second, `heldout-2` (96.2 %), which the benchmark scores on its own line, and the third,
`heldout-3` (ordinals, clock hours, durations: 76.5 % on its first run, 100 % after the 两/二 and duration rules;
held at 94 %, one miss of its 17).  The fourth held-out set, `codes` (telephone numbers and codes, issue 33: 45.9 %
on its first run, 95.9 % after the rules of tasks/text/codes.py), is held at 95 % with the silent plus it was written
with (PLUS_SETS; raw 85.1 % since issue 41 reads the plus 加).  The fifth, `rooms` (room, flat and house numbers and
the plus, issue 41: 5.6 % on its first run, 98.1 % after the rules), is held at 95 %.  The sets disagree on a few
conventions (docs/text-frontend.md).

The English and mixed-language sets (issue 25: NeMo's English cases, our English held-out sentences, Chinese
sentences with English in them) are checked here for how they load and how they are compared, and held at
acceptance 2's 95 % (heldout-en 96.0 %, mixed 97.7 % when measured) and nemo-en at its rate with the documented
conventions rounded down (96.6 %: 0.96; raw exact match 89.8 %)."""
from __future__ import annotations

import re
from functools import partial

import pytest

from benchmarks.tn_score import (
    HELD_OUT,
    NEMO_EN_AUDIO,
    NEMO_EN_MOVED,
    NEMO_EN_OTHER,
    PLUS_SETS,
    SETS,
    TN_DIR,
    canon_en,
    canon_for,
    canon_mixed,
    conventions_en,
    load_cases,
    main,
    ours,
    score,
    wetext_alone,
)

THRESHOLDS = {"nemo": 0.94, "paddlespeech": 0.95, "heldout": 0.96, "heldout-2": 0.96, "heldout-3": 0.94,
              "codes": 0.95, "rooms": 0.95}
# Issue 25, acceptance 2; nemo-en with its documented conventions; nemo-en-other and nemo-en-audio are reported.
EN_THRESHOLDS = {"nemo-en": 0.96, "heldout-en": 0.95, "mixed": 0.95}
MIN_CASES = {"nemo": 300, "paddlespeech": 100, "wetext": 100, "heldout": 160, "heldout-2": 50, "heldout-3": 15,
             "nemo-en": 380, "nemo-en-other": 120, "nemo-en-audio": 55, "heldout-en": 110, "mixed": 55, "codes": 70,
             "rooms": 50}
ENGLISH_SOURCES = ("crusoe", "moby-dick", "georgia", "childrens-lit", "epub30-spec", "abogen", "squad2")
_HAN = re.compile("[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def cases():
    return {name: load_cases(name) for name in SETS}


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_rate_at_least_threshold(cases, name):
    """codes and paddlespeech at their rate with the silent plus they were written with (PLUS_SETS: we read it 加)."""
    assert len(cases[name]) >= MIN_CASES[name]
    rate, misses = score(ours, cases[name], name, conventions=name in PLUS_SETS)
    assert rate >= THRESHOLDS[name], "\n".join(map(str, misses))


def test_the_plus_convention_forgives_only_the_plus(cases):
    """Raw, the cases with a `+` before a country code miss (we read it 加); with the convention exactly those come
    back, and a 加 that is the text's own (`123加456`) is still compared."""
    forgiven = {}
    for name in PLUS_SETS:
        _, raw_misses = score(ours, cases[name], name)
        _, conv_misses = score(ours, cases[name], name, conventions=True)
        forgiven[name] = {m[0] for m in raw_misses} - {m[0] for m in conv_misses}
        assert {m[0] for m in conv_misses} <= {m[0] for m in raw_misses}
        assert all("+" in m[1] and "加" in m[3] for m in raw_misses if m[0] in forgiven[name]), forgiven
    assert len(forgiven["codes"]) >= 5
    assert score(ours, [("123加456", "一百二十三四百五十六", "x:1")], "paddlespeech", conventions=True)[0] == 0.0


@pytest.mark.parametrize("name", sorted(EN_THRESHOLDS))
def test_english_and_mixed_rate_at_least_threshold(cases, name):
    assert len(cases[name]) >= MIN_CASES[name]
    rate, misses = score(partial(ours, lang=SETS[name].lang), cases[name], name, conventions=True)
    assert rate >= EN_THRESHOLDS[name], "\n".join(map(str, misses))


def test_no_regression_against_wetext_alone(cases):
    ours_rate, ours_misses = score(ours, cases["wetext"])
    base_rate, _ = score(wetext_alone, cases["wetext"])
    assert len(cases["wetext"]) >= MIN_CASES["wetext"]
    assert ours_rate >= base_rate, "\n".join(map(str, ours_misses))


@pytest.mark.parametrize("name, file", [("heldout", "cases.tsv"), ("heldout-2", "cases-2.tsv"),
                                        ("heldout-3", "cases-3.tsv")])
def test_heldout_cases_name_their_source(cases, name, file):
    assert len(cases[name]) >= MIN_CASES[name]
    for inp, exp, origin in cases[name]:
        assert origin.startswith(f"{file}:"), origin                 # each batch is its own file's, only
        assert inp and exp and not any(c.isdigit() for c in exp), origin
        assert origin.split()[1].split(":")[0] in ("cmrc2018", "drcd", "news"), origin


def test_the_held_out_batch_is_scored_on_its_own_line(cases, capsys):
    """`python -m benchmarks.tn_score` prints cases-2.tsv's rate alone, marked held out, with its own counts."""
    assert HELD_OUT[:2] == ("heldout-2", "heldout-3") and "heldout" not in HELD_OUT
    assert main(["--set", "heldout", "--set", "heldout-2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rate, misses = score(ours, cases["heldout-2"])
    n = len(cases["heldout-2"])
    assert [line for line in lines if line.startswith("heldout-2 ")] == [
        f"{'heldout-2':13s} ours {rate:6.1%} ({n - len(misses)}/{n})   held out"]
    assert next(line for line in lines if line.startswith("heldout ")).endswith(f"/{len(cases['heldout'])})")


def test_scoring_is_not_trivially_true():
    fake = [("1", "一", "x:1"), ("2", "三", "x:2")]
    rate, misses = score(ours, fake)
    assert rate == 0.5 and misses[0][1] == "2"


# ---- English and mixed-language sets (issue 25) -----------------------------------------------------------
@pytest.mark.parametrize("name", ["nemo-en", "nemo-en-other", "nemo-en-audio", "heldout-en", "mixed"])
def test_new_sets_load_with_their_language(cases, name):
    assert len(cases[name]) >= MIN_CASES[name]
    assert SETS[name].lang == ("zh" if name == "mixed" else "en")
    assert all(isinstance(inp, str) and isinstance(exp, tuple if name == "nemo-en-audio" else str)
               for inp, exp, _ in cases[name])
    assert sum(not exp for _, exp, _ in cases[name]) <= 2          # NeMo's `~` and ` ~ ` (nothing to read)


def test_nemo_en_files_are_each_scored_once():
    """Every vendored NeMo English file is in exactly one of nemo-en, nemo-en-other, nemo-en-audio."""
    files = sorted(p.name for p in (TN_DIR / "nemo-en").glob("test_cases_*.txt"))
    origins = {name: {origin.split()[0] for _, _, origin in load_cases(name)}
               for name in ("nemo-en", "nemo-en-other", "nemo-en-audio")}
    moved = set(NEMO_EN_MOVED)
    by_set = {name: {o.split(":")[0] for o in found - moved} for name, found in origins.items()}
    assert len(files) == 21
    assert sorted(f for names in by_set.values() for f in names) == files
    assert by_set["nemo-en-other"] == {f"test_cases_{n}.txt" for n in NEMO_EN_OTHER}
    assert by_set["nemo-en-audio"] == {NEMO_EN_AUDIO}
    assert moved <= origins["nemo-en-other"] and not moved & origins["nemo-en"]      # moved cases: one set only


def test_conventions_are_the_documented_equivalences_only():
    """NeMo's readings and ours, equal with the conventions (both sides), never without; other words still count."""
    pairs = [("one hundred and twenty three thousand", "one hundred twenty three thousand"),
             ("twenty dollars and fifty cents", "twenty dollars fifty cents"),
             ("from two to ten", "from two - ten"), ("two by eight", "two x eight"),
             ("Sam the second", "Sam second"), ("C S Lewis", "CS Lewis")]
    for ours_reading, nemo_reading in pairs:
        assert canon_en(ours_reading) != canon_en(nemo_reading)
        assert conventions_en(ours_reading) == conventions_en(nemo_reading)
    assert conventions_en("two and five") != conventions_en("two five")          # "and" only after a scale/money
    assert conventions_en("twenty dollars and fifty cents") != conventions_en("twenty dollars sixty cents")
    assert conventions_en("ten PM EST") == conventions_en("ten p.m e.s.t")     # abbreviations are no initials
    cases = [("$20.50", "twenty dollars fifty cents", "x:1")]
    assert score(lambda t: "twenty dollars and fifty cents", cases, "nemo-en")[0] == 0.0
    assert score(lambda t: "twenty dollars and fifty cents", cases, "nemo-en", conventions=True)[0] == 1.0
    assert score(lambda t: "twenty dollars and fifty cents", cases, "heldout-en", conventions=True)[0] == 0.0


def test_nemo_en_audio_cases_carry_every_accepted_reading(cases):
    by_input = {inp: exp for inp, exp, _ in cases["nemo-en-audio"]}
    assert by_input["123"] == ("one two three", "one twenty three", "one hundred twenty three",
                               "one hundred and twenty three")
    assert "~1/24" in by_input                                   # `~~1/24`: only the first ~ opens the case
    assert all(isinstance(exp, tuple) and all(exp) for exp in by_input.values())


def test_nemo_en_keeps_a_case_that_starts_with_a_hash(cases):
    assert ("#mytext#", "hash mytext hash") in {(i, e) for i, e, _ in cases["nemo-en-other"]}


@pytest.mark.parametrize("name, file, sources", [("heldout-en", "cases.tsv", ENGLISH_SOURCES),
                                                 ("mixed", "cases.tsv", ("cmrc2018", "news"))])
def test_new_held_out_sets_name_their_source(cases, name, file, sources):
    for inp, exp, origin in cases[name]:
        assert origin.startswith(f"{file}:") and len(origin.split()) == 2, origin
        assert inp and exp and not any(c.isdigit() for c in exp), origin
        assert origin.split()[1].split(":")[0] in sources, origin
        if name == "mixed":
            assert _HAN.search(inp) and re.search("[A-Za-z]", inp), origin
        else:
            assert not _HAN.search(inp + exp), origin


def test_mixed_sentences_are_not_lines_of_the_chinese_held_out_set(cases):
    chinese = {inp for name in ("heldout", "heldout-2") for inp, _, _ in cases[name]}
    assert not chinese & {inp for inp, _, _ in cases["mixed"]}


def test_english_canonicalization_ignores_spelling_not_words():
    same = [("thirty-two", "thirty two"), ("Twenty Five", "twenty five"), ("five p.m.", "five PM."),
            ("one ,two", "one, two"), ("six metres", "six meters"), ("the 'nineties", "the nineties"),
            ("sixty per cent", "sixty percent"), ("missus", "misses"), ("“ok.”", '"ok."'), ("U.S.A.", "USA")]
    for a, b in same:
        assert canon_en(a) == canon_en(b), (a, b)
    differ = [("sixteen thirty-two", "one thousand six hundred thirty two"),
              ("nineteen oh five", "nineteen zero five"), ("ten thirty", "ten, thirty"),
              ("one hundred and one", "one hundred one"), ("CHAPTER IV.", "CHAPTER four."), ("isn't", "is not")]
    for a, b in differ:
        assert canon_en(a) != canon_en(b), (a, b)


def test_mixed_canonicalization_ignores_spaces_at_han_and_case():
    assert canon_mixed("CCTV 一") == canon_mixed("CCTV一")
    assert canon_mixed("iPhone fifteen Pro发布") == canon_mixed("iphone fifteen pro 发布")
    assert canon_mixed("W-CDMA") == canon_mixed("W CDMA")
    assert canon_mixed("三，MCPD") != canon_mixed("三MCPD")
    assert canon_mixed("第二位") != canon_mixed("第两位")
    assert canon_for("mixed") is canon_mixed and canon_for("heldout-en") is canon_en


def test_english_output_with_han_or_full_width_marks_misses():
    cases = [("1, 2", "one, two", "x:1")]
    assert score(lambda t: "one, two", cases, "heldout-en")[0] == 1.0
    assert score(lambda t: "one，two", cases, "heldout-en")[0] == 0.0      # same words, a Chinese comma
    assert score(lambda t: "一, two", cases, "heldout-en")[0] == 0.0


def test_any_accepted_reading_matches():
    cases = [("$1.01", ("one dollar and one cent", "one dollar one cent"), "x:1")]
    assert score(lambda t: "one dollar one cent", cases, "nemo-en-audio")[0] == 1.0
    assert score(lambda t: "one dollar", cases, "nemo-en-audio")[0] == 0.0


def test_english_baseline_is_wetext_english():
    assert wetext_alone("I was born in 1632.", lang="en") != wetext_alone("I was born in 1632.")
    assert "1632" not in wetext_alone("I was born in 1632.", lang="en")
    assert wetext_alone("", lang="en") == "" and wetext_alone(" ", lang="en") == " "


def test_new_sets_print_their_own_marked_lines(cases, capsys):
    assert main(["--set", "heldout-en", "--set", "mixed"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert len(lines) == 2 and "conventions" not in lines[0]
    for line, name in zip(lines, ("heldout-en", "mixed")):
        rate, misses = score(partial(ours, lang=SETS[name].lang), cases[name], name)
        n = len(cases[name])
        assert line == f"{name:13s} ours {rate:6.1%} ({n - len(misses)}/{n})   held out"


def test_nemo_en_line_prints_the_raw_and_the_convention_rate(cases, capsys):
    assert main(["--set", "nemo-en"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    n = len(cases["nemo-en"])
    raw = score(partial(ours, lang="en"), cases["nemo-en"], "nemo-en")[0]
    conv = score(partial(ours, lang="en"), cases["nemo-en"], "nemo-en", conventions=True)[0]
    assert raw < conv
    assert line.startswith(f"{'nemo-en':13s} ours {raw:6.1%} (") and f" with conventions {conv:6.1%} (" in line
    assert line.endswith(f"/{n})")


def test_codes_lines_name_their_source_and_hold_a_code(cases):
    """The codes set: real sentences, each naming its page, each holding digits; readings without digits."""
    assert len(cases["codes"]) >= MIN_CASES["codes"]
    for inp, exp, origin in cases["codes"]:
        assert origin.startswith("cases.tsv:") and origin.split()[1].split(":")[0] in ("web", "github"), origin
        assert any(c.isdigit() for c in inp) and not any(c.isdigit() for c in exp), origin
