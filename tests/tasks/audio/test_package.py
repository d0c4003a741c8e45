"""Chapter files: safe names, atomic writes, FLAC length and tags."""
from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf

from tasks.audio.assemble import AssembleOptions, ChapterAudio, assemble_arrays, expected_length
from tasks.book import BookMeta
from tasks.errors import OutputError
from tasks.audio.package import (MAX_NAME_BYTES, PackageOptions, atomic_path, chapter_stem, inside, safe_name,
                           write_chapter_files)

SR = 24_000
META = BookMeta(title="测试之书", author="佚名", language="zh", cover=b"\xff\xd8\xff\xe0fakejpeg",
                cover_mime="image/jpeg")

HOSTILE = ["../..", "a/b", "CON", "con.txt", "Nul", "LPT1", "com9 ", "x" * 300, "第" * 300, "📖" * 80,
           'bad:*?"<>|\\name', "trailing. . .", "  spaces  ", "\x00\x1fctl\x7f", "..", ".", "",
           "\u202eevil\u202c", "e\u0301" * 150, "👩\u200d👩\u200d👧" * 30]


@pytest.mark.parametrize("title", HOSTILE)
def test_safe_name_is_safe(title):
    s = safe_name(title)
    assert len(s.encode("utf-8")) <= MAX_NAME_BYTES
    assert not any(c in s for c in '/\\:*?"<>|')
    assert ".." not in s
    assert not any(ord(c) < 32 or ord(c) == 127 for c in s)
    assert s == s.strip(" .")
    assert s.split(".")[0].strip().upper() not in {"CON", "PRN", "AUX", "NUL", "COM1", "COM9", "LPT1"}
    stem = chapter_stem(4, 250, title, "flac")
    assert stem.startswith("005 - ") or stem == "005"
    assert len(f"{stem}.flac".encode("utf-8")) <= MAX_NAME_BYTES


def test_safe_name_keeps_ordinary_titles():
    assert safe_name("第一章 风起") == "第一章 风起"
    assert safe_name("Chapter 1: The Start") == "Chapter 1_ The Start"
    assert chapter_stem(0, 3, "序") == "001 - 序"
    assert chapter_stem(9, 1200, "") == "0010"


def test_inside_refuses_escape(tmp_path):
    with pytest.raises(OutputError):
        inside(tmp_path, "../x.flac")
    with pytest.raises(OutputError):
        inside(tmp_path, "a/b.flac")
    assert inside(tmp_path, "ok.flac").parent == tmp_path.resolve()


def test_atomic_path_leaves_nothing_on_error(tmp_path):
    final = tmp_path / "x.flac"
    with pytest.raises(RuntimeError):
        with atomic_path(final) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []


def chapter(seconds=(0.6, 0.8), seed=0) -> ChapterAudio:
    rng = np.random.default_rng(seed)
    arrays = [(0.2 * rng.standard_normal(int(s * SR))).astype(np.float32) for s in seconds]
    kinds = ["sentence"] * (len(arrays) - 1) + ["chapter"]
    return assemble_arrays(arrays, kinds, [f"句{i}" for i in range(len(arrays))], AssembleOptions(trim=False))


def test_flac_chapter_file_length_tags_cover(tmp_path):
    from mutagen.flac import FLAC

    ch = chapter()
    paths = write_chapter_files(tmp_path / "book", 1, 12, "第二章 a/b", ch, META,
                                PackageOptions(formats=("flac",), subtitles=()))
    assert [p.name for p in paths] == ["002 - 第二章 a_b.flac"]
    data, sr = sf.read(str(paths[0]), dtype="float32")
    assert sr == SR and len(data) == len(ch.audio)
    assert len(data) == expected_length([int(0.6 * SR), int(0.8 * SR)], ["sentence", "chapter"],
                                        AssembleOptions(trim=False))
    assert sf.info(str(paths[0])).subtype == "PCM_24"
    f = FLAC(str(paths[0]))
    assert f["TITLE"] == ["第二章 a/b"] and f["ALBUM"] == ["测试之书"] and f["ARTIST"] == ["佚名"]
    assert f["TRACKNUMBER"] == ["2"] and f["TRACKTOTAL"] == ["12"] and f["LANGUAGE"] == ["zh"]
    assert f.pictures and f.pictures[0].data == META.cover and f.pictures[0].type == 3
    assert sorted(os.listdir(tmp_path / "book")) == ["002 - 第二章 a_b.flac"]      # no temp files left


def test_chapter_files_are_byte_identical_across_runs(tmp_path):
    ch = chapter(seed=3)
    o = PackageOptions(formats=("flac", "wav"))
    a = write_chapter_files(tmp_path / "a", 0, 1, "One", ch, META, o)
    b = write_chapter_files(tmp_path / "b", 0, 1, "One", ch, META, o)
    assert [p.name for p in a] == ["001 - One.flac", "001 - One.wav", "001 - One.srt", "001 - One.vtt",
                                   "001 - One.lrc"]
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes()


def test_package_options_validate():
    with pytest.raises(ValueError, match="aiff"):
        PackageOptions(formats=("aiff",)).validate()
    with pytest.raises(ValueError, match="twice"):
        PackageOptions(formats=("flac", "flac")).validate()


def test_package_pieces_from_stored_segments(tmp_path):
    from tasks.audio.assemble import Piece, assemble_chapter
    from tasks.audio.package import package_pieces

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
    rep = package_pieces(tmp_path / "book", chapters, META, PackageOptions(formats=("flac",), subtitles=("srt",)))
    assert [p.name for p in rep.files] == ["001 - 章0.flac", "001 - 章0.srt", "002 - 章1.flac", "002 - 章1.srt",
                                           "report.json"]
    for (c, _, pieces), flac in zip(chapters, rep.files[0::2]):
        assert sf.info(str(flac)).frames == len(assemble_chapter(pieces).audio)
    assert [r["integrated_lufs"] for r in rep.data["files"]] == [pytest.approx(-18, abs=0.1)] * 2


def test_stale_temp_files_from_a_killed_run_are_removed(tmp_path):
    from tasks.audio.package import package_book

    book = tmp_path / "book"
    book.mkdir()
    stale, fresh, other = book / ".tmp-abc.flac", book / ".tmp-def.m4b", book / "notes.txt"
    for p in (stale, fresh, other):
        p.write_bytes(b"x")
    old_dir, new_dir = book / ".tmp-ffmpeg-old", book / ".tmp-ffmpeg-new"      # a killed encode's side inputs
    for d in (old_dir, new_dir):
        d.mkdir()
        (d / "meta.txt").write_text(";FFMETADATA1\n")
    for p in (stale, old_dir):
        os.utime(p, (1_000_000_000, 1_000_000_000))
    package_book(book, [(0, "c", chapter())], META, PackageOptions(subtitles=()))
    assert not stale.exists() and fresh.exists() and other.exists()
    assert not old_dir.exists() and (new_dir / "meta.txt").exists()
