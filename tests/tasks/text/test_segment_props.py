"""Property tests (hypothesis): arbitrary Unicode never raises, never yields a segment over the cap, never
loses a character outside the audit.  CI: ~200 examples per property; more with HYPOTHESIS_PROFILE=deep."""
from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from engine.units import estimate_seconds
from tasks.book import Chapter
from tasks.text.coverage import audit_chapter
from tasks.text.normalize import normalize_with_map
from tasks.text.segment import SegmentOptions, segment_chapter

settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Text that looks like books, plus anything at all: CJK, digits and number marks, quotes, placeholders, Latin.
_BOOKISH = st.sampled_from(list("的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要她出也得里后"
                                "紅樓夢說話還點0123456789.,:/-%°℃$¥年月日号第，。！？；：、…—「」『』“”《》·︰．"
                                "□囗?【】 　\n\tABCxyzé😀\ue000\u200b\x07ヾ"))
TEXT = st.lists(st.one_of(_BOOKISH, st.characters()), max_size=120).map("".join)
ALPHABET = re.compile(r"[\u4e00-\u9fff〇A-Za-z，。、. ]*")


@given(TEXT)
def test_normalize_never_raises_and_stays_in_alphabet(text):
    out, spans = normalize_with_map(text)
    assert ALPHABET.fullmatch(out), out
    pos = 0
    for s in spans:                       # the spans tile the source, in order
        assert s.start == pos or s.start == s.end == pos
        pos = s.end
    assert pos == len(text)
    assert "".join(s.out for s in spans) == out


OPTS = SegmentOptions(max_chars=40, max_seconds=8.0, target_seconds=5.0, min_chars=5)


@given(st.lists(TEXT, min_size=0, max_size=6), TEXT)
def test_segments_capped_and_fully_audited(paras, title):
    ch = Chapter(index=1, title=title, paragraphs=tuple(p for p in paras if p))
    segs = segment_chapter(ch, opts=OPTS)
    for s in segs:
        assert 0 < len(s.text) <= OPTS.max_chars
        assert estimate_seconds(s.text) <= OPTS.max_seconds
        assert s.pause_after in ("clause", "sentence", "paragraph", "chapter")
    assert [s.index for s in segs] == list(range(len(segs)))
    rep = audit_chapter(ch, segs, opts=OPTS)
    assert rep.ok, rep.unexplained
