"""Encoders without running ffmpeg: tag values, FFMETADATA1 chapters, each format's ffmpeg arguments, the
lossless writers' tags."""
from __future__ import annotations

import numpy as np
import soundfile as sf

from tasks.audio.encode import (
    chapter_tags,
    codec_args,
    cover_kind,
    ffmetadata,
    iso639_2,
    tag_text,
    write_lossless,
)
from tasks.audio.options import BITRATES_KBPS
from tasks.book import BookMeta

META = BookMeta(title="书=名;#", author="作者\n甲", language="zh-CN", cover=b"\x89PNG\r\n\x1a\nrest")


def test_tag_text_cover_kind_language():
    assert tag_text("  a\tb\x07\n c  ") == "a b c" and tag_text("e\u0301") == "é"
    assert cover_kind(META) == "png" and cover_kind(BookMeta("t", cover=b"\xff\xd8\xff\xe0")) == "jpeg"
    assert cover_kind(BookMeta("t", cover=b"GIF89a")) is None and cover_kind(BookMeta("t")) is None
    assert iso639_2("zh-CN") == "chi" and iso639_2("EN_us") == "eng" and iso639_2("tlh") == "und"


def test_ffmetadata_has_escaped_tags_and_exact_chapters():
    tags = chapter_tags(0, 1, META.title, META)
    text = ffmetadata(tags, [(0, 24_000, "第一章"), (24_000, 36_000, "a=b\nc")], 24_000)
    lines = text.splitlines()
    assert lines[0] == ";FFMETADATA1" and text.endswith("\n")
    assert "title=书\\=名\\;\\#" in lines and "artist=作者 甲" in lines and "genre=Audiobook" in lines
    assert lines[lines.index("[CHAPTER]"):] == [
        "[CHAPTER]", "TIMEBASE=1/24000", "START=0", "END=24000", "title=第一章",
        "[CHAPTER]", "TIMEBASE=1/24000", "START=24000", "END=36000", "title=a\\=b c"]


def test_codec_args_per_format():
    tags = chapter_tags(1, 12, "第二章", META)
    mp3 = codec_args("mp3", BITRATES_KBPS["mp3"], tags, META)
    assert mp3[:4] == ["-c:a", "libmp3lame", "-b:a", "64k"]
    assert "track=2/12" in mp3 and "title=第二章" in mp3 and "language=chi" in mp3
    m4a = codec_args("m4a", 96, tags, META)
    assert "aac" in m4a and "96k" in m4a and "M4A " in m4a and "track=2/12" in m4a
    m4b = codec_args("m4b", 64, tags, META)                   # tags come from the FFMETADATA input
    assert "M4B " in m4b and "-metadata" not in m4b and "language=chi" in m4b
    opus = codec_args("opus", 48, tags, META)                 # tagged by mutagen afterwards
    assert opus == ["-c:a", "libopus", "-b:a", "48k", "-application", "audio"]


def test_lossless_writers_tag_their_files(tmp_path):
    from mutagen.flac import FLAC

    audio = (0.1 * np.sin(np.arange(4800) * 0.05)).astype(np.float32)
    tags = chapter_tags(2, 3, "章", META)
    write_lossless(tmp_path / "a.flac", "flac", audio, 24_000, tags, META)
    write_lossless(tmp_path / "a.wav", "wav", audio, 24_000, tags, META)
    f = FLAC(str(tmp_path / "a.flac"))
    assert f["TITLE"] == ["章"] and f["TRACKNUMBER"] == ["3"] and f.pictures[0].mime == "image/png"
    with sf.SoundFile(str(tmp_path / "a.wav")) as w:
        assert w.title == "章" and w.subtype == "PCM_24" and w.frames == len(audio)
