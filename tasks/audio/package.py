"""Packaging: chapter audio -> chapter files (flac/wav/mp3/opus/m4a), one M4B, one read-along EPUB
(tasks.audio.epub3), subtitles and report.json.

The orchestration: each chapter is resampled and loudness-normalized once (prepare_chapter), then written in
every chapter format (tasks.audio.verify encodes and measures, tasks.audio.encode writes, tasks.audio.names
names) and its subtitles; the M4B and the EPUB are built from every chapter's audio in reading order.  A chapter's
files are encoded on a second thread (CHAPTER_ENCODERS) while the next chapter is prepared and, after the last, the
M4B is encoded: ffmpeg's encoders run on one core each, and a book's M4B and its chapter files are independent.
Every output is written atomically (engine.atomic) and its bytes depend only on the inputs (ffmpeg runs bit-exact
with no varying metadata), so a killed-and-resumed render packages byte-identical files.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from engine.atomic import scratch, write_bytes
from manifests.crashpoints import crashpoint
from tasks.audio.assemble import ChapterAudio
from tasks.audio.encode import LOSSLESS, OPUS_FALLBACK_RATE, OPUS_RATES, chapter_tags, resample
from tasks.audio.epub3 import encode_chapter, write_epub
from tasks.audio.ffmpeg import find_tool
from tasks.audio.loudness import normalize
from tasks.audio.names import BOOK_FORMATS, book_stem, chapter_file_names, chapter_stem, inside
from tasks.audio.options import PackageOptions, PreparedChapter
from tasks.audio.readalong import read_along
from tasks.audio.subtitles import by_sentence, render, timed
from tasks.audio.tempo import check_tool as check_tempo_tool, stretch_chapter
from tasks.audio.verify import PRE_LIMIT_MARGIN_DB, FileReport, encode_verified
from tasks.book import BookMeta
from tasks.bookdir import REPORT_NAME
from tasks.errors import OutputError


def _at_package_file() -> None:
    crashpoint("package-file")           # tests: an output's temp file is complete, not yet renamed


def write_output(path: Path, data: bytes) -> None:
    """One non-audio output (subtitles, report.json, .chapters.json), atomically."""
    write_bytes(path, data, before_replace=_at_package_file)


def _output_folder(book_dir: Path) -> Path:
    """book_dir, created; OutputError when it cannot be written (a file in its place, no permission,
    a read-only filesystem): tried by creating and removing one temp file."""
    book_dir = Path(book_dir)
    try:
        book_dir.mkdir(parents=True, exist_ok=True)
        with scratch(book_dir):
            pass
    except OSError as e:
        raise OutputError(str(book_dir), f"cannot write the output folder ({e.strerror or e})") from None
    return book_dir


def prepare_chapter(chapter: ChapterAudio, opts: PackageOptions) -> PreparedChapter:
    """Stretch to opts.tempo (its cues with it: tasks.audio.tempo), resample to opts.sample_rate, then normalize
    this chapter to the target and limit its true peak.

    Normalization is per chapter: the gain is computed on the final chapter audio (never per segment), so
    every chapter file lands on the target; a book is one voice, so chapter gains stay close together.
    """
    chapter = stretch_chapter(chapter, opts.tempo)
    y = resample(chapter.audio, chapter.sample_rate, opts.sample_rate)
    gain = 0.0
    if opts.normalize and len(y):
        n = normalize(y, opts.sample_rate, opts.target_lufs, opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB)
        y, gain = n.audio, n.gain_db
    return PreparedChapter(y, opts.sample_rate, gain, list(chapter.cues), chapter.sample_rate)


def _write_subtitles(book_dir: Path, stem: str, items, opts: PackageOptions, title: str,
                     meta: BookMeta) -> list[Path]:
    if opts.subtitle_sentences:
        items = by_sentence(items)
    out = []
    for fmt in opts.subtitles:
        path = inside(book_dir, f"{stem}.{fmt}")
        write_output(path, render(fmt, items, title, meta.author, meta.title).encode("utf-8"))
        out.append(path)
    return out


def check_tools(opts: PackageOptions) -> None:
    """Fail before writing anything when a requested format needs ffmpeg/ffprobe and they are missing."""
    if any(f not in LOSSLESS for f in opts.formats):
        find_tool("ffmpeg")
        find_tool("ffprobe")
    if opts.tempo != 1.0:
        check_tempo_tool()


def _chapter_outputs(book_dir: Path, chapter_index: int, n_chapters: int, title: str,
                     prepared: PreparedChapter, meta: BookMeta, opts: PackageOptions
                     ) -> tuple[list[Path], list[FileReport]]:
    tags = chapter_tags(chapter_index, n_chapters, title, meta)
    paths: list[Path] = []
    reports: list[FileReport] = []
    for fmt in opts.formats:
        if fmt in BOOK_FORMATS:
            continue
        path = inside(book_dir, f"{chapter_stem(chapter_index, n_chapters, title, fmt)}.{fmt}")
        audio, sr = prepared.audio, prepared.sample_rate
        if fmt == "opus" and sr not in OPUS_RATES:
            audio, sr = resample(audio, sr, OPUS_FALLBACK_RATE), OPUS_FALLBACK_RATE
        reports.append(encode_verified(path, fmt, audio, sr, tags, meta, opts, chapter_index,
                                       before_replace=_at_package_file))
        paths.append(path)
    if opts.subtitles and prepared.cues:
        stem = chapter_stem(chapter_index, n_chapters, title, "srt")
        paths += _write_subtitles(book_dir, stem, timed(prepared.cues, prepared.source_rate), opts, title, meta)
    return paths, reports


ChapterInput = ChapterAudio | Callable[[], ChapterAudio]
ChapterFiles = tuple[list[Path], list[FileReport]]     # a chapter's output files and their reports, in order
CHAPTER_ENCODERS = 1      # threads writing chapter files beside the main one (which prepares the next chapter, then
                          # encodes the M4B): one, so at most two chapters' audio are in memory; 0: every file on the
                          # calling thread, one after another (benchmarks/package_overlap.py compares the two)


class _InPlace:
    """An executor that runs each job where it is submitted (CHAPTER_ENCODERS = 0)."""

    def __enter__(self) -> _InPlace:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., ChapterFiles], /, *args: object) -> Future[ChapterFiles]:
        done: Future[ChapterFiles] = Future()
        done.set_result(fn(*args))
        return done


@dataclass(frozen=True)
class Report:
    book_dir: Path
    files: list[Path]              # every file written, report.json last
    loudness: list[FileReport]     # one per audio file
    data: dict                     # what report.json holds

    @property
    def path(self) -> Path:
        return self.book_dir / REPORT_NAME


def package_book(book_dir: Path, chapters: Sequence[tuple[int, str, ChapterInput]], meta: BookMeta,
                 opts: PackageOptions = PackageOptions(), *, skip: Collection[int] = (),
                 previous: Mapping | None = None, extra: Mapping | None = None,
                 texts: Mapping[int, Sequence[str]] | None = None) -> Report:
    """Chapter files, `<book>.m4b` (chapters at the exact chapter starts, title/author/cover), `<book>.epub`
    (read-along), subtitles and report.json in book_dir, all written atomically and deterministically.

    `chapters` is (chapter index, title, ChapterAudio or a zero-argument function returning it), in reading
    order; with functions at most two chapters are in memory at a time, one being prepared and one being encoded
    (CHAPTER_ENCODERS; the M4B's audio goes through a temp file).
    No engine import: this works from stored segment audio alone.  A killed run's temp files are not removed
    here (another writer may be alive): tasks.stages.package removes them under the book's lock first.

    Incremental (tasks.audio.incremental decides): chapters in `skip` already have current output files; their
    report rows come from `previous` (the last report.json) and their files are not written again.  Their
    audio is still loaded when an M4B or an EPUB is wanted.  `extra` adds top-level keys to report.json.
    `texts` (chapter index -> its units: title, paragraphs) is the EPUB's original text; a chapter without
    one gets its text from its segments' source texts (tasks.audio.readalong).
    """
    check_tools(opts)
    book_dir = _output_folder(book_dir)
    skip = frozenset(skip) if previous else frozenset()
    previous = previous or {}
    n = len(chapters)
    if len({i for i, _, _ in chapters}) != n:
        raise ValueError("chapter indices must be unique")
    n_total = max([i + 1 for i, _, _ in chapters] + [n])
    want_m4b = "m4b" in opts.formats
    want_epub = "epub" in opts.formats
    book_wide = want_m4b or want_epub                     # built from every chapter's audio
    stem = book_stem(meta.title)
    epub_name = f"{book_stem(meta.title, 'epub')}.epub"
    epub_chapters = []
    files: list[Path] = []
    reports: list[FileReport] = []
    parts: list[Future[ChapterFiles] | ChapterFiles] = []    # per chapter, in reading order: its files, its EPUB report
    book_files: list[Path] = []                           # the EPUB and the M4B, listed after every chapter's files
    chapter_rows: list[dict] = []
    marks: list[tuple[int, int, str]] = []               # (start, end, title) at opts.sample_rate
    book_items = []
    pos = 0
    with (ThreadPoolExecutor(CHAPTER_ENCODERS, thread_name_prefix="chapter-files") if CHAPTER_ENCODERS
          else _InPlace() as encoder,
          scratch(book_dir, ".f32") if want_m4b else nullcontext() as raw_path,   # the M4B's audio, <f4
          scratch(book_dir, directory=True) if want_epub else nullcontext() as epub_work):   # the EPUB's audio
        with open(raw_path, "wb") if raw_path is not None else nullcontext() as raw:
            for index, title, item in chapters:
                if index in skip:                         # outputs current: carry the report rows over
                    chapter_rows += [r for r in previous["chapters"] if r["index"] == index]
                    parts.append(([p for p in (inside(book_dir, name) for name in chapter_file_names(
                        index, n_total, title, opts.formats, opts.subtitles)) if p.exists()],
                        [FileReport.from_json(r) for r in previous["files"]
                         if r["chapter"] == index and r["format"] != "epub"]))
                    if not book_wide:
                        continue
                ch = item() if callable(item) else item
                prepared = prepare_chapter(ch, opts)
                del ch
                cues = timed(prepared.cues, prepared.source_rate)    # the subtitles' milliseconds
                if index not in skip:
                    _settle(parts)                        # the previous chapter's files first: two chapters at most
                    parts.append(encoder.submit(_chapter_outputs, book_dir, index, n_total, title, prepared, meta,
                                                opts))
                    chapter_rows.append({"index": index, "title": title,
                                         "seconds": round(len(prepared.audio) / prepared.sample_rate, 3),
                                         "gain_db": round(prepared.gain_db, 3),
                                         "cues_ms": [[t.start_ms, t.end_ms] for t in cues]})
                if raw is not None:
                    raw.write(np.ascontiguousarray(prepared.audio, dtype="<f4").tobytes())
                    marks.append((pos, pos + len(prepared.audio), title))
                    book_items += timed(prepared.cues, prepared.source_rate,
                                        Fraction(pos, prepared.sample_rate))
                    pos += len(prepared.audio)
                if epub_work is not None:
                    text = read_along(title, (texts or {}).get(index), cues)
                    ech, rep = encode_chapter(epub_work, epub_name, index, n_total, title, prepared, text, meta, opts)
                    epub_chapters.append(ech)
                    parts.append(([], [rep]))
        if epub_chapters:
            epub = inside(book_dir, epub_name)
            write_epub(epub, meta, epub_chapters, before_replace=_at_package_file)
            book_files.append(epub)
        book_reports = []
        if raw_path is not None and pos > 0:              # while the last chapter's files are encoded
            m4b = inside(book_dir, f"{stem}.m4b")
            audio = np.memmap(raw_path, dtype="<f4", mode="r")                     # (pos,)
            book_reports.append(encode_verified(m4b, "m4b", audio, opts.sample_rate,
                                                chapter_tags(0, 1, meta.title, meta), meta, opts, None, marks,
                                                before_replace=_at_package_file))
            del audio
            book_files.append(m4b)
        for part in _settle(parts):
            files += part[0]
            reports += part[1]
        files += book_files
        reports += book_reports
        if raw_path is not None and pos > 0 and opts.subtitles and book_items:
            taken = {p.name for p in files}
            sub_stem = stem if not any(f"{stem}.{f}" in taken for f in opts.subtitles) else f"{stem} (book)"
            files += _write_subtitles(book_dir, sub_stem, book_items, opts, meta.title, meta)
    names = [p.name for p in files]
    if len({x.casefold() for x in names}) != len(names):
        raise AssertionError(f"two outputs share a name in {book_dir}")
    data = {**_report_data(meta, opts), "chapters": chapter_rows, "files": [r.as_json() for r in reports],
            **(extra or {})}
    report_path = inside(book_dir, REPORT_NAME)
    write_output(report_path, report_bytes(data))
    return Report(book_dir, files + [report_path], reports, data)


def _settle(parts: list[Future[ChapterFiles] | ChapterFiles]) -> list[ChapterFiles]:
    """parts with every chapter's encoding waited for (its error raised here), in place."""
    done = [p.result() if isinstance(p, Future) else p for p in parts]
    parts[:] = done
    return done


def report_bytes(data: dict) -> bytes:
    """report.json's bytes for what it holds."""
    return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _report_data(meta: BookMeta, opts: PackageOptions) -> dict:
    """report.json's head: the book and how it was measured."""
    return {
        "book": meta.title,
        "author": meta.author,
        "sample_rate": opts.sample_rate,
        "formats": list(opts.formats),
        "tempo": opts.tempo,
        "loudness": {"standard": "ITU-R BS.1770-4 / EBU R128 (pyloudnorm K-weighting, gated)",
                     "normalization": "per chapter" if opts.normalize else "off",
                     "target_lufs": opts.target_lufs, "true_peak_ceiling_dbtp": opts.true_peak_dbtp,
                     "true_peak": "4x oversampled", "measured_on": "decoded final files"},
    }
