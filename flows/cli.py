"""chattts-render: the command line, a thin shell over flows.pipeline and the tasks' plain functions.

Exit codes: 0 done; 1 failure during the render (manifest intact, rerun resumes); 2 bad input or usage
(one line on stderr naming the file and the problem; nothing created or overwritten)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

PROG = "chattts-render"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT = 0, 1, 2, 3
COMMANDS = ("render", "status", "inspect", "package")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):                       # argparse's own errors: one line, exit 2
        raise UsageError(message)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("book", type=Path, help="the book: an .epub or a .txt file")
    p.add_argument("--out", type=Path, default=None, help="output root (default: ./output)")


def build_parser() -> dict[str, argparse.ArgumentParser]:
    from engine.api import EngineOptions
    from tasks.audio.package import FORMATS

    d = EngineOptions()
    render = _Parser(prog=PROG, description="Render a book (EPUB or TXT) into an audiobook with ChatTTS. "
                     f"Other commands: {PROG} status|inspect|package BOOK.")
    _common(render)
    render.add_argument("--model", default=d.model,
                        help="hf (Hugging Face cache/hub, default), a local ChatTTS asset dir, "
                             "or random-tiny / random-full (random weights, for tests and benchmarks)")
    render.add_argument("--voice", default=None,
                        help="seed:N, a file holding a speaker-embedding string, or the string itself "
                             "(default: the book's stored voice, else seed:2222)")
    render.add_argument("--device", choices=("cpu", "cuda"), default=d.device)
    render.add_argument("--dtype", choices=("auto", "fp32", "bf16", "fp16"), default=d.dtype)
    render.add_argument("--int8", action="store_true", help="CPU: INT8 dynamic quantization of the GPT")
    render.add_argument("--compile", action="store_true", help="CUDA: compiled decode step")
    render.add_argument("--max-batch", type=int, default=d.max_batch,
                        help="rows decoded together at most (default: 32 on CPU, 128 on CUDA; fewer when memory is short)")
    render.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    render.add_argument("--format", default="flac",
                        help=f"comma-separated output formats: {','.join(FORMATS + ('m4b',))} (default flac)")
    render.add_argument("--lexicon", default=None,
                        help="a word<TAB>replacement file (after the global ~/.config/chattts-render/lexicon.tsv "
                             "and the book's <stem>.lexicon.tsv)")
    render.add_argument("--no-t2s", action="store_true", help="keep Traditional characters")
    render.add_argument("--chapters", default=None,
                        help="render only these chapters, 1-based: e.g. 1-3,7 (a preview)")
    render.add_argument("--allow-gaps", action="store_true",
                        help="assemble chapters even if some segments failed (silence in their place)")
    render.add_argument("--guard-attempts", type=int, default=None,
                        help="renders per segment when its duration does not fit its text (default 3)")
    render.add_argument("--no-guard", action="store_true",
                        help="accept every segment as rendered (no duration check, no re-rolls)")

    status = _Parser(prog=f"{PROG} status", description="Per-chapter progress of a book's render.")
    _common(status)

    inspect = _Parser(prog=f"{PROG} inspect", description="Chapters, characters, segments and coverage "
                      "of a book, without loading the model.")
    inspect.add_argument("book", type=Path)
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--lexicon", default=None, help="as for a render")
    inspect.add_argument("--no-t2s", action="store_true", help="as for a render")

    package = _Parser(prog=f"{PROG} package", description="Rebuild the outputs from the stored segment audio "
                      "(no re-rendering, the model is not loaded).")
    _common(package)
    package.add_argument("--format", default="flac")
    return {"render": render, "status": status, "inspect": inspect, "package": package}


def _check_book(path: Path) -> None:
    from tasks.errors import BookError

    if not path.exists():
        raise BookError(str(path), "no such file")
    if not path.is_file():
        raise BookError(str(path), "not a file")


def render_params(a: argparse.Namespace) -> dict:
    """The plain parameters of a render (the flow's and the deployment's parameters too)."""
    return {"book": str(a.book), "out": str(a.out) if a.out else None, "model": a.model, "voice": a.voice,
            "formats": a.format.split(","), "device": a.device, "dtype": a.dtype, "int8": a.int8,
            "compile": a.compile, "max_batch": a.max_batch, "threads": a.threads, "allow_gaps": a.allow_gaps,
            "chapters": a.chapters, "lexicon": a.lexicon, "t2s": not a.no_t2s, "guard": not a.no_guard,
            "guard_attempts": a.guard_attempts}


def prefect_server_configured() -> bool:
    """True when a Prefect API URL is set (env or the active profile) — without importing Prefect."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    try:
        import tomllib

        profiles = tomllib.loads((home / "profiles.toml").read_text())
    except (OSError, ValueError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return bool(profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL"))


def cmd_render(a) -> int:
    from flows.progress import TqdmProgress

    from tasks.options import options_from_params

    params = render_params(a)
    try:
        opts = options_from_params(**params)
    except ValueError as e:
        raise UsageError(str(e)) from None
    _check_book(opts.book)
    t0 = time.monotonic()
    progress = TqdmProgress()
    try:
        if prefect_server_configured():
            from flows.render_book import render_book_flow

            result = {"book_dir": Path(render_book_flow(**params))}
        else:
            from flows.pipeline import render

            result = render(opts, on_done=progress)
            record_source(opts)
    finally:
        progress.close()
    from manifests import load, summary

    book_dir = result["book_dir"]
    print(summary_line(book_dir, summary(load(book_dir)), result, time.monotonic() - t0))
    return EXIT_OK


def summary_line(book_dir: Path, rows: list[dict], result: dict, seconds: float) -> str:
    """The one line a render ends with: chapters, segments (rendered / reused / failed), minutes, time."""
    counts = ""
    if "rendered" in result:
        failed = f", {result['failed']} failed: gaps listed in report.json" if result.get("failed") else ""
        counts = f" ({result['rendered']} rendered, {result['adopted'] + result['already_done']} reused{failed})"
    return (f"{book_dir}: {len(rows)} chapters, {sum(r['done'] for r in rows)} segments{counts}, "
            f"{sum(r['done_s'] for r in rows) / 60:.1f} min of audio, {seconds:.1f} s")


def record_source(opts) -> None:
    """Remember the source file's hash, so the nightly catalogue scan sees this book as current."""
    from manifests.source import record_source_hash, source_sha256

    record_source_hash(opts.book_dir, opts.book, source_sha256(opts.book))


def cmd_status(a) -> int:
    from manifests import load, summary
    from tasks.errors import BookError
    from tasks.options import DEFAULT_OUT, book_slug

    book_dir = (a.out or DEFAULT_OUT) / book_slug(a.book)
    table = load(book_dir)
    if table.num_rows == 0:
        raise BookError(str(a.book), f"no render found in {book_dir}")
    rows = summary(table)
    print(f"{'ch':>4}  {'done':>5} {'pend':>5} {'fail':>5}  {'audio':>8}  {'left~':>8}  title")
    for r in rows:
        print(f"{r['chapter'] + 1:>4}  {r['done']:>5} {r['pending']:>5} {r['failed']:>5}  "
              f"{_mmss(r['done_s']):>8}  {_mmss(r['remaining_s']):>8}  {r['title']}")
    tot = {k: sum(r[k] for r in rows) for k in ("done", "pending", "failed", "done_s", "remaining_s")}
    print(f"total {tot['done']} done, {tot['pending']} pending, {tot['failed']} failed; "
          f"{_mmss(tot['done_s'])} rendered, about {_mmss(tot['remaining_s'])} of audio left")
    return EXIT_OK


def _mmss(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def cmd_inspect(a) -> int:
    import json

    from tasks.ingest import load_book
    from tasks.text.inspect import format_inspect, inspect_book
    from tasks.options import options_from_params

    _check_book(a.book)
    try:
        opts = options_from_params(str(a.book), lexicon=a.lexicon, t2s=not a.no_t2s)
    except ValueError as e:
        raise UsageError(str(e)) from None
    report = inspect_book(load_book(a.book), opts.segment)
    print(json.dumps(report, ensure_ascii=False, indent=1) if a.json else format_inspect(report))
    return EXIT_OK


def cmd_package(a) -> int:
    from tasks.options import options_from_params
    from tasks.stages import package

    try:
        opts = options_from_params(str(a.book), out=a.out and str(a.out), formats=a.format.split(","))
    except ValueError as e:
        raise UsageError(str(e)) from None
    from manifests.lock import BookLock
    from tasks.errors import BookError

    if not (opts.book_dir / "manifest").is_dir():
        raise BookError(str(a.book), f"no render found in {opts.book_dir}")
    with BookLock(opts.book_dir):
        package(opts.book_dir, opts)
    print(f"{opts.book_dir}: packaged as {', '.join(opts.package.formats)}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv and argv[0] in COMMANDS else "render"
    from engine.api import ModelUnavailable
    from engine.voice import VoiceError
    from manifests.lock import BookLocked
    from tasks.errors import BookError, OutputError, RenderFailed, ToolMissing

    try:
        a = build_parser()[cmd].parse_args(argv)
        return {"render": cmd_render, "status": cmd_status, "inspect": cmd_inspect,
                "package": cmd_package}[cmd](a)
    except UsageError as e:
        _err(f"{PROG}: error: {e}")
        return EXIT_USAGE
    except (BookError, ModelUnavailable, BookLocked, VoiceError) as e:
        _err(f"{PROG}: {e}")
        return EXIT_USAGE
    except (ToolMissing, OutputError) as e:
        _err(f"{PROG}: {e}")
        return EXIT_ENVIRONMENT
    except RenderFailed as e:
        _err(f"{PROG}: {e}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err(f"{PROG}: interrupted; run the same command again to resume")
        return 130
    except OSError as e:
        if os.environ.get("CHATTTS_RENDER_DEBUG"):
            raise
        what = "disk full" if e.errno == 28 else (e.strerror or str(e))
        _err(f"{PROG}: {e.filename or 'render'}: {what}; the manifest is intact, rerun to resume")
        return EXIT_FAILED
    except Exception as e:  # noqa: BLE001 — a failure during the render: one line, the rest in debug mode
        if os.environ.get("CHATTTS_RENDER_DEBUG"):
            raise
        _err(f"{PROG}: render failed: {type(e).__name__}: {e}; rerun to resume "
             f"(CHATTTS_RENDER_DEBUG=1 shows the traceback)")
        return EXIT_FAILED


def _err(msg: str) -> None:
    print(" ".join(msg.split()), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
