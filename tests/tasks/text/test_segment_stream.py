"""Streaming: segmentation is lazy and linear, so a huge single paragraph segments in bounded memory.

The 50 MB acceptance run is slow (~10 min on 2 cores):
    RUN_SLOW=1 python -m pytest tests/tasks/text/test_segment_stream.py -m slow -q"""
from __future__ import annotations

import resource

import pytest

from tasks.book import Chapter
from tasks.text import normalize as textnorm
from tasks.text.segment import iter_segments

SENT = "士隱於書房閒坐，至手倦拋書，伏几少憩，不覺朦朧睡去。"


def test_first_segment_needs_only_the_first_chunks(monkeypatch):
    calls = []
    real = textnorm._chunk_spans

    def counting(text, start, end, *rest):
        calls.append((start, end))
        return real(text, start, end, *rest)

    monkeypatch.setattr(textnorm, "_chunk_spans", counting)
    para = SENT * 20_000                                  # 520,000 characters, one paragraph
    gen = iter_segments(Chapter(0, "", (para,)))
    first = next(gen)
    assert first.source_text and para.startswith(first.source_text)
    assert len(calls) < 20                                # not the ~20,000 chunks of the paragraph
    assert max(e for _, e in calls) < 5_000


def test_paragraph_without_any_mark_is_chunked():
    para = "甲乙丙丁戊己庚辛壬癸" * 3_000                      # 30,000 characters, no punctuation at all
    spans = list(textnorm.iter_spans(para))
    assert sum(s.end - s.start for s in spans) == len(para)
    segs = list(iter_segments(Chapter(0, "", (para,))))
    assert "".join(s.source_text for s in segs) == para
    assert max(len(s.text) for s in segs) <= 150


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_50mb_single_paragraph_bounded_memory():
    para = (SENT * 700_000)[: 50_000_000 // 3]            # ~50 MB of UTF-8, one paragraph
    ch = Chapter(0, "", (para,))
    it = iter_segments(ch)
    first = next(it)                                      # load OpenCC, jieba, FSTs before measuring
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n, covered = 1, len(first.source_text)
    for seg in it:
        n += 1
        covered += len(seg.source_text)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert n > 100_000
    assert covered == len(para), "segments lost or repeated source characters while streaming"
    assert grew_mb < 100, f"peak RSS grew {grew_mb:.0f} MB while streaming"
    print(f"50 MB paragraph: {n} segments, peak RSS grew {grew_mb:.1f} MB")
