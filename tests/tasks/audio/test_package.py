"""Packaging orchestration: chapter files (FLAC length and tags, byte-identical reruns), stored segments, the
output folder."""
from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf

from tasks.audio.assemble import AssembleOptions, ChapterAudio, assemble_arrays, expected_length
from tasks.audio.options import PackageOptions
from tasks.audio.package import package_book
from tasks.book import BookMeta
from tasks.errors import OutputError

SR = 24_000
META = BookMeta(title="测试之书", author="佚名", language="zh", cover=b"\xff\xd8\xff\xe0fakejpeg",
                cover_mime="image/jpeg")

def chapter(seconds=(0.6, 0.8), seed=0) -> ChapterAudio:
    rng = np.random.default_rng(seed)
    arrays = [(0.2 * rng.standard_normal(int(s * SR))).astype(np.float32) for s in seconds]
    kinds = ["sentence"] * (len(arrays) - 1) + ["chapter"]
    return assemble_arrays(arrays, kinds, [f"句{i}" for i in range(len(arrays))], AssembleOptions(trim=False))


def test_flac_chapter_file_length_tags_cover(tmp_path):
    from mutagen.flac import FLAC

    ch = chapter()
    rep = package_book(tmp_path / "book", [(1, "第二章 a/b", ch)], META, PackageOptions(formats=("flac",),
                                                                                       subtitles=()))
    paths = rep.files[:-1]
    assert [p.name for p in rep.files] == ["002 - 第二章 a_b.flac", "report.json"]
    data, sr = sf.read(str(paths[0]), dtype="float32")
    assert sr == SR and len(data) == len(ch.audio)
    assert len(data) == expected_length([int(0.6 * SR), int(0.8 * SR)], ["sentence", "chapter"],
                                        AssembleOptions(trim=False))
    assert sf.info(str(paths[0])).subtype == "PCM_24"
    f = FLAC(str(paths[0]))
    assert f["TITLE"] == ["第二章 a/b"] and f["ALBUM"] == ["测试之书"] and f["ARTIST"] == ["佚名"]
    assert f["TRACKNUMBER"] == ["2"] and f["TRACKTOTAL"] == ["2"] and f["LANGUAGE"] == ["zh"]
    assert f.pictures and f.pictures[0].data == META.cover and f.pictures[0].type == 3
    assert sorted(os.listdir(tmp_path / "book")) == ["002 - 第二章 a_b.flac", "report.json"]   # no temps left


def test_chapter_files_are_byte_identical_across_runs(tmp_path):
    ch = chapter(seed=3)
    o = PackageOptions(formats=("flac", "wav"))
    a = package_book(tmp_path / "a", [(0, "One", ch)], META, o).files
    b = package_book(tmp_path / "b", [(0, "One", ch)], META, o).files
    assert [p.name for p in a] == ["001 - One.flac", "001 - One.wav", "001 - One.srt", "001 - One.vtt",
                                   "001 - One.lrc", "report.json"]
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes()


def test_package_options_validate():
    with pytest.raises(ValueError, match="aiff"):
        PackageOptions(formats=("aiff",))
    with pytest.raises(ValueError, match="twice"):
        PackageOptions(formats=("flac", "flac"))
    with pytest.raises(ValueError, match="at least one output format"):
        PackageOptions(formats=())


def test_package_from_stored_segments(tmp_path):
    """Chapters given as functions assembling stored segment files (two chapters in memory at most: one being
    prepared, one being encoded)."""
    from functools import partial

    from tasks.audio.assemble import Piece, assemble_chapter

    rng = np.random.default_rng(5)
    chapters = []
    for c in range(2):
        pieces = []
        for i in range(3):
            p = tmp_path / "segments" / f"{c}{i}.flac"
            p.parent.mkdir(exist_ok=True)
            x = (0.1 * rng.standard_normal(SR // 2)).astype(np.float32)
            sf.write(str(p), x, SR, format="FLAC", subtype="PCM_24")
            pieces.append(Piece(p, "sentence" if i < 2 else "chapter", f"{c}-{i}"))
        chapters.append((c, f"章{c}", pieces))
    rep = package_book(tmp_path / "book", [(c, t, partial(assemble_chapter, p)) for c, t, p in chapters], META,
                       PackageOptions(formats=("flac",), subtitles=("srt",)))
    assert [p.name for p in rep.files] == ["001 - 章0.flac", "001 - 章0.srt", "002 - 章1.flac", "002 - 章1.srt",
                                           "report.json"]
    for (_, _, pieces), flac in zip(chapters, rep.files[0::2]):
        assert sf.info(str(flac)).frames == len(assemble_chapter(pieces).audio)
    assert [r["integrated_lufs"] for r in rep.data["files"]] == [pytest.approx(-18, abs=0.1)] * 2


def test_an_unusable_output_folder_is_an_output_error(tmp_path):
    blocked = tmp_path / "book"
    blocked.write_bytes(b"a file where the folder should be")
    with pytest.raises(OutputError, match="cannot write the output folder"):
        package_book(blocked, [(0, "c", chapter())], META, PackageOptions(subtitles=()))
    with pytest.raises(OutputError):
        package_book(blocked / "sub", [(0, "c", chapter())], META, PackageOptions(subtitles=()))
    assert blocked.read_bytes() == b"a file where the folder should be"
    assert os.listdir(tmp_path) == ["book"]


def test_every_output_file_passes_the_crash_point(tmp_path, monkeypatch):
    """Each output is renamed into place after the "package-file" hook, its temp complete beside it."""
    import tasks.audio.package as P

    seen = []
    monkeypatch.setattr(P, "crashpoint", lambda name: seen.append(
        (name, sorted(p.name for p in (tmp_path / "book").iterdir()))))
    rep = package_book(tmp_path / "book", [(0, "c", chapter())], META, PackageOptions(subtitles=("srt",)))
    assert [n for n, _ in seen] == ["package-file"] * 3                  # flac, srt, report.json
    for (_, listing), final in zip(seen, rep.files):
        assert final.name not in listing and len([n for n in listing if n.startswith(".tmp-")]) == 1
