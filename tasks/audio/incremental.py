"""Incremental packaging: a book's outputs are rebuilt only for the chapters whose inputs changed.

Each chapter's input signature (chapter_signature: its segments, title, the book's tags and the options) and
its output files' hashes are kept in `.chapters.json` beside the outputs.  A chapter whose signature and files
are unchanged is neither assembled nor written again.  Chapters come from the manifest: done rows' stored
audio, and (with allow_gaps) silence of the expected duration for the others.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from engine.atomic import file_sha256, read_json
from manifests.crashpoints import crashpoint
from manifests.status import STATUS_DONE
from manifests.store import load
from tasks.audio.assemble import (
    AssembleOptions,
    ChapterAudio,
    Piece,
    assemble_arrays,
    assemble_chapter,
    load_piece,
    trim_bounds,
)
from tasks.audio.names import chapter_file_names
from tasks.audio.options import PackageOptions
from tasks.audio.package import package_book, report_bytes, write_output
from tasks.audio.readalong import load_text, units_from_segments
from tasks.bookdir import CHAPTERS_JSON, REPORT_NAME, load_meta
from tasks.errors import GapsError
from tasks.synthesize.guard import gap_seconds

SIGNATURE_VERSION = 3                 # bump when the signature's inputs or report.json's rows change


def package_changed(book_dir: Path, assemble: AssembleOptions, package: PackageOptions, allow_gaps: bool = False,
                    report_extra: Callable[[list[dict]], dict] | None = None) -> Path:
    """Assemble every chapter from its stored segment audio and write the outputs (chapter files, M4B,
    subtitles, report.json).  Needs no engine.  The caller holds the book's lock and has removed a killed
    run's temp files (tasks.stages.package).

    Incremental: each chapter's input signature (chapter_signature) and its output files' hashes are kept in
    .chapters.json.  A chapter whose signature and files are unchanged is neither assembled nor written again
    (its report rows are carried over) — unless an M4B is wanted and another chapter changed: the M4B is built
    from every chapter's audio, so then the unchanged chapters are assembled (not re-encoded).  When nothing
    changed, packaging is skipped entirely.

    `report_extra(rows)` gives report.json top-level keys computed from the manifest rows (the stages pass what
    the checks found, tasks.site.qa); when only those changed, report.json alone is rewritten."""
    book_dir = Path(book_dir)
    meta, titles = load_meta(book_dir)
    rows = load(book_dir).to_pylist()
    by_chapter = chapter_rows(book_dir, rows, allow_gaps)
    n_total = max([i + 1 for i in by_chapter] + [len(by_chapter)])
    sigs = {i: chapter_signature(rs, titles.get(i, ""), n_total, meta, assemble, package)
            for i, rs in by_chapter.items()}
    texts = _epub_texts(book_dir, by_chapter) if "epub" in package.formats else None
    state = _read_state(book_dir)
    report = book_dir / REPORT_NAME
    previous = (read_json(report) or None) if state and state.get("report") == _sha_file(report) else None
    same = {i for i in sigs if previous is not None and _chapter_unchanged(book_dir, state, i, sigs[i])}
    book_files = (state or {}).get("book_files", {})
    extra = report_extra(rows) if report_extra else {}
    if (same == set(sigs) and state.get("book") == _book_signature(sigs, assemble, package, texts)
            and all(_sha_file(book_dir / n) == h for n, h in book_files.items())):
        if previous is not None and any(previous.get(k) != v for k, v in extra.items()):
            _refresh_report(book_dir, state, {**previous, **extra})
        return book_dir                                    # nothing else changed: the outputs are current
    gaps = [_gap_entry(r) for rs in by_chapter.values() for r in rs if r["status"] != STATUS_DONE]
    chapters = [(i, titles.get(i, ""), _chapter_loader(by_chapter[i], assemble, book_dir))
                for i in sorted(by_chapter)]
    rep = package_book(book_dir, chapters, meta, package, skip=same, previous=previous,
                       extra={**({"gaps": gaps} if gaps else {}), **extra} or None, texts=texts)
    _write_state(book_dir, sigs, n_total, assemble, package, rep.files, titles, texts)
    return book_dir


def chapter_rows(book_dir: Path, rows: list[dict], allow_gaps: bool = False) -> dict[int, list[dict]]:
    """Manifest rows by chapter, in order.  Rows that are not done stop packaging (GapsError) unless
    allow_gaps: then each becomes silence of its expected duration, listed in report.json's "gaps"."""
    missing = [r for r in rows if r["status"] != STATUS_DONE]
    if missing and not allow_gaps:
        r = missing[0]
        raise GapsError(str(book_dir), f"{len(missing)} segments are not rendered (first: chapter {r['chapter'] + 1}, "
                        f"segment {r['segment'] + 1}: {r['status']} {r['error']}".rstrip() +
                        "); rerun to finish pending ones, or pass --allow-gaps to put silence in their place")
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(r["chapter"], []).append(r)
    return out


def _epub_texts(book_dir: Path, by_chapter: dict[int, list[dict]]) -> dict[int, list[str]]:
    """Each chapter's original text (units) for the EPUB: text.json, or for a book planned before it was
    written, the units rebuilt from the manifest's source texts and pauses."""
    texts = load_text(book_dir)
    if texts is None:
        texts = {i: units_from_segments([r["source_text"] for r in rs], [r["pause_after"] for r in rs])
                 for i, rs in by_chapter.items()}
    return texts


def chapter_signature(rows: list[dict], title: str, n_chapters: int, meta, assemble: AssembleOptions,
                      package: PackageOptions) -> str:
    """Hash of everything a chapter's output files depend on: its segments (content keys and takes, or the gap's
    text when not done), pauses and source texts, its title, the chapter count, the book's tags and cover, and the
    assemble/package options."""
    segs = [[_audio_id(r) if r["status"] == STATUS_DONE else f"gap:{r['text']}", r["pause_after"],
             r["source_text"]] for r in rows]
    book = [meta.title, meta.author, meta.language, meta.cover_mime,
            hashlib.sha256(meta.cover or b"").hexdigest()]
    blob = json.dumps([SIGNATURE_VERSION, title, n_chapters, book, segs, _options_json(assemble, package)],
                      ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _audio_id(row: dict) -> str:
    """Which audio a done row stands for: its content key, and the take when it is not the first."""
    take = row.get("take") or 1
    return row["content_key"] if take == 1 else f"{row['content_key']}.t{take}"


def _options_json(assemble: AssembleOptions, package: PackageOptions) -> list[dict]:
    return [asdict(assemble), asdict(package)]


def _book_signature(sigs: dict[int, str], assemble: AssembleOptions, package: PackageOptions,
                    texts: dict | None = None) -> str:
    """Hash of the chapter signatures, the options and (for an EPUB) the chapters' original text."""
    extra = [sorted(texts.items())] if texts is not None else []
    blob = json.dumps([sorted(sigs.items()), _options_json(assemble, package), *extra], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _chapter_unchanged(book_dir: Path, state: dict, index: int, sig: str) -> bool:
    entry = state.get("chapters", {}).get(str(index))
    if not entry or entry.get("signature") != sig or not entry.get("files"):
        return False
    return all(_sha_file(Path(book_dir) / n) == h for n, h in entry["files"].items())


def _sha_file(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def _read_state(book_dir: Path) -> dict:
    data = read_json(Path(book_dir) / CHAPTERS_JSON)
    return data if data.get("version") == SIGNATURE_VERSION else {}


def _write_state(book_dir: Path, sigs: dict[int, str], n_total: int, assemble: AssembleOptions,
                 package: PackageOptions, files: list[Path], titles: dict[int, str], texts: dict | None = None) -> None:
    """.chapters.json, written last (atomically): a crash before it only means the next run repackages."""
    written = {Path(p).name for p in files}
    chapters, chapter_names = {}, set()
    for i, sig in sorted(sigs.items()):
        names = [n for n in chapter_file_names(i, n_total, titles.get(i, ""), package.formats, package.subtitles)
                 if n in written]
        chapter_names.update(names)
        chapters[str(i)] = {"signature": sig, "files": {n: _sha_file(Path(book_dir) / n) for n in names}}
    book_files = {n: _sha_file(Path(book_dir) / n) for n in sorted(written - chapter_names)}
    data = {"version": SIGNATURE_VERSION, "book": _book_signature(sigs, assemble, package, texts), "chapters": chapters,
            "book_files": book_files, "report": book_files.get(REPORT_NAME)}
    write_output(Path(book_dir) / CHAPTERS_JSON, _state_bytes(data))


def _refresh_report(book_dir: Path, state: dict, data: dict) -> None:
    """Rewrite report.json alone (its extra keys changed, no output did) and record its new hash in
    .chapters.json, so the next packaging still finds it current."""
    write_output(Path(book_dir) / REPORT_NAME, report_bytes(data))
    sha = _sha_file(Path(book_dir) / REPORT_NAME)
    state = {**state, "report": sha, "book_files": {**state.get("book_files", {}), REPORT_NAME: sha}}
    write_output(Path(book_dir) / CHAPTERS_JSON, _state_bytes(state))


def _state_bytes(state: dict) -> bytes:
    """.chapters.json's bytes for what it holds."""
    return (json.dumps(state, ensure_ascii=False, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _gap_entry(r: dict) -> dict:
    return {"chapter": r["chapter"], "segment": r["segment"], "status": r["status"], "error": r["error"] or "",
            "seconds": round(gap_seconds(r["text"]), 3), "text": r["source_text"]}


def _chapter_loader(rows: list[dict], opts: AssembleOptions, book_dir: Path) -> Callable[[], ChapterAudio]:
    """Zero-argument function assembling the chapter: stored audio for done rows, silence of the expected
    duration for the others (only reachable with allow_gaps)."""
    def assemble() -> ChapterAudio:
        if all(r["status"] == STATUS_DONE for r in rows):
            ch = assemble_chapter([Piece(Path(book_dir) / r["audio_path"], r["pause_after"],
                                         r["source_text"], r["voice_id"]) for r in rows], opts)
        else:     # trim the real pieces here and assemble untrimmed, so that the silence survives
            arrays = []
            for r in rows:
                if r["status"] == STATUS_DONE:
                    a = load_piece(Piece(Path(book_dir) / r["audio_path"]), opts.sample_rate)
                    if opts.trim:
                        s, e = trim_bounds(a, opts.sample_rate, opts)
                        a = a[s:e]
                    arrays.append(a)
                else:
                    arrays.append(np.zeros(int(round(gap_seconds(r["text"]) * opts.sample_rate)),
                                           dtype=np.float32))
            ch = assemble_arrays(arrays, [r["pause_after"] for r in rows], [r["source_text"] for r in rows],
                                 replace(opts, trim=False), [r["voice_id"] for r in rows])
        crashpoint("assemble")
        return ch
    return assemble
