"""Acceptance with real ffmpeg/ffprobe: a 3-chapter synthetic book to every format, checked by decoding the
final files (pyloudnorm), by ffprobe (tags, M4B chapters, cover) and byte for byte across two runs."""
from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyloudnorm
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from tasks.audio.assemble import AssembleOptions, assemble_arrays, expected_length, trim_bounds
from tasks.audio.ffmpeg import decode, find_tool, probe
from tasks.audio.names import chapter_stem
from tasks.audio.options import PackageOptions
from tasks.audio.package import package_book
from tasks.book import BookMeta
from tasks.errors import BookError, ToolMissing

pytestmark = pytest.mark.skipif(not (shutil.which("ffmpeg") and shutil.which("ffprobe")),
                                reason="ffmpeg/ffprobe not installed (apt-get install ffmpeg)")

SR = 24_000
ALL = ("flac", "wav", "mp3", "opus", "m4a", "m4b")
TITLES = ["第一章 风起", "a/b: 第二章?", "CON"]
KINDS = ["sentence", "paragraph", "clause", "chapter"]


def decode_all(path: Path) -> tuple[int, np.ndarray]:
    """The whole decoded file as one float32 array (short files)."""
    sr, it = decode(path)
    parts = list(it)
    return sr, (np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32))


def png(w: int = 8, h: int = 8) -> bytes:
    """A tiny valid RGB PNG."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


META = BookMeta(title="合成之书", author="测试者", language="zh", cover=png(), cover_mime="image/png")


def speechy(seconds: float, seed: int) -> np.ndarray:
    """Voiced-speech-like audio: a gliding harmonic series under a syllable envelope, a little breath noise,
    with silence around it (so trimming has work to do)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    t = np.arange(n) / SR
    f0 = 130 + 30 * np.sin(2 * np.pi * 0.7 * t + seed)                  # Hz
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(np.sin(k * phase) / k for k in range(1, 16)) + 0.05 * rng.standard_normal(n)
    env = np.sin(2 * np.pi * 2.5 * t) ** 2
    pad = np.zeros(SR // 5)
    return np.concatenate([pad, 0.05 * (1 + seed % 3) * x * env, pad]).astype(np.float32)


def make_chapters():
    out = []
    for c, title in enumerate(TITLES):
        arrays = [speechy(0.6 + 0.1 * i, 10 * c + i) for i in range(4)]
        texts = [f"第{c}章，第{i}句。" for i in range(4)]
        out.append((c, title, assemble_arrays(arrays, KINDS, texts, AssembleOptions()), arrays))
    return out


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    chapters = make_chapters()
    root = tmp_path_factory.mktemp("pkg")
    opts = PackageOptions(formats=ALL)
    a = package_book(root / "a", [(i, t, ch) for i, t, ch, _ in chapters], META, opts)
    b = package_book(root / "b", [(i, t, (lambda ch=ch: ch)) for i, t, ch, _ in chapters], META, opts)
    return chapters, a, b


def test_files_are_complete_and_byte_identical_across_runs(book):
    chapters, a, b = book
    names = sorted(p.name for p in a.files)
    expected = sorted([f"{chapter_stem(i, 3, t, e)}.{e}" for i, t, _, _ in chapters
                       for e in ("flac", "wav", "mp3", "opus", "m4a", "srt", "vtt", "lrc")]
                      + ["合成之书.m4b", "合成之书.srt", "合成之书.vtt", "合成之书.lrc", "report.json"])
    assert names == expected
    assert sorted(os.listdir(a.book_dir)) == expected                     # no temp files left behind
    assert "002 - a_b_ 第二章_.flac" in names and "003 - CON.flac" in names
    for pa, pb in zip(a.files, b.files):
        assert pa.name == pb.name
        assert pa.read_bytes() == pb.read_bytes(), pa.name


def test_chapter_length_is_the_assembly_formula(book):
    chapters, a, _ = book
    for i, t, ch, arrays in chapters:
        trimmed = [e - s for s, e in (trim_bounds(x, SR, AssembleOptions()) for x in arrays)]
        n = expected_length(trimmed, KINDS, AssembleOptions())
        assert len(ch.audio) == n
        data, sr = sf.read(str(a.book_dir / f"{chapter_stem(i, 3, t, 'flac')}.flac"), dtype="float32")
        assert sr == SR and len(data) == n


def measured(path: Path) -> tuple[float, float]:
    sr, x = decode_all(path)
    x64 = x.astype(np.float64)
    lufs = pyloudnorm.Meter(sr).integrated_loudness(x64)
    tp = 20 * math.log10(max(np.abs(resample_poly(x64, 4, 1)).max(), np.abs(x64).max()))
    return lufs, tp


def test_loudness_of_decoded_final_files(book):
    _, a, _ = book
    report = json.loads((a.book_dir / "report.json").read_text(encoding="utf-8"))
    rows = {r["file"]: r for r in report["files"]}
    audio = [p for p in a.files if p.suffix[1:] in ALL]
    assert len(audio) == 3 * 5 + 1 and set(rows) == {p.name for p in audio}
    for p in audio:
        lufs, tp = measured(p)
        assert abs(lufs - (-18.0)) <= 1.0, (p.name, lufs)
        assert tp <= -1.5, (p.name, tp)
        assert rows[p.name]["integrated_lufs"] == pytest.approx(lufs, abs=0.05)
        assert rows[p.name]["true_peak_dbtp"] == pytest.approx(tp, abs=0.05)
    assert report["loudness"]["target_lufs"] == -18.0 and report["loudness"]["true_peak_ceiling_dbtp"] == -1.5
    assert [c["title"] for c in report["chapters"]] == TITLES


def test_m4b_chapters_tags_and_cover(book):
    chapters, a, _ = book
    info = probe(a.book_dir / "合成之书.m4b")
    starts = np.cumsum([0] + [len(ch.audio) for _, _, ch, _ in chapters])[:-1] / SR
    got = info["chapters"]
    assert len(got) == 3
    for c, start, title in zip(got, starts, TITLES):
        assert abs(float(c["start_time"]) - start) <= 0.010
        assert c["tags"]["title"] == title
    tags = info["format"]["tags"]
    assert tags["title"] == "合成之书" and tags["artist"] == "测试者" and tags["major_brand"].strip() == "M4B"
    total = sum(len(ch.audio) for _, _, ch, _ in chapters) / SR
    assert abs(float(info["format"]["duration"]) - total) <= 0.05
    pics = [s for s in info["streams"] if s["codec_type"] == "video"]
    assert len(pics) == 1 and pics[0]["disposition"]["attached_pic"] == 1 and pics[0]["codec_name"] == "png"
    audio = [s for s in info["streams"] if s["codec_type"] == "audio"]
    assert audio[0]["codec_name"] == "aac" and int(audio[0]["sample_rate"]) == SR


def test_chapter_file_tags_and_covers(book):
    from mutagen.flac import FLAC
    from mutagen.oggopus import OggOpus

    _, a, _ = book
    d = a.book_dir
    f = FLAC(str(d / "002 - a_b_ 第二章_.flac"))
    assert f["TITLE"] == ["a/b: 第二章?"] and f["ALBUM"] == ["合成之书"] and f["ARTIST"] == ["测试者"]
    assert f["TRACKNUMBER"] == ["2"] and f["TRACKTOTAL"] == ["3"] and f.pictures[0].data == META.cover
    o = OggOpus(str(d / "002 - a_b_ 第二章_.opus"))
    assert o["TITLE"] == ["a/b: 第二章?"] and o["TRACKNUMBER"] == ["2"] and "METADATA_BLOCK_PICTURE" in o
    for ext in ("mp3", "m4a"):
        info = probe(d / f"002 - a_b_ 第二章_.{ext}")
        tags = {k.lower(): v for k, v in info["format"]["tags"].items()}
        assert tags["title"] == "a/b: 第二章?" and tags["album"] == "合成之书" and tags["artist"] == "测试者"
        assert tags["track"] == "2/3"
        assert any(s["codec_type"] == "video" and s["disposition"]["attached_pic"] == 1 for s in info["streams"])


def parse_srt(text: str) -> list[tuple[int, int, str]]:
    def ms(stamp: str) -> int:
        hms, milli = stamp.split(",")
        h, m, s = map(int, hms.split(":"))
        return ((h * 60 + m) * 60 + s) * 1000 + int(milli)
    out = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        a, b = lines[1].split(" --> ")
        out.append((ms(a), ms(b), "\n".join(lines[2:])))
    return out


def test_subtitle_cues_are_the_assembly_boundaries(book):
    chapters, a, _ = book
    offset = 0
    book_cues = parse_srt((a.book_dir / "合成之书.srt").read_text(encoding="utf-8"))
    k = 0
    for i, t, ch, _ in chapters:
        cues = parse_srt((a.book_dir / f"{chapter_stem(i, 3, t, 'srt')}.srt").read_text(encoding="utf-8"))
        assert len(cues) == len(ch.cues) == 4
        for (s, e, text), c in zip(cues, ch.cues):
            assert abs(s - c.start_sample * 1000 / SR) <= 0.5 and abs(e - c.end_sample * 1000 / SR) <= 0.5
            assert text == c.text
            bs, be, btext = book_cues[k]
            assert abs(bs - (offset + c.start_sample) * 1000 / SR) <= 0.5
            assert abs(be - (offset + c.end_sample) * 1000 / SR) <= 0.5 and btext == text
            k += 1
        offset += len(ch.audio)
        vtt = (a.book_dir / f"{chapter_stem(i, 3, t, 'vtt')}.vtt").read_text(encoding="utf-8")
        assert vtt.startswith("WEBVTT") and vtt.count(" --> ") == 4
    assert k == len(book_cues)


def test_resampled_output_44k(tmp_path):
    chapters = make_chapters()[:1]
    opts = PackageOptions(formats=("flac", "opus"), sample_rate=44_100, subtitles=("srt",))
    rep = package_book(tmp_path, [(i, t, ch) for i, t, ch, _ in chapters], META, opts)
    n = len(chapters[0][2].audio)
    info = sf.info(str(tmp_path / "001 - 第一章 风起.flac"))
    assert info.samplerate == 44_100 and info.frames == math.ceil(n * 44_100 / SR)
    assert int(probe(tmp_path / "001 - 第一章 风起.opus")["streams"][0]["sample_rate"]) == 48_000
    assert {r.format for r in rep.loudness} == {"flac", "opus"}
    for r in rep.loudness:
        assert abs(r.integrated_lufs + 18) <= 1 and r.true_peak_dbtp <= -1.5


def test_missing_ffmpeg_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("FFMPEG", str(tmp_path / "no-ffmpeg"))
    with pytest.raises(ToolMissing) as err:
        find_tool("ffmpeg")
    assert not isinstance(err.value, BookError) and "\n" not in str(err.value) and "no-ffmpeg" in str(err.value)
    chapters = make_chapters()[:1]
    with pytest.raises(ToolMissing):
        package_book(tmp_path / "out", [(0, "x", chapters[0][2])], META, PackageOptions(formats=("flac", "mp3")))
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_packaging_never_imports_the_engine(tmp_path):
    code = (
        "import sys, numpy as np\n"
        "from tasks.audio.assemble import assemble_arrays\n"
        "from tasks.book import BookMeta\n"
        "from tasks.audio.package import package_book, PackageOptions\n"
        "x = (0.1*np.sin(np.arange(24000)*0.05)).astype(np.float32)\n"
        "ch = assemble_arrays([x], ['chapter'], ['t'])\n"
        f"package_book({str(tmp_path)!r}, [(0, 'c', ch)], BookMeta(title='b'), "
        "PackageOptions(formats=('flac','m4b')))\n"
        "bad = [m for m in ('engine.engine', 'ChatTTS', 'prefect', 'transformers', 'torch') if m in sys.modules]\n"
        "print('IMPORTED', bad)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3], timeout=300)
    assert res.returncode == 0, res.stderr
    assert "IMPORTED []" in res.stdout
    assert (tmp_path / "b.m4b").exists()


def test_control_characters_and_a_bad_cover(tmp_path):
    chapters = make_chapters()[:1]
    meta = BookMeta(title="书\x00名", author="作\n者", cover=b"not an image", cover_mime="image/jpeg")
    paths = package_book(tmp_path, [(0, "\x07坏\n标题", chapters[0][2])], meta,
                         PackageOptions(formats=("mp3",), subtitles=())).files
    assert [p.name for p in paths] == ["001 - 坏 标题.mp3", "report.json"]
    info = probe(paths[0])
    assert info["format"]["tags"]["title"] == "坏 标题" and info["format"]["tags"]["album"] == "书名"
    assert [s["codec_type"] for s in info["streams"]] == ["audio"]     # an unreadable cover is left out


def test_chapter_files_are_encoded_beside_the_m4b_in_reading_order(tmp_path, monkeypatch):
    """A chapter's files are encoded on the chapter-files thread while the main thread prepares the next chapter
    and then encodes the M4B; the files and reports stay in reading order (chapters, then the M4B) and the bytes are
    those of a run with the chapter files encoded on the main thread."""
    import threading

    import tasks.audio.package as P

    seen: list[tuple[str, str]] = []
    real = P.encode_verified

    def spy(path, fmt, *args, **kwargs):
        seen.append((fmt, threading.current_thread().name))
        return real(path, fmt, *args, **kwargs)

    monkeypatch.setattr(P, "encode_verified", spy)
    chapters = [(c, title, ch) for c, title, ch, _ in make_chapters()]
    opts = PackageOptions(formats=("flac", "m4b"), subtitles=())
    rep = package_book(tmp_path / "a", chapters, META, opts)
    assert [p.suffix for p in rep.files] == [".flac", ".flac", ".flac", ".m4b", ".json"]
    assert [(r.format, r.chapter) for r in rep.loudness] == [("flac", 0), ("flac", 1), ("flac", 2), ("m4b", None)]
    assert sorted(fmt for fmt, _ in seen) == ["flac", "flac", "flac", "m4b"]   # the last two: either first
    assert all(t.startswith("chapter-files") for fmt, t in seen if fmt == "flac")
    assert not any(t.startswith("chapter-files") for fmt, t in seen if fmt == "m4b")

    monkeypatch.setattr(P, "CHAPTER_ENCODERS", 0)                   # every file on this thread, in turn
    one = package_book(tmp_path / "b", chapters, META, opts)
    assert len(seen) == 8 and not any(t.startswith("chapter-files") for _, t in seen[4:])
    assert [p.name for p in one.files] == [p.name for p in rep.files]
    for x, y in zip(rep.files[:-1], one.files[:-1]):
        assert x.read_bytes() == y.read_bytes(), x.name


def test_a_chapter_file_that_fails_fails_the_package_and_leaves_no_temps(tmp_path, monkeypatch):
    """An error on the chapter-files thread is the package's error, raised in the caller; no temp file is left."""
    import tasks.audio.package as P
    from engine.atomic import find_temps

    real = P.encode_verified

    def failing(path, fmt, *args, **kwargs):
        if fmt == "flac" and "002" in path.name:
            raise OSError(28, "No space left on device", str(path))
        return real(path, fmt, *args, **kwargs)

    monkeypatch.setattr(P, "encode_verified", failing)
    chapters = [(c, title, ch) for c, title, ch, _ in make_chapters()]
    with pytest.raises(OSError, match="No space left"):
        package_book(tmp_path / "book", chapters, META, PackageOptions(formats=("flac", "m4b"), subtitles=()))
    assert not list(find_temps(tmp_path / "book"))
    assert not (tmp_path / "book" / "report.json").exists()
