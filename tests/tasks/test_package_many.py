"""A 205-chapter book with hostile titles packages into safe, unique names inside book_dir (flac only)."""
from __future__ import annotations

import os

import numpy as np

from tasks.assemble import AssembleOptions, assemble_arrays
from tasks.book import BookMeta
from tasks.package import MAX_NAME_BYTES, PackageOptions, package_book

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
