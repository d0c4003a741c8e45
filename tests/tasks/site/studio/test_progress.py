"""A book's progress as the studio shows it, from the manifest alone; a chapter assembled from its segments as
packaging assembles it (so it plays before the book is packaged); the speed and time left; the downloads."""
from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
import soundfile as sf

import manifests
from tasks.audio.assemble import AssembleOptions, Piece, assemble_chapter
from tasks.site.studio.progress import Speedometer, book_progress, chapter_preview, downloads


@pytest.fixture
def book(rendered_book, tmp_path):
    dest = tmp_path / "out" / rendered_book.name
    shutil.copytree(rendered_book, dest)
    return dest


def test_progress_per_chapter_and_a_pending_row(book):
    p = book_progress(book)
    assert (p["total"], p["done"], p["percent"], p["packaged"], p["rendering"]) == (12, 12, 100.0, True, False)
    assert [(c["number"], c["title"], c["total"], c["playable"]) for c in p["chapters"]] == [
        (1, "前言", 3, True), (2, "第一章", 3, True), (3, "第二章", 3, True), (4, "第三章", 3, True)]
    rows = manifests.load(book).to_pylist()
    pending = [{**r, "status": "pending"} if r["chapter"] == 2 and r["segment"] == 1 else r for r in rows]
    p = book_progress(book, pending)
    assert [c["playable"] for c in p["chapters"]] == [True, True, False, True]
    assert p["done"] == 11 and p["chapters"][2]["left_s"] > 0
    assert chapter_preview(book, 2, pending) is None                    # not whole: nothing to play yet
    assert book_progress(book.parent / "nothing") is None


def test_a_chapter_preview_is_its_segments_assembled_as_packaging_does(book):
    rows = [r for r in manifests.load(book).to_pylist() if r["chapter"] == 1]
    wav, cues = chapter_preview(book, 1)
    audio, rate = sf.read(io.BytesIO(wav), dtype="float32")
    expected = assemble_chapter([Piece(book / r["audio_path"], r["pause_after"], r["source_text"], r["voice_id"])
                                 for r in rows], AssembleOptions())
    assert rate == expected.sample_rate and len(audio) == len(expected.audio)
    assert np.max(np.abs(audio - expected.audio)) < 1 / 16384                # 16-bit of the same samples
    assert [(c["segment"], c["text"]) for c in cues] == [(f"2.{i + 1}", r["source_text"]) for i, r in enumerate(rows)]
    report = json.loads((book / "report.json").read_text(encoding="utf-8"))
    packaged = next(c for c in report["chapters"] if c["index"] == 1)["cues_ms"]
    assert [round(c["start"] * 1000) for c in cues] == pytest.approx([a for a, _ in packaged], abs=1)


def test_speed_and_time_left_from_successive_readings():
    s = Speedometer()
    assert s.add({"done": 2, "done_s": 20.0, "left_s": 100.0}, now=0.0)["eta_s"] is None
    r = s.add({"done": 6, "done_s": 60.0, "left_s": 60.0}, now=20.0)        # 40 s of audio in 20 s
    assert r == {"segments_per_min": 12.0, "audio_per_wall": 2.0, "eta_s": 30}
    assert s.add({"done": 1, "done_s": 5.0, "left_s": 200.0}, now=21.0)["eta_s"] is None   # re-planned: anew


def test_downloads_are_the_packaged_files_and_their_subtitles(book):
    got = downloads(book)
    assert got[0] == {"file": "道德经（前三章）.m4b", "format": "m4b", "chapter": None, "title": ""}
    flac = [f for f in got if f["chapter"] == 2]
    assert [f["format"] for f in flac] == ["flac", "srt", "vtt", "lrc"] and flac[0]["title"] == "第一章"
    assert all((book / f["file"]).is_file() for f in got)


def test_a_watched_book_is_read_again_when_its_manifest_changes(book, monkeypatch):
    import tasks.site.studio.progress as P

    reads = []
    real = P.book_progress
    monkeypatch.setattr(P, "book_progress", lambda d: reads.append(d) or real(d))
    w = P.Watch(book)
    first, _ = w.read()
    again, _ = w.read()
    assert len(reads) == 1 and again["done"] == first["done"] == 12
    row = next(r for r in manifests.load(book).to_pylist() if r["chapter"] == 3)
    manifests.commit(book, [{**row, "status": "pending"}])                 # a new part: a fix re-planned it
    now, _ = w.read()
    assert len(reads) == 2 and now["done"] == 11 and not now["chapters"][3]["playable"]
