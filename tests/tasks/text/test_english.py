"""English TN (tasks/text/english.py through normalize, lang="en"): readings written from the rules of English, the
issue's table, sentence boundaries that survive abbreviations and decimals, spans that tile the source."""
from __future__ import annotations

import pytest

from tasks.text import english
from tasks.text.normalize import CLAUSE, SENTENCE, NormalizeOptions, normalize, normalize_with_map, removals

EN = NormalizeOptions(lang="en")


def en(text: str) -> str:
    return normalize(text, EN)


def _alphabet_ok(s: str) -> bool:
    """The English output alphabet: ASCII letters, single spaces, `,` and `.`."""
    return all((c.isascii() and c.isalpha()) or c in " ,." for c in s) and "  " not in s


# The issue's table: what ChatTTS must be given for each sentence.
@pytest.mark.parametrize("src, out", [
    ("I was born in the year 1632, in the city of York.",
     "I was born in the year sixteen thirty two, in the city of York."),
    ("He paid $3.50 for 2 apples on 5/12/2023.",
     "He paid three dollars and fifty cents for two apples on may twelfth twenty twenty three."),
    ('Dr. Smith said: "It is 10:30 now."', "doctor Smith said, It is ten thirty now."),
    ("They sold 40 horses and 6 sheep in 1719.", "They sold forty horses and six sheep in seventeen nineteen."),
    ("Mr. Crusoe waited 3 hours for 2 men.", "mister Crusoe waited three hours for two men."),
])
def test_issue_table(src, out):
    assert en(src) == out


@pytest.mark.parametrize("src, words", [
    ("$3.50", "three dollars and fifty cents"),
    ("$1", "one dollar"),
    ("$0.02", "two cents"),
    ("£5", "five pounds"),
    ("£1,250", "one thousand two hundred and fifty pounds"),
    ("5s. 6d.", "five shillings and six pence"),             # old British money (18th-19th c. novels)
    ("£5 5s. 6d.", "five pounds five shillings and six pence"),
    ("1s.", "one shilling"),
    ("$2.5 million", "two point five million dollars"),
    ("1632", "sixteen thirty two"),
    ("1719", "seventeen nineteen"),
    ("1605", "sixteen oh five"),
    ("1900", "nineteen hundred"),
    ("2005", "two thousand five"),
    ("1066", "ten sixty six"),
    ("1990s", "nineteen nineties"),
    ("5/12/2023", "may twelfth twenty twenty three"),        # month first; day first when it cannot be a month:
    ("25/12/2023", "the twenty fifth of december twenty twenty three"),
    ("March 3, 1850", "March third, eighteen fifty"),
    ("10:30", "ten thirty"),
    ("1st", "first"),
    ("22nd", "twenty second"),
    ("2ndly", "secondly"),
    ("3.14", "three point one four"),
    ("-7", "minus seven"),
    ("45%", "forty five percent"),
    ("1,000,000", "one million"),
    ("5057", "five thousand and fifty seven"),
    ("40 horses", "forty horses"),
    ("12 kg", "twelve kilograms"),
    ("1914-1918", "nineteen fourteen to nineteen eighteen"),
    ("32 °C", "thirty two degrees Celsius"),
])
def test_number_classes(src, words):
    assert en(src) == words


@pytest.mark.parametrize("src, out", [
    ("Mr. Dr. St. Paul", "mister doctor saint Paul"),
    ("apples, e.g. pears, i.e. fruit, etc.", "apples, for example pears, that is fruit, et cetera."),
    ("No. 5 and p. 12", "number five and page twelve"),
    ("CHAPTER IV.", "CHAPTER four."),                     # all caps is a word, not spelled
    ("IV.", "four."),                                     # a heading alone
    ("Chapter I", "Chapter one"),
    ("Book III, Part II", "Book three, Part two"),
    ("Charles II was king.", "Charles the second was king."),
    ("So I went, and I saw.", "So I went, and I saw."),   # the pronoun I is not a numeral
    ("J. M. Barrie", "J M Barrie"),
    ("the U.S.A. team", "the USA team"),
    ("he lived on Baker St.", "he lived on Baker street."),
    ("at St. Paul's and Cape St. Augustino", "at saint Pauls and Cape saint Augustino"),
])
def test_abbreviations_and_roman_numerals(src, out):
    assert en(src) == out


# NeMo's English cases that were real errors (issue 25), each written as a general rule; the readings come from
# the rules of English (and NeMo's file where it agrees), not from our output.
@pytest.mark.parametrize("src, out", [
    ("2788 San Tomas Expy, Santa Clara, CA 95051",
     "twenty seven eighty eight San Tomas Expressway, Santa Clara, California nine five zero five one"),
    ("708 N 1st St, San City", "seven zero eight North first Street, San City"),
    ("12 S 1st st", "twelve South first Street"),
    ("Nancy lived at 1428 Elm St. It was a strange place.",
     "Nancy lived at fourteen twenty eight Elm Street. It was a strange place."),
    ("He lived on Elm St. It was small.", "He lived on Elm Street. It was small."),   # no number: the opener
    ("at St. Paul", "at saint Paul"),                                                 # still a saint
    ("124,444,234,854,823,834,553", "one hundred and twenty four quintillion four hundred and forty four "
     "quadrillion two hundred and thirty four trillion eight hundred and fifty four billion eight hundred and "
     "twenty three million eight hundred and thirty four thousand five hundred and fifty three"),
    ("41.00 km³", "forty one point zero zero cubic kilometers"),
    ("5 m²", "five square meters"),
    ("12kg/kg", "twelve kilograms per kilogram"),
    ("3 cc/s", "three CC per second"),
    ("1/4th", "one quarter"),
    ("2/4th", "two quarters"),
    ("a 401(k) plan", "a four oh one k plan"),
    ("1:59 p.m.est", "one fifty nine PM EST"),
    ("growth in 2Q22", "growth in the second quarter of twenty two"),
    ("1980 s", "nineteen eighties"),
    ("45º", "forty five degrees"),
    ("1234-123kg", "one thousand two hundred and thirty four to one hundred and twenty three kilograms"),
    ("1914-1918", "nineteen fourteen to nineteen eighteen"),                          # years stay years
    ("123,000012", "one hundred and twenty three, zero zero zero zero one two"),
    ("$ and 5% or %", "dollar and five percent or percent"),
    ("/$€#%AA", "slash dollar euro hash percent AA"),
    ("and/or", "and, or"),                                                            # a slash between words
    ("#1 seed", "number one seed"),
    ("test .b@gmail.com", "test. b at gmail dot com"),
])
def test_nemo_real_errors(src, out):
    assert en(src) == out


# Where a reading meets a letter, a digit or another reading, one space between them: never two words glued
# (ChatTTS would read `dollarstwelve` as one nonsense word).  NeMo's serial and tag cases (nemo-en-other).
@pytest.mark.parametrize("src, out", [
    ("$12@12%", "twelve dollars twelve percent"),
    ("<pitch=-.3>123 123</pitch>",
     "pitch equals minus point three one hundred and twenty three one hundred and twenty three"),
    ("t-0t25d12-f", "t zero t twenty five d twelve f"),
    ("B2A23C", "B two A twenty three C"),
    ("25d08A", "twenty five d oh eight A"),
    ("CSS3 and HTML5", "CSS three and HTML five"),
    ("Dr.Smith", "doctor Smith"),
    # One source word stays one word: the reading that took the next word's capital, an apostrophe before letters.
    ("St. Paul and J. M. Barrie", "saint Paul and J M Barrie"),
    ("the 12's", "the twelves"),
])
def test_readings_are_never_glued(src, out):
    assert en(src) == out


@pytest.mark.parametrize("src", ["$12@12%", "<pitch=-.3>123?123</pitch>", "t-0t25d12-f", "B2A23C", "25d08A",
                                 "a-1.b3_c&-d@gma4i-l.com", "x=5+3y", "No.5A", "1st2nd", "$5#7", "4kg|5kg"])
def test_every_reading_is_whole_words_of_the_output(src):
    """Each reading's words stand as words of the whole output: nothing glued on either side."""
    whole, spans = normalize_with_map(src, EN)
    words = " " + " ".join(whole.replace(",", " ").replace(".", " ").split()) + " "
    for s in spans:
        reading = " ".join(s.out.replace(",", " ").replace(".", " ").split())
        if s.kind == "tn" and reading:
            assert f" {reading} " in words, (src, s, whole)


# North American telephone numbers: digit by digit in their groups, never cardinals or a range (NeMo's telephone
# cases); ranges, dates and years beside them keep their readings.
@pytest.mark.parametrize("src, out", [
    ("(123) 123-5678", "one two three, one two three, five six seven eight"),
    ("(123)-123-5678", "one two three, one two three, five six seven eight"),
    ("(555)555-5555", "five five five, five five five, five five five five"),
    ("123-123-5678", "one two three, one two three, five six seven eight"),
    ("+1 123-123-5678", "plus one, one two three, one two three, five six seven eight"),
    ("+1 (123) 123-5678", "plus one, one two three, one two three, five six seven eight"),
    ("1-800-555-0199", "one, eight zero zero, five five five, zero one nine nine"),
    ("call me at +1-123-123-5678.", "call me at plus one, one two three, one two three, five six seven eight."),
    ("Call 1-800-GO-U-HAUL", "Call one, eight hundred GO U HAUL"),
    ("In 1914-1918 (pp. 12-15) on 2006-08-05 it was 3-2.",
     "In nineteen fourteen to nineteen eighteen, pages twelve to fifteen, on august fifth two thousand six it was "
     "three to two."),
    ("(1914) 1914-1918", "nineteen fourteen, nineteen fourteen to nineteen eighteen"),    # no 3-digit area code
])
def test_telephone_numbers(src, out):
    assert en(src) == out


def test_a_symbol_is_read_only_where_it_stands_alone():
    assert "slash" not in en('<item media-type="application/xhtml+xml" />')    # markup: no slash alone
    assert "slash" not in en("see (/META-INF) and he/she")
    assert en('x="#EK"') == "x equals hash EK"                               # a space between the readings
    assert "dollar" not in en("the refund was $-3.25.")                       # money, not a symbol alone


def test_of_overlapping_spans_the_first_wins():
    spans = [(0, 3, "a"), (2, 4, "b"), (3, 5, "c", "more"), (3, 4, "d"), (5, 5, "e"), (5, 6, "f")]
    assert english.first_of_overlapping(spans) == [(0, 3, "a"), (3, 5, "c", "more"), (5, 5, "e"), (5, 6, "f")]
    assert english.first_of_overlapping([]) == []


def test_pairs_en():
    assert [english.pairs_en(s) for s in ("12", "123", "708", "2788", "1211", "700", "07")] == [
        "twelve", "one twenty three", "seven zero eight", "twenty seven eighty eight", "twelve eleven",
        "seven hundred", "zero seven"]
    assert english.pairs_en("401", "oh") == "four oh one"


def test_ascii_marks_and_quotes():
    assert en("“Is it so?” he cried—“No!”") == "Is it so. he cried, No."
    assert en("don't; won't: fine") == "dont, wont, fine"     # ChatTTS's normalizer drops apostrophes too


def _boundaries(src: str) -> list[str]:
    """The source text up to each sentence boundary."""
    _, spans = normalize_with_map(src, EN)
    return [src[:s.end].strip() for s in spans if s.boundary >= SENTENCE]


def test_sentence_boundaries_survive_abbreviations_initials_and_decimals():
    src = "Mr. J. M. Barrie paid $3.50 at St. Paul's, e.g. for tea. Then he left etc. Next day he came."
    assert _boundaries(src) == [
        "Mr. J. M. Barrie paid $3.50 at St. Paul's, e.g. for tea.",
        "Mr. J. M. Barrie paid $3.50 at St. Paul's, e.g. for tea. Then he left etc.",
        src,
    ]


def test_semicolon_is_a_sentence_boundary_and_colon_a_clause():
    src = "one; two: three"
    out, spans = normalize_with_map(src, EN)
    assert out == "one, two, three"
    between = [max(s.boundary for s in spans if a <= s.start < b) for a, b in ((3, 5), (8, 10))]
    assert between == [SENTENCE, CLAUSE]


PARAGRAPH = ("I was born in the year 1632, in the city of York, of a good family, though not of that country, my "
             "father being a foreigner of Bremen, who settled first at Hull. He got a good estate by merchandise, "
             "and leaving off his trade, lived afterwards at York; from whence he had married my mother, whose "
             "relations were named Robinson\u200b — “Mr. Kreutznaer” — and paid £5 5s. 6d. on 5/12/1651.")


def test_spans_tile_an_english_paragraph_and_say_only_the_alphabet():
    out, spans = normalize_with_map(PARAGRAPH, EN)
    pos = 0
    for s in spans:
        assert s.start == pos or s.start == s.end == pos
        pos = s.end
    assert pos == len(PARAGRAPH)
    assert _alphabet_ok(out)
    assert [(r.text, r.reason) for r in removals(spans, PARAGRAPH)] == [("\u200b", "control")]
    assert "sixteen thirty two" in out and "five pounds five shillings and six pence" in out
    assert "mister Kreutznaer" in out


def test_han_run_in_an_english_book_goes_the_chinese_way():
    assert en("The sign said 第2回 and 2024年, then 3 more.") == \
        "The sign said第二回and二零二四年, then three more."


def test_cardinal_ordinal_year_functions():
    assert english.cardinal_en(0) == "zero"
    assert english.cardinal_en(123) == "one hundred and twenty three"
    assert english.cardinal_en(22_680_010) == "twenty two million six hundred and eighty thousand and ten"
    assert english.ordinal_en(275) == "two hundred and seventy fifth"
    assert english.ordinal_en(12) == "twelfth"
    assert english.year_en("2023") == "twenty twenty three"
    assert english.roman_value("XIV") == 14 and english.roman_value("IIII") == 0 and english.roman_value("MIX") == 1009


def _speech(s: str) -> str:
    return "".join(c for c in s if c.isalnum()).lower()


def test_a_cut_between_any_two_spans_reads_the_same():
    """The segmenter may cut between any two spans; the coverage audit reads each segment's source alone, so both
    halves must say what the whole said (a reading may not depend on text outside its span)."""
    src = ("Mr. Crusoe met Charles II and Gen. Grant at St. Paul's on March 3, 1850; J. M. Barrie paid $3.50, "
           "5s. 6d. and No. 5 for CHAPTER IV of Baker St. in 1632, e.g. 40 horses at 5 p.m. etc. Then 3 ft.")
    whole, spans = normalize_with_map(src, EN)
    for cut in sorted({s.end for s in spans if 0 < s.end < len(src)}):
        halves = normalize(src[:cut], EN) + normalize(src[cut:], EN)
        assert _speech(halves) == _speech(whole), (cut, src[:cut][-20:])
