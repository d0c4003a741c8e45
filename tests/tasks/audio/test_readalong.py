"""Read-along text (tasks.audio.readalong): segments found in the chapter's original text, paragraphs laid out
as runs that tile it exactly, the fallback when the text record is missing or stale."""
from __future__ import annotations

import pytest

from tasks.audio.readalong import Block, Run, TextMismatch, align, blocks, read_along, units_from_segments
from tasks.audio.subtitles import TimedText
from tasks.book import Chapter
from tasks.text.segment import chapter_units, segment_chapter
from tests.conftest import corpus_path

# Short dialogue paragraphs are merged into a neighbour by the segmenter; "＊＊＊" is spoken by no segment.
CHAPTER = Chapter(0, "第一回　山中", ("「是。」",
                                 "「好。」他说完就走了，留下我一个人站在门口，看着远方的山和树，心里想了很多事情。",
                                 "＊＊＊", "第3回说到2024年的事，天地玄黄，宇宙洪荒。", "「嗯。」"))


def _cues(texts):
    return [TimedText(1000 * i, 1000 * i + 900, t) for i, t in enumerate(texts)]


def _block_text(b: Block) -> str:
    return "".join(r.text for r in b.runs)


def test_real_segments_tile_the_original_text():
    """The segmenter's own output on a chapter with merged paragraphs, a silent paragraph and text the
    normalizer rewrites (3 -> 三): the blocks hold the original text exactly, each segment in one run."""
    segs = segment_chapter(CHAPTER)
    units = chapter_units(CHAPTER)
    texts = [s.source_text for s in segs]
    assert any("\n" in t for t in texts)                   # the case this module exists for
    bl = blocks(units, align(units, texts), has_title=True)
    assert "\n".join(_block_text(b) for b in bl) == "\n".join(units)
    spoken = [r for b in bl for r in b.runs if r.segment is not None]
    assert [r.segment for r in spoken] == list(range(len(segs)))
    assert [r.text for r in spoken] == texts
    assert [r.text for b in bl for r in b.runs if r.segment is None] == ["＊＊＊"]
    assert [b.title for b in bl] == [True, False, False, False]
    assert "第3回说到2024年" in _block_text(bl[3])              # the original, not the reading (三, 二零二四)


def test_a_segment_inside_a_paragraph_and_one_across_two():
    units = ["题", "甲乙丙丁", "戊", "己庚"]
    spans = align(units, ["题", "甲乙", "丙丁\n戊", "己庚"])
    assert spans == [(0, 1), (2, 4), (4, 8), (9, 11)]          # in "题\n甲乙丙丁\n戊\n己庚"
    assert blocks(units, spans, has_title=False) == [
        Block(False, (Run("题", 0),)),
        Block(False, (Run("甲乙", 1), Run("丙丁\n戊", 2))),
        Block(False, (Run("己庚", 3),))]


def test_repeated_text_is_found_in_order():
    units = ["好。好。", "好。"]
    assert align(units, ["好。", "好。", "好。"]) == [(0, 2), (2, 4), (5, 7)]
    with pytest.raises(TextMismatch, match="segment 3"):
        align(units, ["好。", "好。", "好。", "好。"])
    with pytest.raises(TextMismatch, match="segment 0"):
        align(["甲乙"], ["乙甲"])


def test_units_from_segments_follow_the_paragraph_pauses():
    texts = ["题", "甲乙", "丙丁\n戊", "己庚"]
    assert units_from_segments(texts, ["paragraph", "sentence", "paragraph", "chapter"]) == ["题", "甲乙丙丁", "戊",
                                                                                             "己庚"]
    assert units_from_segments(texts) == ["题", "甲乙", "丙丁", "戊", "己庚"]


def test_read_along_falls_back_to_the_segments_text():
    units = chapter_units(CHAPTER)
    texts = [s.source_text for s in segment_chapter(CHAPTER)]
    good = read_along(CHAPTER.title, units, _cues(texts))
    assert good.units == tuple(units) and "＊＊＊" in good.units
    for stale in (None, ["another text entirely"]):
        r = read_along(CHAPTER.title, stale, _cues(texts))
        assert "＊＊＊" not in r.units and "\n".join(r.units).replace("\n", "") == "".join(texts).replace("\n", "")
        assert r.units[0] == CHAPTER.title and r.blocks()[0].title
        assert [x.text for b in r.blocks() for x in b.runs if x.segment is not None] == texts


def test_corpus_chapters_tile_exactly():
    """Every chapter of 恨海 (TXT) and the 山海經 EPUB: the segments are found in order and the runs rebuild the
    chapter's text character for character."""
    from tasks.ingest import load_book

    for parts in (("txt", "gutenberg-zh", "23865-0.txt"), ("epub", "gutenberg", "pg25288-shanhaijing-zh.epub")):
        book = load_book(corpus_path(*parts))
        for ch in book.chapters[:3]:
            units = chapter_units(ch)
            texts = [s.source_text for s in segment_chapter(ch)]
            bl = blocks(units, align(units, texts), has_title=bool(ch.title.strip()))
            assert "\n".join(_block_text(b) for b in bl) == "\n".join(units)
            assert [r.text for b in bl for r in b.runs if r.segment is not None] == texts
