"""chattts-render: the command line's parser and exit codes (the shared options: flows/arguments.py; the commands
themselves: flows/commands.py).

    chattts-render [render] BOOK [options]    render (the default command)
    chattts-render status|inspect|package BOOK [options]
    chattts-render fix BOOK C.S... --retake | --takes | --take K | --text T | --seed N | --voice SPEC
    chattts-render voices [audition] BOOK [options] | voices save NAME --voice SPEC | voices list
    chattts-render catalogue OUT [--base-url URL]
    chattts-render check AUDIO... --text TEXT | --texts TSV [--voice-ref CLIP] [--json]
    chattts-render studio [--root DIR] [--host 127.0.0.1] [--port N] [--books DIR]
    chattts-render check --acx BOOK_DIR | AUDIO... [--json]
    chattts-render --version

Exit codes (exit_codes()): 0 done; 1 the render failed part-way (manifest intact, rerun resumes), or `check`
flagged a recording; 2 bad input or usage, or the book is being rendered by another process, or a QA check cannot
run (its extra or ASR model is missing); 3 the machine: a missing tool (ffmpeg), no GPU for --device cuda, or an
unusable output folder.  Every error is one line on stderr naming the file and the problem;
a bad input creates and overwrites nothing."""
from __future__ import annotations

import argparse
import os
import sys

from engine.api import DeviceUnavailable, ModelUnavailable
from engine.voice import VoiceError
from flows import arguments as arg
from flows.arguments import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_USAGE,
    PROG,
    UsageError,
    add_check_command,
    add_studio_command,
    package_version,
)
from flows.params import BOOK_HELP
from manifests.lock import BookLocked
from tasks.errors import BookError, OutputError, QAUnavailable, RenderFailed, StoreError, ToolMissing
from tasks.synthesize.options import DEFAULT_COUNT, DEFAULT_FROM_SEED

DEFAULT_COMMAND = "render"
VOICE_ACTIONS = ("audition", "save", "list")     # `voices BOOK` is `voices audition BOOK`


class _Parser(argparse.ArgumentParser):
    commands: tuple[str, ...] = ()                  # the top parser's: its commands' names (build_parser)

    def error(self, message):                       # argparse's own errors: one line, exit 2
        raise UsageError(message)


def build_parser() -> _Parser:
    """Every command's parser; a command's render parameters are its table's (flows/arguments.py COMMAND_PARAMS), and
    `run` names the command flows/commands.py runs.  Loads nothing heavy: `--help` and usage errors answer at once."""
    top = _Parser(prog=PROG, description="Render books (EPUB, TXT) into audiobooks with ChatTTS. "
                  f"`{PROG} BOOK` is `{PROG} render BOOK`.")
    top.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("book", help=BOOK_HELP)
        p.set_defaults(run=name)
        return p

    arg.add_params(command("render", "Render a book into an audiobook (resumes a killed render)."), "render")
    arg.add_params(command("status", "Per-chapter progress of a book's render."), "status")
    inspect = command("inspect", "Chapters, characters, segments and coverage of a book, without loading the model.")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--segments", action="store_true",
                         help="every segment: what ChatTTS is given beside the book's text, named C.S")
    inspect.add_argument("--polyphones", action="store_true",
                         help="the words holding a character of more than one reading, most frequent first, "
                              "with their readings (for lexicon readings: word<TAB>yin2 hang2)")
    arg.add_params(inspect, "inspect")
    arg.add_params(command("package", "Rebuild the outputs from the stored segment audio (no re-rendering, the model "
                           "is not loaded)."), "package")
    voices = sub.add_parser("voices", help="Hear candidate voices for a book; save and list named voices.")
    actions = voices.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    aud = actions.add_parser("audition", help="candidate voices read the book's first ~15 s into OUT/<book>/voices/")
    aud.add_argument("book", help=BOOK_HELP)
    arg.add_params(aud, "voices audition")
    aud.add_argument("--count", type=int, default=DEFAULT_COUNT, help="seed candidates (default %(default)s)")
    aud.add_argument("--from-seed", type=int, default=DEFAULT_FROM_SEED, help="the first seed (default %(default)s)")
    aud.add_argument("--text", default=None, help="the passage to read (default: the first chapter's first ~15 s)")
    save = actions.add_parser("save", help="keep a voice under a name (~/.config/chattts-render/voices/)")
    save.add_argument("name", help="ASCII letters, digits, - and _")
    arg.add_params(save, "voices save")
    save.add_argument("--force", action="store_true", help="replace a saved voice of that name")
    aud.set_defaults(run="voices audition")
    save.set_defaults(run="voices save")
    actions.add_parser("list", help="the saved voices").set_defaults(run="voices list")
    _catalogue(sub)
    add_check_command(sub)
    add_studio_command(sub)
    _fix(command("fix", "Fix single segments of a rendered book: a new take, an earlier take, or another text, seed or "
                 "voice; only their chapters are re-packaged."))
    top.commands = tuple(sub.choices)                # for main(): is argv[0] a command or a book?
    return top


def _catalogue(sub) -> None:
    catalogue = sub.add_parser("catalogue", help="Write OUT/index.html and OUT/feed.xml (a podcast feed) for "
                               "every book in an output root.", description="Write OUT/index.html (every book, "
                               "its status and player) and OUT/feed.xml (RSS 2.0 podcast feed of the finished books).")
    catalogue.add_argument("out", help="the output root (the --out of the renders): a folder or a store URL "
                                       "(s3://bucket/prefix …: the books are read from it and the page and the "
                                       "feed written back)")
    catalogue.add_argument("--scratch", default=None, help="with OUT a URL: the local work folder (default: "
                                                            "~/.cache/chattts-render/scratch)")
    catalogue.add_argument("--base-url", default=None,
                           help="the URL the output root is served at, e.g. http://nas.local:8000/ (absolute links "
                                "in the feed, as podcast apps need; default: relative links)")
    catalogue.set_defaults(run="catalogue")


def _fix(p: argparse.ArgumentParser) -> None:
    """The fix command's own arguments (flows/fix.py runs it); its render parameters are its table's."""
    p.add_argument("segments", nargs="*", metavar="SEGMENT",
                   help="CHAPTER.SEGMENT, both counted from 1, as the player and the QA page show them")
    p.add_argument("--from", dest="from_file", default=None, metavar="FILE",
                   help="more segments: one CHAPTER.SEGMENT a line (blank lines and # comments allowed)")
    p.add_argument("--retake", action="store_true", help="render a new take of each segment and keep it")
    p.add_argument("--takes", action="store_true", help="list each segment's takes (the model is not loaded)")
    p.add_argument("--take", type=int, default=None, metavar="K", help="keep take K (the model is not loaded)")
    p.add_argument("--text", default=None, help="what the segment says instead (the subtitles keep the book's)")
    p.add_argument("--seed", type=int, default=None, help="render the segment with this seed")
    arg.add(p, "voices")                             # the fix's own: read by flows/fix.py, not as render parameters
    arg.add(p, "formats", default=None, help="output formats (default: those of the book's last packaging)")
    arg.add(p, "loudness", default=None, help="LUFS or a preset (default: the book's last packaging's)")
    arg.add(p, "tempo", default=None, help="x, pitch kept (default: the book's last packaging's)")
    arg.add_params(p, "fix")


def exit_codes() -> dict[type, int]:
    """Each error class the pipeline raises on purpose, and its exit code (the most specific class wins)."""
    return {UsageError: EXIT_USAGE, BookError: EXIT_USAGE, VoiceError: EXIT_USAGE, ModelUnavailable: EXIT_USAGE,
            BookLocked: EXIT_USAGE, StoreError: EXIT_USAGE, QAUnavailable: EXIT_USAGE,
            ToolMissing: EXIT_ENVIRONMENT, OutputError: EXIT_ENVIRONMENT,
            DeviceUnavailable: EXIT_ENVIRONMENT, RenderFailed: EXIT_FAILED}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    argv = _default_word(argv, 0, parser.commands, DEFAULT_COMMAND)        # `chattts-render BOOK` renders
    if argv[:1] == ["voices"]:
        argv = _default_word(argv, 1, VOICE_ACTIONS, VOICE_ACTIONS[0])     # `voices BOOK` auditions
    try:
        try:
            a = parser.parse_args(argv)
        except SystemExit as e:                      # --help, --version: printed, done
            return int(e.code or 0)
        from flows.commands import COMMANDS  # the pipeline (pyarrow, numpy): loaded once a command runs

        return COMMANDS[a.run](a)
    except KeyboardInterrupt:
        _err(f"{PROG}: interrupted; run the same command again to resume")
        return 130
    except Exception as e:                          # every error is one line; tracebacks only in debug mode
        codes = exit_codes()
        known = next((c for c in type(e).__mro__ if c in codes), None)
        if known is not None:
            _err(f"{PROG}: {'error: ' if known is UsageError else ''}{e}")
            return codes[known]
        if os.environ.get("CHATTTS_RENDER_DEBUG"):
            raise
        if isinstance(e, OSError):
            what = "disk full" if e.errno == 28 else (e.strerror or str(e))
            _err(f"{PROG}: {e.filename or 'render'}: {what}; the manifest is intact, rerun to resume")
        else:
            _err(f"{PROG}: render failed: {type(e).__name__}: {e}; rerun to resume "
                 f"(CHATTTS_RENDER_DEBUG=1 shows the traceback)")
        return EXIT_FAILED


def _default_word(argv: list[str], at: int, words, default: str) -> list[str]:
    """argv with `default` inserted at `at` when the argument there is not one of `words` (nor a help flag)."""
    if len(argv) > at and argv[at] not in (*words, "-h", "--help", "--version"):
        return argv[:at] + [default] + argv[at:]
    return argv


def _err(msg: str) -> None:
    print(" ".join(msg.split()), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
