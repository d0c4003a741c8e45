"""The command line's shared options and what they become: the option groups several commands take (flows/cli.py
builds the parser from them), a render's plain parameters, a command's RenderOptions, and the notes and the
version the CLI prints.  No command runs here (flows/commands.py)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from engine.api import BACKENDS, EngineOptions
from tasks.book import LANGUAGE_CHOICES
from tasks.errors import BookError
from tasks.fleet import storage

PROG = "chattts-render"
# Exit statuses of every command (README, "Exit codes"):
EXIT_OK = 0               # done; `check`: no recording flagged
EXIT_FAILED = 1           # a render failed (rerun resumes); `check`: a recording flagged
EXIT_USAGE = 2            # a user mistake (bad option, file, book; a missing extra or model): one line
EXIT_ENVIRONMENT = 3      # the machine: a tool missing (ffmpeg), no GPU for --device cuda, an unusable output folder
ROOT = Path(__file__).resolve().parents[1]        # the checkout (pyproject.toml), for package_version()


class UsageError(Exception):
    """Bad arguments or option values: exit 2."""


def out(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="output root: a folder (default: ./output) or a store URL "
                                                "(s3://bucket/prefix …, see --scratch)")
    p.add_argument("--scratch", default=None, help="with --out URL: the local work folder (default: "
                                                    "~/.cache/chattts-render/scratch; deletable any time)")


def text(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lexicon", default=None,
                   help="a word<TAB>replacement file (after the global ~/.config/chattts-render/lexicon.tsv "
                        "and the book's <stem>.lexicon.tsv)")
    p.add_argument("--no-t2s", action="store_true", help="keep Traditional characters")
    p.add_argument("--language", choices=LANGUAGE_CHOICES, default="auto",
                   help="the book's reading language: zh (Chinese), en (English), or auto (default: the book's "
                        "declared language unless its text says otherwise, else a guess from the text)")


def cast(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cast", default=None, help="a cast file (TOML): voices for the narrator, quoted speech "
                                               "and named characters")


def engine(p: argparse.ArgumentParser) -> None:
    d = EngineOptions()
    p.add_argument("--model", default=d.model,
                   help="hf (Hugging Face cache/hub, default), a local ChatTTS asset dir, "
                        "or random-tiny / random-full (random weights, for tests and benchmarks)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=d.device)
    p.add_argument("--dtype", choices=("auto", "fp32", "bf16", "fp16"), default=d.dtype)
    p.add_argument("--int8", action="store_true",
                   help="CPU only: INT8 GPT weights (weight-only int8 with our CPU kernel, W8A8 dynamic "
                        "quantization without it)")
    p.add_argument("--backend", choices=BACKENDS, default=d.backend,
                   help="what runs the model: torch (our engine, default) or onnx (the same scheduler and sampling, "
                        "the model calls through ONNX Runtime: the onnx extra; docs/onnx.md)")
    p.add_argument("--compile", action="store_true",
                   help="CUDA only: CUDA graphs of the decode step (not torch.compile)")
    p.add_argument("--max-batch", type=int, default=d.max_batch,
                   help="rows decoded together at most, >= 1 (default: 32 on CPU, 128 on CUDA; fewer when "
                        "memory is short)")
    p.add_argument("--threads", type=int, default=None,
                   help=f"torch CPU threads, >= 1 (default: torch's, one per core); more than the {cpu_count()} "
                        "CPUs here share them: slower, never faster")


def qa(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qa", choices=("off", "suspect", "full"), default=None,
                   help="hear every segment (full: ASR + speaker check, flagged ones re-taken; suspect: ASR only "
                        "where the duration or the voice is odd; default: full for a real model when the qa "
                        "extra is installed, off for random weights)")
    p.add_argument("--asr-model", default=None, help="the ASR model of --qa: a faster-whisper name (Hugging "
                   "Face cache/hub, default base) or a local model directory")


def voice(p: argparse.ArgumentParser, **kw) -> None:
    p.add_argument("--voice", **kw, help="seed:N, clip:RECORDING (3-30 s, transcript in RECORDING.txt or "
                   "--clip-text), a saved voice's NAME, a file holding a voice string, or the string itself")
    p.add_argument("--clip-text", default=None, help="the transcript of a clip:RECORDING voice")


def render_params(a: argparse.Namespace) -> dict:
    """The plain parameters of a render (the flow's and the deployment's parameters too)."""
    return {"book": str(a.book), "out": str(a.out) if a.out else None, "voice": a.voice,
            "formats": a.format.split(","), **engine_params(a), "allow_gaps": a.allow_gaps,
            "chapters": a.chapters, "lexicon": a.lexicon, "t2s": not a.no_t2s, "guard": not a.no_guard,
            "guard_attempts": a.guard_attempts, "clip_text": a.clip_text, "voice_anchor": a.voice_anchor,
            "cast": a.cast, "scratch": a.scratch, "qa": a.qa, "asr_model": a.asr_model, "language": a.language}


def engine_params(a: argparse.Namespace) -> dict:
    return {"model": a.model, "device": a.device, "dtype": a.dtype, "int8": a.int8, "compile": a.compile,
            "backend": a.backend, "max_batch": a.max_batch, "threads": a.threads}


def options(book: Path | str, need_book: bool = True, **params):
    """RenderOptions for a command (ValueError → a usage error); with need_book, the book must be a file
    (BookError).  status and package work from the book dir alone: without need_book a book URL is never
    downloaded (its name gives the book dir)."""
    from tasks.options import options_from_params

    if not need_book and storage.is_url(str(book)):                # where a render would have fetched it to
        book = storage.fetched_book_path(str(book), params.get("scratch"))
    try:
        opts = options_from_params(str(book), **params)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if need_book and not opts.book.is_file():
        raise BookError(str(opts.book), "no such file" if not opts.book.exists() else "not a file")
    return opts


def note_threads(opts) -> None:
    """One line on stderr when --threads asks for more threads than this process has CPUs (they share them)."""
    import sys

    threads, cpus = opts.engine.threads, cpu_count()
    if threads is not None and threads > cpus:
        print(f"{PROG}: note: --threads {threads} is more than the {cpus} CPUs this process may use; the threads "
              "share them (slower, never faster)", file=sys.stderr)


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                           # no affinity masks on this OS
        return os.cpu_count() or 1


def package_version() -> str:
    """This package's version: its installed metadata, else (a checkout that is not installed) pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PROG)
    except PackageNotFoundError:
        import tomllib

        return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
