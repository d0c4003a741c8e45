"""Plan: an engine version bump keeps a book's audio from the versions the engine adopts (tasks/plan/rows.py)."""
from __future__ import annotations

from tasks.book import Book, BookMeta, Chapter, Segment
from tasks.plan.rows import content_key, derive_seed, plan_rows
from tasks.voice.voices import voice_id

OLD, NEW, OTHER = "ours2-fp-fp32-cpu", "ours3-fp-fp32-cpu", "ours2-otherfp-fp32-cpu"
TEXTS = ("山高水长。", "风和日丽。", "春眠不觉晓。")
VOICE = "a" * 80


def _book_and_segments(texts=TEXTS):
    book = Book(BookMeta(title="t"), (Chapter(0, "c", texts),))
    return book, [Segment(0, i, t, t) for i, t in enumerate(texts)]


def _rendered(book_dir, rows, keep=lambda r: True):
    """Mark rows done as a finished render would, with their audio on disk (for those `keep` selects)."""
    done = []
    for r in rows:
        if keep(r):
            (book_dir / r["audio_path"]).parent.mkdir(parents=True, exist_ok=True)
            (book_dir / r["audio_path"]).write_bytes(b"audio")
        done.append({**r, "status": "done", "samples": 1000, "duration_s": 0.04, "attempts": 1})
    return {r["content_key"]: r for r in done}


def test_a_new_engine_version_keeps_the_adopted_versions_audio(tmp_path):
    book, segs = _book_and_segments()
    old = plan_rows(book, segs[:2], VOICE, OLD, tmp_path)
    previous = _rendered(tmp_path, old, keep=lambda r: r["text"] != TEXTS[1])   # the 2nd one's audio is gone
    rows = plan_rows(book, segs, VOICE, NEW, tmp_path, previous, adopts=(OLD,))
    first, second, third = rows
    assert (first["content_key"], first["audio_path"], first["engine_version"]) == \
        (old[0]["content_key"], old[0]["audio_path"], OLD)
    assert first["status"] == "done" and first["samples"] == 1000 and first["attempts"] == 1
    vid = voice_id(VOICE)
    for r in (second, third):                           # no audio to keep / a new segment: the new engine's
        assert r["status"] == "pending" and r["engine_version"] == NEW
        assert r["content_key"] == content_key(r["text"], vid, derive_seed(r["text"], vid), NEW)


def test_audio_of_a_version_the_engine_does_not_adopt_is_rendered_again(tmp_path):
    book, segs = _book_and_segments()
    previous = _rendered(tmp_path, plan_rows(book, segs, VOICE, OTHER, tmp_path))
    for adopts in ((), (OLD,)):                         # none, or another model's fingerprint
        rows = plan_rows(book, segs, VOICE, NEW, tmp_path, previous, adopts=adopts)
        assert all(r["status"] == "pending" and r["engine_version"] == NEW for r in rows)
        assert not {r["content_key"] for r in rows} & set(previous)
    again = plan_rows(book, segs, VOICE, NEW, tmp_path, previous, adopts=(OLD, OTHER))
    assert all(r["status"] == "done" and r["engine_version"] == OTHER for r in again)
