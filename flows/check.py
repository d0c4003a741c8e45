"""`chattts-render check AUDIO... --text TEXT | --texts TSV`: the QA checks (tasks/qa/) on any recordings;
`chattts-render check --acx BOOK_DIR | AUDIO...`: ACX's published limits (tasks/audio/acx.py) on a rendered book's
chapter files (measured when they were packaged, read from report.json) or on any files (measured now).

Exit 1 when any recording's verdict is flag (or any file misses an ACX limit), 0 when every one passes or is
inconclusive (reported, not a failure: the render's re-takes follow the same rule).  Every input is read and checked
before a model loads; a bad one is one line naming it and exit 2, as is a missing qa extra or ASR model
(QAUnavailable).  --json prints one object per recording, one per line (the exit status is the same)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from flows.arguments import EXIT_FAILED, EXIT_OK, UsageError
from tasks.audio.acx import check_audio, check_report, format_acx
from tasks.bookdir import REPORT_NAME, read_report
from tasks.errors import BookError
from tasks.qa.asr import load_transcriber
from tasks.qa.options import QAOptions
from tasks.qa.recordings import check_recordings, read_recording, read_texts
from tasks.qa.speaker import load_encoder
from tasks.qa.verdict import FLAG

TRANSCRIPT_COLUMN = 48            # characters of the transcript the table shows


def cmd_check(a: argparse.Namespace) -> int:
    if a.acx:
        return _acx(a)
    if a.text is None and a.texts is None:
        raise UsageError("check: give --text TEXT or --texts TSV (or --acx for ACX's limits)")
    items = _items(a)
    audio = [read_recording(path) for path, _ in items]
    ref_audio = read_recording(Path(a.voice_ref)) if a.voice_ref else None
    if a.threads < 1:
        raise UsageError("--threads must be >= 1")
    opts = QAOptions(asr_model=a.asr_model, device=a.device)
    transcriber = load_transcriber(opts.asr_model, opts.device, a.threads)
    encoder = reference = None
    if ref_audio is not None:
        encoder = load_encoder(opts.device)
        reference = encoder.embed(*ref_audio, opts.min_speech_s)
        if reference.vector is None:
            raise BookError(a.voice_ref, f"only {reference.speech_s:.1f} s of speech; a voice reference needs "
                                         f"{opts.min_speech_s:g} s or more")
    results = check_recordings(items, audio, transcriber, encoder, reference, a.language, opts)
    if a.json:
        for r in results:
            print(json.dumps(r.as_json(), ensure_ascii=False))
    else:
        _table(results, with_similarity=reference is not None)
    return EXIT_FAILED if any(r.verdict == FLAG for r in results) else EXIT_OK


def _acx(a: argparse.Namespace) -> int:
    """--acx: a book folder's chapter files from its report.json, or the files given, measured now."""
    if a.text is not None or a.texts is not None or a.voice_ref is not None:
        raise UsageError("check --acx measures levels only: --text, --texts and --voice-ref do not apply")
    if not a.audio:
        raise UsageError("check --acx: give a rendered book's folder or audio files")
    paths = [Path(p) for p in a.audio]
    if len(paths) == 1 and paths[0].is_dir():
        if not (paths[0] / REPORT_NAME).is_file():
            raise BookError(str(paths[0]), f"no {REPORT_NAME}: not a packaged book's folder")
        results = check_report(read_report(paths[0]))
        if not results:
            raise BookError(str(paths[0] / REPORT_NAME), "lists no chapter files")
    else:
        audio = [read_recording(p) for p in paths]     # a bad file: one line naming it, before any is measured
        results = [check_audio(str(p), *a) for p, a in zip(paths, audio, strict=True)]
    if a.json:
        for r in results:
            print(json.dumps(r.as_json(), ensure_ascii=False))
    else:
        print(format_acx(results))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _items(a: argparse.Namespace) -> list[tuple[Path, str]]:
    if a.text is not None:
        if not a.audio:
            raise UsageError("check: give the recordings to check with --text")
        if not a.text.strip():
            raise UsageError("check: --text is empty")
        return [(Path(p), a.text) for p in a.audio]
    items = read_texts(Path(a.texts))
    if not a.audio:
        return items
    by_file = {p.resolve(): (p, t) for p, t in items}
    missing = [p for p in a.audio if Path(p).resolve() not in by_file]
    if missing:
        raise BookError(a.texts, f"no text for {missing[0]}")
    return [by_file[Path(p).resolve()] for p in a.audio]


def _table(results, with_similarity: bool) -> None:
    width = max(len(Path(r.file).name) for r in results)
    sim_head = "   sim" if with_similarity else ""
    print(f"{'verdict':<12} {'cer':>4}{sim_head}  {'file':<{width}}  transcript / reason")
    for r in results:
        sim = (f"  {r.similarity:.2f}" if r.similarity is not None else "     -") if with_similarity else ""
        said = r.transcript if len(r.transcript) <= TRANSCRIPT_COLUMN else r.transcript[:TRANSCRIPT_COLUMN - 1] + "…"
        print(f"{r.verdict:<12} {r.cer:4.2f}{sim}  {Path(r.file).name:<{width}}  {said}")
        if r.reason:
            print(f"{'':<12} {'':>4}{' ' * len(sim)}  {'':<{width}}  ({r.reason})")
    counts = {v: sum(r.verdict == v for r in results) for v in ("pass", "inconclusive", "flag")}
    print(f"{len(results)} recording(s): " + ", ".join(f"{n} {v}" for v, n in counts.items()))
