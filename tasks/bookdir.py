"""The files of a book's output folder, OUT/<slug>/: their names, and the readers of what one stage leaves for the
next.  Every stage names these files through this module (and manifests/ for manifest/).

    OUT/<slug>/                 book_slug(book path)
      book.json                 BOOK_JSON: title, author, language, source, cover file, chapter titles (book_json);
                                READING_LANGUAGE: the language prepare read the text in (zh | en: reading_language)
      text.json                 TEXT_JSON: each chapter's original title and paragraphs (read-along, the player)
      coverage.json             COVERAGE_JSON: the text audit's per-chapter report and what was set aside, why
      cover.png|jpg             the book's cover, as the book had it
      manifest/                 manifests/: the Parquet parts, source.json, the lock
      segments/<k[:2]>/<k>.flac audio_relpath(content key): every segment's audio, content-addressed;
                                take_relpath(key, n): take n (<k>.t<n>.flac from the second take on), and
                                check_relpath(key, n): what the checks (tasks/qa) found in that take
      qa.json                   QA_JSON: each voice's reference for the drift gate, frozen (tasks/synthesize/proof.py)
      fixes.json                FIXES_JSON: per-segment overrides of `chattts-render fix` (tasks/plan/fixes.py)
      report.json               REPORT_NAME: what packaging wrote (chapters, files, loudness, gaps)
      .chapters.json            CHAPTERS_JSON: per-chapter input signatures of the last packaging (incremental)
      index.html                PAGE_NAME: the book's web player
      qa.html                   QA_PAGE: what the checks found (tasks/site/qa.py), written beside the player
      voices/                   VOICES_DIRNAME: an audition (voices.json, index.html, one file per candidate)
      .shards.json              SHARD_FILE: a sharded render's split (fleet/shards.py)
    <store prefix>/.lease.json  LEASE_NAME: the store render's lease (fleet/lease.py)
"""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from engine.atomic import read_json
from tasks.book import LANGUAGES, Book, BookMeta, Chapter, Language

DEFAULT_OUT = Path("output")              # OUT when none is given, relative to the working directory
BOOK_JSON = "book.json"
READING_LANGUAGE = "reading_language"     # book.json's key: the language the text was segmented in
TEXT_JSON = "text.json"
COVERAGE_JSON = "coverage.json"
REPORT_NAME = "report.json"
CHAPTERS_JSON = ".chapters.json"
QA_JSON = "qa.json"
FIXES_JSON = "fixes.json"
PAGE_NAME = "index.html"
QA_PAGE = "qa.html"
VOICES_DIRNAME = "voices"
SHARD_FILE = ".shards.json"
LEASE_NAME = ".lease.json"
SEGMENTS_DIRNAME = "segments"
AUDIO_EXT = ".flac"
CHECK_EXT = ".qa.json"
SLUG_MAX_CHARS = 80


def book_slug(path: Path) -> str:
    """OUT/<slug>: the book file's stem, made safe (letters of any script, digits, '-', '_', '.')."""
    stem = unicodedata.normalize("NFC", Path(path).stem)
    slug = re.sub(r"[^\w.-]+", "-", stem, flags=re.UNICODE).strip("-.") or "book"
    return slug[:SLUG_MAX_CHARS]


def audio_relpath(key: str) -> str:
    """A segment's audio file, relative to the book folder, named by its content key (its first take)."""
    return take_relpath(key, 1)


def take_relpath(key: str, take: int) -> str:
    """Take `take` (1-based) of a segment: the first is audio_relpath(key); a re-take is <key>.t<take>.flac."""
    if take < 1:
        raise ValueError("takes are 1-based")
    return f"{SEGMENTS_DIRNAME}/{key[:2]}/{key}{'' if take == 1 else f'.t{take}'}{AUDIO_EXT}"


def check_relpath(key: str, take: int) -> str:
    """The check result of a take (JSON: transcript, error rate, speaker embedding, verdict), beside its audio:
    a check belongs to its audio, so a resumed render never checks a take twice."""
    return take_relpath(key, take)[: -len(AUDIO_EXT)] + CHECK_EXT


def cover_file(cover: bytes) -> str:
    """The cover's file name in the book folder (PNG or JPEG, by its magic bytes)."""
    return "cover.png" if cover[:4] == b"\x89PNG" else "cover.jpg"


def book_json(book: Book) -> dict:
    """What book.json holds for `book` (without `cover_file`, which the writer adds when there is a cover)."""
    m = book.meta
    return {"title": m.title, "author": m.author, "language": m.language, "source_path": m.source_path,
            "source_format": m.source_format, "encoding": m.encoding, "cover_mime": m.cover_mime,
            "chapters": [{"index": c.index, "title": c.title} for c in book.chapters]}


def text_json(book: Book) -> dict:
    """What text.json holds: every chapter's original title and paragraphs."""
    return {"chapters": [{"index": c.index, "title": c.title, "paragraphs": list(c.paragraphs)}
                         for c in book.chapters]}


def json_bytes(data) -> bytes:
    """The UTF-8 JSON these files are written as (readable, non-ASCII kept)."""
    return json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")


def read_book_json(book_dir: Path) -> dict:
    """book.json as written; {} when missing or unreadable (a page or a listing shows what there is)."""
    return read_json(Path(book_dir) / BOOK_JSON)


def reading_language(book_dir: Path) -> Language:
    """The reading language prepare resolved for the book (book.json); "zh" for a book planned before it was kept."""
    lang = read_book_json(book_dir).get(READING_LANGUAGE, "zh")
    return lang if lang in LANGUAGES else "zh"


def read_report(book_dir: Path) -> dict:
    """report.json; {} when the book was never packaged."""
    return read_json(Path(book_dir) / REPORT_NAME)


def load_meta(book_dir: Path) -> tuple[BookMeta, dict[int, str]]:
    """BookMeta (cover included) and chapter titles from book.json, for packaging without the book (raises
    when book.json is missing: a book that was never prepared cannot be packaged)."""
    info = json.loads((Path(book_dir) / BOOK_JSON).read_text(encoding="utf-8"))
    cover = (Path(book_dir) / info["cover_file"]).read_bytes() if info.get("cover_file") else None
    meta = BookMeta(title=info["title"], author=info["author"], language=info["language"],
                    source_path=info["source_path"], source_format=info["source_format"],
                    encoding=info["encoding"], cover=cover, cover_mime=info.get("cover_mime", ""))
    return meta, {c["index"]: c["title"] for c in info["chapters"]}


def load_chapters(book_dir: Path) -> dict[int, Chapter] | None:
    """Each chapter's original title and paragraphs from text.json; None for a book planned before text.json
    was written."""
    try:
        info = json.loads((Path(book_dir) / TEXT_JSON).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return {c["index"]: Chapter(c["index"], c["title"], tuple(c["paragraphs"])) for c in info["chapters"]}
