"""Packaging: chapter audio -> chapter files (flac/wav/mp3/opus/m4a), one M4B, one read-along EPUB
(tasks.audio.epub3), subtitles and report.json.

The orchestration: each chapter is resampled and loudness-normalized once (prepare_chapter), then written in
every chapter format (tasks.audio.verify encodes and measures, tasks.audio.encode writes, tasks.audio.names
names) and its subtitles; the M4B and the EPUB are built from every chapter's audio in reading order.  Each output
is a writer (ChapterFileWriter, M4BWriter, ReadAlongWriter: add(chapter) in reading order, then close()).  A chapter's
files are encoded on a second thread (CHAPTER_ENCODERS) while the next chapter is prepared and, after the last, the
M4B is encoded: ffmpeg's encoders run on one core each, and a book's M4B and its chapter files are independent.
Every output is written atomically (engine.atomic) and its bytes depend only on the inputs (ffmpeg runs bit-exact
with no varying metadata), so a killed-and-resumed render packages byte-identical files.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Protocol

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

    def shutdown(self, wait: bool = True) -> None:
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


@dataclass(frozen=True)
class Chapter:
    """One chapter as the writers take it."""
    index: int
    title: str
    prepared: PreparedChapter | None   # None: its outputs are current and no book-wide output needs its audio
    cues: list                         # its subtitles' timed items (milliseconds)
    current: bool                      # its outputs are current (incremental): carried over, not written again


class Writer(Protocol):
    """An output built chapter by chapter (in reading order), finished by close(); a context manager for what it
    holds while it writes (a thread, temp files)."""

    def __enter__(self) -> Writer: ...

    def __exit__(self, *exc: object) -> None: ...

    def add(self, ch: Chapter) -> None: ...

    def close(self) -> None: ...


class Outputs:
    """What the writers made, in the report's order: per chapter its files and reports (a chapter's files being
    encoded: a Future), then the book's files (the EPUB, the M4B, the book's subtitles) and the M4B's report."""

    def __init__(self) -> None:
        self.parts: list[Future[ChapterFiles] | ChapterFiles] = []
        self.book_files: list[Path] = []
        self.book_reports: list[FileReport] = []

    def settle(self) -> ChapterFiles:
        """Every file and report, the chapters' encoding waited for (its error raised here)."""
        files: list[Path] = []
        reports: list[FileReport] = []
        for paths, reps in _settle(self.parts):
            files += paths
            reports += reps
        return files + self.book_files, reports + self.book_reports


class ChapterFileWriter:
    """Each chapter's files (its formats and subtitles), encoded on the chapter-files thread (CHAPTER_ENCODERS)
    while the next chapter is prepared; a current chapter's files and report rows carried over from `previous`."""

    def __init__(self, book_dir: Path, n_total: int, meta: BookMeta, opts: PackageOptions, previous: Mapping,
                 out: Outputs) -> None:
        self.book_dir, self.n_total, self.meta, self.opts, self.previous, self.out = \
            book_dir, n_total, meta, opts, previous, out
        self.rows: list[dict] = []                   # report.json's "chapters", in reading order
        self._encoder: ThreadPoolExecutor | _InPlace = (
            ThreadPoolExecutor(CHAPTER_ENCODERS, thread_name_prefix="chapter-files") if CHAPTER_ENCODERS
            else _InPlace())

    def __enter__(self) -> ChapterFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._encoder.shutdown(wait=True)            # the file being encoded: finished, or failed

    def add(self, ch: Chapter) -> None:
        if ch.current:                               # outputs current: carry the report rows over
            self.rows += [r for r in self.previous["chapters"] if r["index"] == ch.index]
            names = chapter_file_names(ch.index, self.n_total, ch.title, self.opts.formats, self.opts.subtitles)
            self.out.parts.append(([p for p in (inside(self.book_dir, n) for n in names) if p.exists()],
                                   [FileReport.from_json(r) for r in self.previous["files"]
                                    if r["chapter"] == ch.index and r["format"] != "epub"]))
            return
        assert ch.prepared is not None
        _settle(self.out.parts)                      # the previous chapter's files first: two chapters at most
        self.out.parts.append(self._encoder.submit(_chapter_outputs, self.book_dir, ch.index, self.n_total, ch.title,
                                                   ch.prepared, self.meta, self.opts))
        p = ch.prepared
        self.rows.append({"index": ch.index, "title": ch.title, "seconds": round(len(p.audio) / p.sample_rate, 3),
                          "gain_db": round(p.gain_db, 3), "cues_ms": [[t.start_ms, t.end_ms] for t in ch.cues]})

    def close(self) -> None:
        _settle(self.out.parts)


class M4BWriter:
    """`<book>.m4b`: every chapter's audio appended to a temp file (<f4), encoded once with chapter marks at the
    exact chapter starts (while the last chapter's files are encoded), then the book's subtitles."""

    def __init__(self, book_dir: Path, meta: BookMeta, opts: PackageOptions, out: Outputs) -> None:
        self.book_dir, self.meta, self.opts, self.out = book_dir, meta, opts, out
        self.marks: list[tuple[int, int, str]] = []     # (start, end, title) at opts.sample_rate
        self.items: list = []                            # the book's subtitles, timed on the M4B
        self.pos = 0

    def __enter__(self) -> M4BWriter:
        with ExitStack() as stack:                   # both or neither
            self._raw_path = stack.enter_context(scratch(self.book_dir, ".f32"))   # the M4B's audio, <f4
            self._raw = stack.enter_context(open(self._raw_path, "wb"))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def add(self, ch: Chapter) -> None:
        p = ch.prepared
        assert p is not None
        self._raw.write(np.ascontiguousarray(p.audio, dtype="<f4").tobytes())
        self.marks.append((self.pos, self.pos + len(p.audio), ch.title))
        self.items += timed(p.cues, p.source_rate, Fraction(self.pos, p.sample_rate))
        self.pos += len(p.audio)

    def close(self) -> None:
        self._raw.close()
        if self.pos == 0:
            return
        m4b = inside(self.book_dir, f"{book_stem(self.meta.title)}.m4b")
        audio = np.memmap(self._raw_path, dtype="<f4", mode="r")                     # (pos,)
        self.out.book_reports.append(encode_verified(m4b, "m4b", audio, self.opts.sample_rate,
                                                     chapter_tags(0, 1, self.meta.title, self.meta), self.meta,
                                                     self.opts, None, self.marks, before_replace=_at_package_file))
        del audio
        self.out.book_files.append(m4b)
        if self.opts.subtitles and self.items:
            stem = book_stem(self.meta.title)
            taken = {p.name for p in self.out.settle()[0]}
            sub_stem = stem if not any(f"{stem}.{f}" in taken for f in self.opts.subtitles) else f"{stem} (book)"
            self.out.book_files += _write_subtitles(self.book_dir, sub_stem, self.items, self.opts, self.meta.title,
                                                    self.meta)


class ReadAlongWriter:
    """`<book>.epub`, read-along (tasks.audio.epub3): each chapter's audio encoded into a temp folder with its
    text (`texts`, else its segments' source texts) and timing, the EPUB written from them at the end."""

    def __init__(self, book_dir: Path, n_total: int, meta: BookMeta, opts: PackageOptions,
                 texts: Mapping[int, Sequence[str]], out: Outputs) -> None:
        self.book_dir, self.n_total, self.meta, self.opts, self.texts, self.out = \
            book_dir, n_total, meta, opts, texts, out
        self.name = f"{book_stem(meta.title, 'epub')}.epub"
        self.chapters: list = []

    def __enter__(self) -> ReadAlongWriter:
        self._stack = ExitStack()
        self._work = self._stack.enter_context(scratch(self.book_dir, directory=True))   # the EPUB's audio
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def add(self, ch: Chapter) -> None:
        assert ch.prepared is not None
        text = read_along(ch.title, self.texts.get(ch.index), ch.cues)
        ech, rep = encode_chapter(self._work, self.name, ch.index, self.n_total, ch.title, ch.prepared, text,
                                  self.meta, self.opts)
        self.chapters.append(ech)
        self.out.parts.append(([], [rep]))

    def close(self) -> None:
        if self.chapters:
            epub = inside(self.book_dir, self.name)
            write_epub(epub, self.meta, self.chapters, before_replace=_at_package_file)
            self.out.book_files.append(epub)


def book_writers(book_dir: Path, n_total: int, meta: BookMeta, opts: PackageOptions,
                 texts: Mapping[int, Sequence[str]] | None, out: Outputs) -> list[Writer]:
    """The writers built from every chapter's audio that opts.formats asks for, in the order they take a chapter."""
    wanted: list[Writer] = []
    if "m4b" in opts.formats:
        wanted.append(M4BWriter(book_dir, meta, opts, out))
    if "epub" in opts.formats:
        wanted.append(ReadAlongWriter(book_dir, n_total, meta, opts, texts or {}, out))
    return wanted


def load_chapter(index: int, title: str, item: ChapterInput, opts: PackageOptions, current: bool,
                 audio: bool) -> Chapter:
    """The chapter for the writers: its audio assembled (`item` called) and prepared unless it is current and no
    book-wide output needs it (`audio` False)."""
    if current and not audio:
        return Chapter(index, title, None, [], current)
    prepared = prepare_chapter(item() if callable(item) else item, opts)
    return Chapter(index, title, prepared, timed(prepared.cues, prepared.source_rate), current)


def chapter_count(chapters: Sequence[tuple[int, str, ChapterInput]]) -> int:
    """The chapters the files are numbered for: the highest index + 1, at least how many are given (ValueError
    for an index given twice)."""
    n = len(chapters)
    if len({i for i, _, _ in chapters}) != n:
        raise ValueError("chapter indices must be unique")
    return max([i + 1 for i, _, _ in chapters] + [n])


def package_book(book_dir: Path, chapters: Sequence[tuple[int, str, ChapterInput]], meta: BookMeta,
                 opts: PackageOptions = PackageOptions(), *, skip: Collection[int] = (),
                 previous: Mapping | None = None, extra: Mapping | None = None,
                 texts: Mapping[int, Sequence[str]] | None = None) -> Report:
    """Chapter files, `<book>.m4b` (chapters at the exact chapter starts, title/author/cover), `<book>.epub`
    (read-along), subtitles and report.json in book_dir, all written atomically and deterministically.

    `chapters` is (chapter index, title, ChapterAudio or a zero-argument function returning it), in reading
    order; with functions at most two chapters are in memory at a time, one being prepared and one being encoded
    (CHAPTER_ENCODERS; the M4B's audio goes through a temp file).  No engine import: this works from stored segment
    audio alone.  A killed run's temp files are not removed here (another writer may be alive): tasks.stages.package
    removes them under the book's lock first.

    Incremental (tasks.audio.incremental decides): chapters in `skip` already have current output files; their
    report rows come from `previous` (the last report.json) and their files are not written again.  Their
    audio is still loaded when an M4B or an EPUB is wanted.  `extra` adds top-level keys to report.json.
    `texts` (chapter index -> its units: title, paragraphs) is the EPUB's original text; a chapter without
    one gets its text from its segments' source texts (tasks.audio.readalong).
    """
    check_tools(opts)
    book_dir = _output_folder(book_dir)
    current = frozenset(skip) if previous else frozenset()
    n_total, out = chapter_count(chapters), Outputs()
    with ExitStack() as stack:
        files = stack.enter_context(ChapterFileWriter(book_dir, n_total, meta, opts, previous or {}, out))
        book_wide = [stack.enter_context(w) for w in book_writers(book_dir, n_total, meta, opts, texts, out)]
        for index, title, item in chapters:
            ch = load_chapter(index, title, item, opts, index in current, bool(book_wide))
            for w in [files, *book_wide]:
                w.add(ch)
        for w in [*reversed(book_wide), files]:       # the EPUB, the M4B (the last chapter's files encoding), then
            w.close()                                 # the chapter files waited for
    paths, reports = out.settle()
    if len({p.name.casefold() for p in paths}) != len(paths):
        raise AssertionError(f"two outputs share a name in {book_dir}")
    data = {**_report_data(meta, opts), "chapters": files.rows, "files": [r.as_json() for r in reports],
            **(extra or {})}
    report_path = inside(book_dir, REPORT_NAME)
    write_output(report_path, report_bytes(data))
    return Report(book_dir, paths + [report_path], reports, data)


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
