"""segment_chapter: sentence packing, limits, short-fragment merging, pauses, title first, coverage."""
from __future__ import annotations

import json

import pytest

from engine.units import estimate_seconds, speakable_chars
from tasks.book import Chapter
from tasks.text.coverage import audit_chapter
from tasks.text.segment import SegmentOptions, segment_chapter

SENT = "士隱於書房閒坐，至手倦拋書，伏几少憩，不覺朦朧睡去。"   # 24 speakable chars, ~6 s


def _chapter(*paras: str, title: str = "第一回　甄士隱夢幻識通靈") -> Chapter:
    return Chapter(index=3, title=title, paragraphs=tuple(paras))


def test_title_is_first_segment_with_paragraph_pause():
    segs = segment_chapter(_chapter(SENT * 2))
    assert segs[0].text == "第一回，甄士隐梦幻识通灵。"         # a closing 。 ends the intonation
    assert segs[0].pause_after == "paragraph"
    assert segs[0].source_text == "第一回　甄士隱夢幻識通靈"
    assert [s.index for s in segs] == list(range(len(segs)))
    assert all(s.chapter == 3 for s in segs)
    assert segs[-1].pause_after == "chapter"


def test_sentences_packed_up_to_target_never_over_max():
    opts = SegmentOptions()
    segs = segment_chapter(_chapter(SENT * 12), opts=opts)[1:]
    assert len(segs) >= 3
    for s in segs:
        assert estimate_seconds(s.text) <= opts.max_seconds
        assert len(s.text) <= opts.max_chars
    # packing: all but the last reach the target or could not take one more sentence
    for s in segs[:-1]:
        longer = s.text + "士隐于书房闲坐，至手倦抛书，伏几少憩，不觉朦胧睡去。"
        assert estimate_seconds(s.text) >= opts.target_seconds or estimate_seconds(longer) > opts.max_seconds
    assert "".join(s.source_text for s in segs) == SENT * 12


def test_pause_kinds():
    segs = segment_chapter(_chapter(SENT * 6, SENT * 6))[1:]
    kinds = [s.pause_after for s in segs]
    assert kinds[-1] == "chapter"
    assert "paragraph" in kinds and "sentence" in kinds


def test_long_sentence_split_at_clauses_then_words_never_over_cap():
    opts = SegmentOptions(max_chars=40, max_seconds=8, target_seconds=6)
    long_clause = "那僧便念咒書符大展幻術將一塊大石登時變成一塊鮮明瑩潔的美玉且又縮成扇墜大小的可佩可拿"
    segs = segment_chapter(_chapter("甲乙丙丁戊，" * 20 + long_clause + "。"), opts=opts)[1:]
    for s in segs:
        assert len(s.text) <= 40 and estimate_seconds(s.text) <= 8
    assert "".join(s.source_text for s in segs) == "甲乙丙丁戊，" * 20 + long_clause + "。"
    clause_cut = [s for s in segs if s.text.endswith("，")]
    assert clause_cut and all(s.pause_after == "clause" for s in clause_cut)
    # the over-long clause is cut between jieba words, never inside one
    import jieba
    words = list(jieba.cut(normalize_simpl(long_clause), HMM=False))
    bounds = {sum(len(w) for w in words[:i]) for i in range(len(words) + 1)}
    clause_start = len("甲乙丙丁戊，" * 20)
    cuts, pos = [], 0
    for s in segs:
        pos += len(s.source_text)
        if clause_start < pos < clause_start + len(long_clause):
            cuts.append(pos - clause_start)
    assert cuts and all(c in bounds for c in cuts), (cuts, words)


def normalize_simpl(s):
    from tasks.text.normalize import normalize
    return normalize(s)


def test_short_fragments_merged():
    segs = segment_chapter(_chapter("「是。」", SENT, "嗯。", SENT, "好。"))
    body = segs[1:]
    assert all(speakable_chars(s.text) >= 5 for s in body)
    assert body[0].source_text.startswith("「是。」\n")
    assert body[-1].source_text.endswith("\n好。")


def test_title_alone_kept_even_when_short():
    segs = segment_chapter(_chapter(SENT, title="序"))
    assert segs[0].text == "序。" and segs[0].pause_after == "paragraph"


def test_no_title_no_paragraphs():
    assert segment_chapter(Chapter(0, "", ())) == []
    assert segment_chapter(Chapter(0, "", ("……", "□□"))) == []


def test_options_validate():
    with pytest.raises(ValueError, match="target_seconds"):
        SegmentOptions(target_seconds=30, max_seconds=20)
    with pytest.raises(ValueError, match="min_chars"):
        SegmentOptions(min_chars=200)


def test_audit_clean_chapter():
    ch = _chapter("其上多?囗，多【上丞下□】木。" + SENT, "＊＊＊", SENT * 8)
    segs = segment_chapter(ch)
    rep = audit_chapter(ch, segs)
    assert rep.ok, rep.unexplained
    assert rep.coverage == 1.0
    reasons = {r["reason"] for r in rep.removed}
    assert reasons == {"placeholder", "glyph-description"}
    assert rep.silent_outside >= 3                      # the ＊＊＊ line
    stored = json.loads(json.dumps(rep.to_dict(), ensure_ascii=False))     # as plan writes coverage.json
    assert stored["removed"] == rep.removed and stored["ok"] and stored["coverage"] == 1.0


def test_audit_detects_lost_duplicated_and_altered_text():
    ch = _chapter(SENT * 8)
    segs = segment_chapter(ch)
    assert len(segs) >= 3
    lost = segs[:2] + segs[3:]
    lost = [s.__class__(**{**s.__dict__, "index": i}) for i, s in enumerate(lost)]
    assert any("no segment" in u["problem"] for u in audit_chapter(ch, lost).unexplained)
    dup = segs[:3] + segs[2:]
    dup = [s.__class__(**{**s.__dict__, "index": i}) for i, s in enumerate(dup)]
    assert not audit_chapter(ch, dup).ok
    altered = list(segs)
    altered[2] = altered[2].__class__(**{**altered[2].__dict__, "text": altered[2].text[1:]})
    assert any("does not match" in u["problem"] for u in audit_chapter(ch, altered).unexplained)


def test_audit_locates_entries_by_paragraph():
    ch = _chapter(SENT, "甲乙丙丁戊己□庚辛壬。")
    rep = audit_chapter(ch, segment_chapter(ch))
    assert rep.removed == [{"pos": len(ch.title) + 1 + len(SENT) + 1 + 6, "text": "□", "reason": "placeholder",
                            "para": 1, "offset": 6}]


def test_short_tail_sentence_joins_previous_segment():
    tail = "中涓自此愈橫。"                                   # 6 chars, ~1.6 s: under min_seconds
    segs = segment_chapter(_chapter(SENT * 3 + tail))[1:]
    assert segs[-1].source_text.endswith(SENT + tail)
    assert all(estimate_seconds(s.text) >= SegmentOptions().min_seconds for s in segs)
    with pytest.raises(ValueError, match="min_seconds"):
        SegmentOptions(min_seconds=16)


def test_paragraph_end_closes_with_full_stop():
    segs = segment_chapter(_chapter("價格是三十六元（一八五四年）", "他說：", title=""))
    assert segs[-1].text.endswith("。") and segs[0].text.endswith("。")
    assert "，。" not in "".join(s.text for s in segs)


def _cast_segments(*paras: str):
    from tasks.book import Book, BookMeta
    from tasks.text.quotes import attribute_book, book_runs

    ch = _chapter(*paras)
    book = Book(BookMeta("t"), (ch,))
    return ch, segment_chapter(ch, runs=book_runs(book, attribute_book(book))[ch.index])


def test_a_cast_segments_each_quote_apart_with_its_speaker():
    """With a cast's runs, a quote is its own segment(s) (role dialogue, the speaker the text names), never
    merged with narration even when short; the segments still cover the chapter exactly."""
    para = "王夫人道：“有沒有，什么要緊。”因又說道：“該隨手拿出兩個來給你這妹妹去裁衣裳的。”熙鳳道：“好。”王夫人一笑。"
    ch, segs = _cast_segments(SENT * 2, para)
    got = [(s.role, s.speaker, s.source_text) for s in segs[2:]]
    assert got == [("dialogue", "王夫人", "“有沒有，什么要緊。”"),
                   ("narrator", "", "因又說道："), ("dialogue", "", "“該隨手拿出兩個來給你這妹妹去裁衣裳的。”"),
                   ("narrator", "", "熙鳳道："), ("dialogue", "熙鳳", "“好。”"), ("narrator", "", "王夫人一笑。")]
    assert [s.pause_after for s in segs[1:]] == ["clause", "sentence", "clause", "sentence", "clause", "sentence",
                                                "chapter"]
    assert audit_chapter(ch, segs).ok
    # the short narration before the first quote joins the narration of the paragraph before (one voice)
    assert segs[1].source_text == SENT * 2 + "\n王夫人道：" and segs[1].role == "narrator"


def test_without_runs_nothing_changes():
    para = "王夫人道：“有沒有，什么要緊。”熙鳳道：“好。”"
    ch = _chapter(SENT, para)
    plain = segment_chapter(ch)
    assert segment_chapter(ch, runs={}) == segment_chapter(ch, runs=None) == plain
    assert {s.role for s in plain} == {"narrator"} and plain[-1].source_text == para    # quotes not apart
