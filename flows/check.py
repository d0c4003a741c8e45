"""`chattts-render check AUDIO... --text TEXT | --texts TSV`: the QA checks (tasks/qa/) on any recordings.

Exit 1 when any recording's verdict is flag, 0 when every one passes or is inconclusive (reported, not a failure:
the render's re-takes follow the same rule).  Every input is read and checked before a model loads; a bad one is
one line naming it and exit 2, as is a missing qa extra or ASR model (QAUnavailable).  --json prints one object
per recording, one per line (the exit status is the same)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from flows.arguments import EXIT_FAILED, EXIT_OK, UsageError
from tasks.errors import BookError
from tasks.qa.asr import load_transcriber
from tasks.qa.options import QAOptions
from tasks.qa.recordings import LANGUAGE_CHOICES, check_recordings, read_recording, read_texts
from tasks.qa.speaker import load_encoder
from tasks.qa.verdict import FLAG

TRANSCRIPT_COLUMN = 48            # characters of the transcript the table shows


def add_check_command(sub) -> argparse.ArgumentParser:
    d = QAOptions()
    p = sub.add_parser("check", help="Hear recordings and check them against their texts (ASR, voice drift).",
                       description="Transcribe recordings with Whisper and compare them with what they should say; "
                                   "with --voice-ref, also compare their speaker with a reference clip.",
                       epilog="Exit status: 0 when every recording passes or is inconclusive (a short text "
                              "heard in part, or Whisper too unsure to judge: reported, not a failure), 1 when any "
                              "is flagged, 2 for bad input or usage or a missing qa extra or ASR model. The same "
                              "with --json.")
    p.add_argument("audio", nargs="*", help="recordings (any format soundfile or ffmpeg reads)")
    texts = p.add_mutually_exclusive_group(required=True)
    texts.add_argument("--text", default=None, help="what every recording given should say")
    texts.add_argument("--texts", default=None, help="a file<TAB>text TSV (files relative to it); the recordings "
                                                     "given on the command line, if any, are checked against it")
    p.add_argument("--voice-ref", default=None, help="a recording of the intended voice: adds the drift gate "
                                                     f"(similarity below {d.drift_floor:g} is flagged)")
    p.add_argument("--asr-model", default=d.asr_model,
                   help="a faster-whisper model name (tiny, base, small, …) or a local model directory "
                        "(default %(default)s)")
    p.add_argument("--language", choices=LANGUAGE_CHOICES, default="auto",
                   help="the texts' language (default: detected from each text)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=d.device)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for the ASR (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object per recording, one per line")
    p.set_defaults(run="check")
    return p


def cmd_check(a: argparse.Namespace) -> int:
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
