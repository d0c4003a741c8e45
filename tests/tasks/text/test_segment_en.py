"""segment_chapter in English (SegmentOptions.lang="en"): packing by words at the English rate, the 20 s and
50-word caps, over-long sentences split at clause marks then at spaces, short fragments merged, the audit."""
from __future__ import annotations

import re
from itertools import pairwise

import pytest

from engine.units import estimate_seconds
from tasks.book import Book, BookMeta, Chapter
from tasks.text.coverage import audit_chapter
from tasks.text.normalize import NormalizeOptions, iter_spans
from tasks.text.segment import OVER_CAP_NOTE, SegmentOptions, book_options, segment_chapter, words

EN = SegmentOptions(normalize=NormalizeOptions(lang="en"))
ENDS = ".!?。！？"           # until helper entn's English punctuation lands, the normalizer still writes 。 and ，
# Robinson Crusoe, chapter I (public domain): two sentences, 68 and 41 words.
CRUSOE = ("I had two elder brothers, one of whom was lieutenant-colonel to an English regiment of foot in Flanders, "
          "formerly commanded by the famous Colonel Lockhart, and was killed at the battle near Dunkirk against the "
          "Spaniards. What became of my second brother I never knew, any more than my father or mother knew what "
          "became of me. ")
RUN_ON = " ".join(["and the sea ran high and the ship drove on"] * 12) + "."   # 120 words, no clause mark


def _chapter(*paras: str, title: str = "CHAPTER I. START IN LIFE") -> Chapter:
    return Chapter(index=0, title=title, paragraphs=tuple(paras))


def _body(segs):
    return segs[1:]                                       # the title is the first segment


def test_english_packed_by_words_never_over_the_caps():
    segs = segment_chapter(_chapter(CRUSOE * 6), opts=EN)
    body = _body(segs)
    assert len(body) >= 4
    for s in body:
        assert words(s.text) <= EN.max_words and estimate_seconds(s.text) <= EN.max_seconds
        assert words(s.text) >= EN.min_words
        assert s.text[-1] in ENDS or s.pause_after == "clause"
    # packing by seconds: all but the last reach the target or could not take the next sentence
    for s, nxt in pairwise(body):
        assert estimate_seconds(s.text) >= EN.target_seconds or not (
            words(s.text + " " + nxt.text) <= EN.max_words and estimate_seconds(s.text + nxt.text) <= EN.max_seconds)
    assert "".join(s.source_text for s in body) == CRUSOE * 6
    assert audit_chapter(_chapter(CRUSOE * 6), segs, opts=EN).ok


def test_more_words_fit_than_the_chinese_character_cap_would_allow():
    """English is capped in words: a 40-word sentence (over 150 characters) stays one segment."""
    sentence = CRUSOE.split(". ")[0] + "."              # 41 words, 240 characters
    assert len(sentence) > SegmentOptions().max_chars
    (seg,) = _body(segment_chapter(_chapter(sentence), opts=EN))
    assert seg.source_text == sentence and words(seg.text) == words(sentence)


def test_a_run_on_sentence_is_split_between_words():
    segs = segment_chapter(_chapter(RUN_ON), opts=EN)
    body = _body(segs)
    assert len(body) >= 3
    vocabulary = set(RUN_ON.rstrip(".").split())
    for s in body:
        assert words(s.text) <= EN.max_words and estimate_seconds(s.text) <= EN.max_seconds
        assert set(s.text.rstrip(ENDS).split()) <= vocabulary, s.text     # never inside a word
    assert " ".join(s.text.rstrip(ENDS) for s in body).split() == RUN_ON.rstrip(".").split()
    assert audit_chapter(_chapter(RUN_ON), segs, opts=EN).ok


def test_a_long_sentence_is_split_at_its_clause_marks_first():
    clauses = ", ".join(["the wind blew hard from the north east all that night"] * 8) + "."   # 88 words
    body = _body(segment_chapter(_chapter(clauses), opts=EN))
    assert len(body) >= 2
    for s in body[:-1]:
        assert s.source_text.rstrip().endswith(","), s.source_text             # cut after a clause mark
        assert s.pause_after == "clause"


def test_never_inside_a_number_reading():
    """A number's reading is one span: a cut between words never falls inside it (today's normalizer reads the
    whole run of numbers as one Chinese window, over the cap: entn's English spans make each number its own)."""
    text = " ".join(f"and in the year {1600 + i} we sailed {i + 2} leagues" for i in range(12)) + "."
    readings = [s.out for s in iter_spans(text, EN.normalize) if s.kind == "tn"]
    assert readings and all(words(r) <= EN.max_words for r in readings)
    segs = _body(segment_chapter(_chapter(text), opts=EN))
    assert len(segs) >= 2
    for r in readings:
        assert any(r in s.text for s in segs), r


def test_english_segments_read_the_english_way():
    segs = _body(segment_chapter(_chapter("In the year 1632, Mr. Crusoe waited 3 hours.", CRUSOE), opts=EN))
    text = " ".join(s.text for s in segs)
    assert not re.search(r"[\u3400-\u9fff。，！？]", text), text
    assert "Mr. Crusoe" in text or "mister crusoe" in text.lower()
    assert all(s.text[-1] in ".!?" for s in segs)


def test_short_english_fragments_are_merged():
    segs = _body(segment_chapter(_chapter("Yes.", "No, sir.", CRUSOE), opts=EN))
    assert all(words(s.text) >= EN.min_words for s in segs)
    assert segs[0].source_text.startswith("Yes.\nNo, sir.")
    assert re.match(r"Yes[.。] No[,，] ?sir[.。] I had", segs[0].text), segs[0].text   # a space between paragraphs


def test_english_options_validate():
    with pytest.raises(ValueError, match="min_words"):
        SegmentOptions(min_words=60, normalize=EN.normalize)
    with pytest.raises(ValueError, match="lang"):
        NormalizeOptions(lang="fr")


def _book(text: str, language: str) -> Book:
    return Book(BookMeta(title="t", language=language), (Chapter(0, "", (text,)),))


@pytest.mark.parametrize("text, declared, requested, lang", [
    (CRUSOE, "en", "auto", "en"),
    (CRUSOE, "", "auto", "en"),                 # no tag: the text decides
    ("士隱於書房閒坐，至手倦拋書。" * 20, "en", "auto", "zh"),   # a Chinese book mis-tagged en
    (CRUSOE, "en", "zh", "zh"),                 # asked for: as asked
])
def test_book_options_resolve_the_reading_language(text, declared, requested, lang):
    assert book_options(_book(text, declared), SegmentOptions(), requested).lang == lang


def test_book_options_refuse_a_bad_language():
    with pytest.raises(ValueError, match="auto, zh, en"):
        book_options(_book(CRUSOE, "en"), SegmentOptions(), "fr")


def test_chinese_segmentation_is_unchanged_by_the_english_rules():
    """lang="zh" (the default) still caps characters: a 200-character Chinese paragraph is cut at 150."""
    para = "士隱於書房閒坐，至手倦拋書，伏几少憩，不覺朦朧睡去" * 8 + "。"
    segs = _body(segment_chapter(_chapter(para, title="第一回"), opts=SegmentOptions()))
    assert all(len(s.text) <= SegmentOptions().max_chars for s in segs)
    assert all(not re.search(r"[.] ", s.text) for s in segs)


# A web address is one span per piece (`www`, `dot`, `w3` ...), and a piece read alone outside its address reads
# differently: the EPUB 3 spec's sentences (idpf-epub3-samples/epub30-spec.epub) were cut inside one.
URL = "http://www.w3.org/TR/SVG11/feature#AnimationEventsAttribute"


def test_a_web_address_is_never_cut_inside():
    """The word cap falls inside the address: the cut moves before it, and the audit (each segment read alone)
    passes."""
    lead = " ".join(["the reading system shall support the features of"] * 5)   # 40 words
    text = f"{lead} {URL} and of the other modules that it names in turn."
    every = segment_chapter(_chapter(text), opts=EN)
    segs = _body(every)
    assert len(segs) >= 2
    assert any(URL in s.source_text for s in segs), [s.source_text for s in segs]
    for s in segs:
        assert words(s.text) <= EN.max_words and estimate_seconds(s.text) <= EN.max_seconds
    assert audit_chapter(_chapter(text), every, opts=EN).ok


def test_a_reading_over_the_caps_is_one_segment_noted_never_cut():
    """An address whose reading is over 50 words and has no cut that both sides read alone: one segment over the
    caps, noted (tasks.text.segment.OVER_CAP_NOTE), its neighbours as usual; nothing else goes over."""
    url = "http://www.example.org/" + "/".join(f"section{i}/part{i}" for i in range(1, 16)) + "/index.html"
    text = f"The rules are printed in full at {url} for everyone who wants to read them all."
    every = segment_chapter(_chapter(text), opts=EN)
    segs = _body(every)
    (over,) = [s for s in segs if words(s.text) > EN.max_words]
    assert url in over.source_text and over.notes == (OVER_CAP_NOTE,)
    assert all(not s.notes for s in segs if s is not over)
    assert audit_chapter(_chapter(text), every, opts=EN).ok


def test_a_long_word_is_cut_only_where_both_halves_read_alone():
    """A hyphenated run longer than the caps (its pieces touch) is cut between pieces that read the same alone."""
    text = "A" + "-b" * 80 + " went on."
    every = segment_chapter(_chapter(text), opts=EN)
    segs = _body(every)
    assert len(segs) >= 2 and all(words(s.text) <= EN.max_words for s in segs)
    assert audit_chapter(_chapter(text), every, opts=EN).ok


def test_a_segment_over_paragraphs_is_audited_paragraph_by_paragraph():
    """`I.` opening a paragraph is a heading numeral (one), inside a sentence the pronoun: the audit reads a
    segment that joins short paragraphs one paragraph at a time, as the segmenter does (georgia-cfi's governors)."""
    ch = _chapter("In 1891 the Populist party was organized.", "List of Governors",
                  "I. Administration of the Trustees.", "James Edward Oglethorpe", "1732-1743",
                  "II. Royal Administration.")
    every = segment_chapter(ch, opts=EN)
    segs = _body(every)
    assert any("\n" in s.source_text and "I. Administration" in s.source_text for s in segs)
    assert "one. Administration" in " ".join(s.text for s in segs)
    rep = audit_chapter(ch, every, opts=EN)
    assert rep.ok, rep.unexplained
