"""A 205-chapter book with hostile titles packages into safe, unique names inside book_dir (flac only)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tasks.audio.assemble import AssembleOptions, ChapterAudio, assemble_arrays
from tasks.audio.names import MAX_NAME_BYTES
from tasks.audio.options import PackageOptions
from tasks.audio.package import package_book
from tasks.book import BookMeta

SR = 24_000
HOSTILE = ["../..", "a/b", "CON", "con.txt", "..", ".", "", "📖🎧" * 40, "长" * 300, "x" * 300,
           'q:*?"<>|\\', "trailing dots...", "\x00\x07nul", "AUX ", "COM1", "lpt9.log", " ", "/etc/passwd",
           "C:\\Windows", "\u202egnp.exe", "第一章", "第一章"]      # duplicates too


def test_two_hundred_hostile_chapters(tmp_path):
    n = 205
    titles = [HOSTILE[i % len(HOSTILE)] + ("" if i < len(HOSTILE) else f" {i}") for i in range(n)]
    tone = (0.1 * np.sin(2 * np.pi * 220 * np.arange(SR // 2) / SR)).astype(np.float32)
    opts_a = AssembleOptions(trim=False, lead_in_s=0.0,
                             pauses_s={"clause": 0.25, "sentence": 0.45, "paragraph": 0.8, "chapter": 0.1})
    chapters = [(i, t, (lambda: assemble_arrays([tone], ["chapter"], ["句。"], opts_a))) for i, t in enumerate(titles)]
    book_dir = tmp_path / "out" / "book"
    rep = package_book(book_dir, chapters, BookMeta(title="../CON/书"), PackageOptions(formats=("flac",)))
    names = sorted(os.listdir(book_dir))
    assert len(names) == n * 4 + 1                                 # flac + srt/vtt/lrc per chapter, report
    assert os.listdir(tmp_path) == ["out"] and os.listdir(tmp_path / "out") == ["book"]
    assert len({x.casefold() for x in names}) == len(names)
    for name in names:
        assert (book_dir / name).resolve().parent == book_dir.resolve()
        assert len(name.encode("utf-8")) <= MAX_NAME_BYTES
        assert not any(c in name for c in '/\\:*?"<>|') and ".." not in name
        assert all(ord(c) >= 32 and c != "\u202e" for c in name)
        assert name == name.strip(" .") or name.endswith((".flac", ".srt", ".vtt", ".lrc", ".json"))
    flacs = [p for p in rep.files if p.suffix == ".flac"]
    assert len(flacs) == n and flacs[0].name.startswith("001 - ") and flacs[-1].name.startswith("205 - ")
    from mutagen.flac import FLAC

    assert FLAC(str(flacs[0]))["TITLE"] == ["../.."]               # the tag keeps the original title
    assert FLAC(str(flacs[7]))["TITLE"] == ["📖🎧" * 40]
    assert all(abs(r.integrated_lufs + 18) < 0.5 for r in rep.loudness)


@pytest.mark.slow
def test_twenty_minute_chapter_flac_and_m4b(tmp_path):
    """Long-chapter packaging (run: python -m pytest tests/tasks/audio/test_package_many.py -m slow)."""
    import shutil

    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg not installed")
    n = 20 * 60 * SR
    t = np.arange(n) / SR
    phase = 2 * np.pi * np.cumsum(130 + 30 * np.sin(2 * np.pi * 0.7 * t)) / SR
    x = (0.05 * sum(np.sin(k * phase) / k for k in range(1, 16)) * np.sin(2 * np.pi * 2.5 * t) ** 2)
    x = x.astype(np.float32)
    x[::SR * 7] = 0.95                                               # clicks for the limiter
    del t, phase
    rep = package_book(tmp_path, [(0, "long", ChapterAudio(x, SR, []))], BookMeta(title="long"),
                       PackageOptions(formats=("flac", "m4b"), subtitles=()))
    for r in rep.loudness:
        assert abs(r.integrated_lufs + 18) <= 1 and r.true_peak_dbtp <= -1.5
        assert abs(r.seconds - 1200) < 0.1
