"""`--format epub` (tasks.audio.epub3) on a synthetic two-chapter book packaged with real ffmpeg: valid for
epubcheck, overlays on the SRT's milliseconds, the original text, the cover, AAC-in-MP4 chapter audio at the
loudness target, byte-identical across runs."""
from __future__ import annotations

import json
import shutil
import zipfile

import pytest
from lxml import etree

from tasks.audio.assemble import AssembleOptions, assemble_arrays
from tasks.audio.epub3 import ACTIVE_CLASS, AUDIO_MIME, clock, language_tag
from tasks.audio.ffmpeg import probe
from tasks.audio.options import PackageOptions
from tasks.audio.package import package_book
from tests.tasks.audio.epub_helpers import Epub, assert_read_along, squash
from tests.tasks.audio.test_package_ffmpeg import META, measured, speechy

pytestmark = pytest.mark.skipif(not (shutil.which("ffmpeg") and shutil.which("ffprobe")),
                                reason="ffmpeg/ffprobe not installed (apt-get install ffmpeg)")

# (units: title then paragraphs, segment source texts, pauses): a silent paragraph, two short paragraphs
# spoken as one segment, text that needs escaping.
BOOK = [
    (["第一章 风起", "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。", "＊＊＊", "「好。」",
      "「走吧。」寒来暑往，秋收冬藏。"],
     ["第一章 风起", "天地玄黄，宇宙洪荒。", "日月盈昃，辰宿列张。", "「好。」\n「走吧。」", "寒来暑往，秋收冬藏。"],
     ["paragraph", "sentence", "paragraph", "sentence", "chapter"]),
    (['<第二章> & "云"', "云腾致雨，露结为霜。"], ['<第二章> & "云"', "云腾致雨，露结为霜。"],
     ["paragraph", "chapter"]),
]
OPTS = PackageOptions(formats=("epub", "flac"), subtitles=("srt",))


def _chapters():
    out = []
    for c, (units, texts, pauses) in enumerate(BOOK):
        arrays = [speechy(0.5 + 0.15 * len(t) / 4, 10 * c + i) for i, t in enumerate(texts)]
        out.append((c, units[0], assemble_arrays(arrays, pauses, texts, AssembleOptions())))
    return out


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    root = tmp_path_factory.mktemp("epub")
    texts = {c: units for c, (units, _, _) in enumerate(BOOK)}
    chapters = _chapters()
    reps = [package_book(root / name, chapters, META, OPTS, texts=texts) for name in ("a", "b")]
    bare = package_book(root / "bare", chapters, META, OPTS)             # no text record: the cues' text
    return reps, bare


def test_valid_overlays_on_the_srt_times_with_the_original_text(books):
    (a, _), _ = books
    epub = assert_read_along(a.book_dir / "合成之书.epub", a.book_dir, {c: u for c, (u, _, _) in enumerate(BOOK)})
    first = epub.chapters()[0]
    assert [f for _, _, f, _ in first.clips] == ["s0", "s1", "s2", "s3", "s4"]
    assert first.spans["s3"] == "「好。」「走吧。」"                        # one span across the paragraph break
    assert "＊＊＊" in first.text and "＊＊＊" not in "".join(first.spans[f] for _, _, f, _ in first.clips)
    assert epub.meta("media:active-class") == [ACTIVE_CLASS]
    assert f".{ACTIVE_CLASS} {{" in epub.read("style.css").decode("utf-8")
    assert epub.dc("title") == ["合成之书"] and epub.dc("creator") == ["测试者"] and epub.dc("language") == ["zh"]
    titles = [squash("".join(x.itertext())) for x in etree.fromstring(epub.read("nav.xhtml")).iter("{*}a")]
    assert titles == ["第一章风起", '<第二章>&"云"']


def test_cover_and_chapter_audio(books, tmp_path):
    (a, _), _ = books
    epub = Epub(a.book_dir / "合成之书.epub")
    items = epub.items()
    cover = items["cover-image"]
    assert cover.get("properties") == "cover-image" and epub.read(cover.get("href")) == META.cover
    report = json.loads((a.book_dir / "report.json").read_text(encoding="utf-8"))
    rows = {r["file"]: r for r in report["files"] if r["format"] == "epub"}
    for ch in epub.chapters():
        audio = {src for _, _, _, src in ch.clips}
        assert len(audio) == 1
        href = "audio/" + audio.pop().rsplit("/", 1)[1]
        (item,) = [i for i in items.values() if i.get("href") == href]
        assert item.get("media-type") == AUDIO_MIME
        path = tmp_path / href.replace("/", "_")
        path.write_bytes(epub.read(href))
        info = probe(path)
        assert [s["codec_name"] for s in info["streams"]] == ["aac"] and "mp4" in info["format"]["format_name"]
        lufs, tp = measured(path)
        assert abs(lufs - (-18.0)) <= 1.0 and tp <= -1.5, (href, lufs, tp)
        row = rows[f"合成之书.epub/EPUB/{href}"]
        assert row["integrated_lufs"] == pytest.approx(lufs, abs=0.05)
        assert ch.clips[-1][1] / 1000 < row["seconds"]


def test_byte_identical_and_a_plain_zip_container(books):
    (a, b), _ = books
    assert (a.book_dir / "合成之书.epub").read_bytes() == (b.book_dir / "合成之书.epub").read_bytes()
    z = zipfile.ZipFile(a.book_dir / "合成之书.epub")
    first = z.infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED and first.extra == b""
    assert z.read("mimetype") == b"application/epub+zip"
    assert sorted(p.name for p in a.book_dir.iterdir()) == sorted(p.name for p in a.files)   # no temps left


def test_without_the_text_record_the_segments_text_is_used(books):
    _, bare = books
    units = {c: [t for seg in texts for t in seg.split("\n")] for c, (_, texts, _) in enumerate(BOOK)}
    epub = assert_read_along(bare.book_dir / "合成之书.epub", bare.book_dir, units)
    assert "＊＊＊" not in epub.chapters()[0].text


def test_clock_and_language():
    assert clock(0) == "0:00:00.000" and clock(3_723_004) == "1:02:03.004"
    assert language_tag("zh_CN") == "zh-CN" and language_tag("und") == "und" and language_tag("") == "und"
    assert language_tag("中文") == "und"


def test_package_follows_the_text_record(tmp_path):
    """A book planned without text.json gets its text from the manifest; a text.json that adds a silent
    paragraph rebuilds the EPUB (the chapters' text is part of the book's signature); then nothing changes."""
    from tasks import stages
    from tasks.bookdir import TEXT_JSON
    from tasks.synthesize.render import synthesize_book
    from tests.tasks.synthesize.test_guard import TEXTS, StubEngine, make_book

    book_dir, _ = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    package = PackageOptions(formats=("epub",))
    stages.package(book_dir, package=package)
    epub_path = book_dir / "测试.epub"
    assert "＊＊＊" not in Epub(epub_path).chapters()[0].text
    chapters = [{"index": 0, "title": "第一章", "paragraphs": [TEXTS[0], "＊＊＊", TEXTS[1]]},
                {"index": 1, "title": "第二章", "paragraphs": [TEXTS[2]]}]
    (book_dir / TEXT_JSON).write_text(json.dumps({"chapters": chapters}, ensure_ascii=False), encoding="utf-8")
    stages.package(book_dir, package=package)
    epub = assert_read_along(epub_path, book_dir, {c["index"]: [c["title"], *c["paragraphs"]] for c in chapters})
    assert "＊＊＊" in epub.chapters()[0].text
    report = json.loads((book_dir / "report.json").read_text(encoding="utf-8"))
    assert [r["chapter"] for r in report["files"] if r["format"] == "epub"] == [0, 1]   # fresh, none carried over
    before = epub_path.stat()
    stages.package(book_dir, package=package)
    assert (epub_path.stat().st_ino, epub_path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
