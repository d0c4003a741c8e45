"""The command line's side of a render's parameters (flows/params.py): each command's table of them (COMMAND_PARAMS:
flows/cli.py adds them to its parser, the command reads them back with params_of), and the exit codes, notes and
version the CLI prints.  No command runs here (flows/commands.py), and nothing heavy loads: `--help` is instant."""
from __future__ import annotations

import argparse
import sys
import tomllib
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import get_args

from engine.api import EngineOptions
from flows.params import GROUPS, TYPES, choices, cpu_count, flag, help_of, named
from tasks.bookdir import DEFAULT_OUT
from tasks.qa.options import QAOptions
from tasks.qa.recordings import LANGUAGE_CHOICES
from tasks.site.studio.uploads import MAX_UPLOAD_BYTES

PROG = "chattts-render"
# Exit statuses of every command (README, "Exit codes"):
EXIT_OK = 0               # done; `check`: no recording flagged
EXIT_FAILED = 1           # a render failed (rerun resumes); `check`: a recording flagged
EXIT_USAGE = 2            # a user mistake (bad option, file, book; a missing extra or model): one line
EXIT_ENVIRONMENT = 3      # the machine: a tool missing (ffmpeg), no GPU for --device cuda, an unusable output folder
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765        # where the studio listens (flows/studio.py)
ROOT = Path(__file__).resolve().parents[1]        # the checkout (pyproject.toml), for package_version()
# Each command's render parameters, in the order its --help lists them: a parameter's or a group's name
# (flows/params.py), with argparse's arguments where they differ for the command.  flows/cli.py adds them to the
# command's parser (add_params) and the command reads them back (params_of): one list, read by both.
COMMAND_PARAMS: dict[str, tuple[str | tuple[str, dict], ...]] = {
    "render": GROUPS,
    "status": ("output",),
    "inspect": (("chapters", {"help": "only these chapters, 1-based: e.g. 1-2,5"}), "text", "cast", "include", "skip",
                "speed", "direction",
                ("out", {"help": "with --segments: the output root of a render of the book, whose manifest adds "
                                 "each segment's status and refined text (default: ./output)"})),
    "package": ("output", "formats", "loudness", "tempo",
                ("allow_gaps", {"help": "assemble chapters even if some segments are not rendered (silence in their "
                                        "place)"})),
    "voices audition": ("output", "engine", "text"),
    "voices save": (("voice", {"required": True}), "clip_text",
                    ("speed", {"help": "the voice's own pace, 0..9 (ChatTTS's [speed_N]): a render with this voice "
                                       "speaks at it, whatever --speed says"})),
    "fix": (("allow_gaps", {"help": "re-package even if other segments are not rendered (silence in their place)"}),
            "output", "engine", "text", "proof"),
}


class UsageError(Exception):
    """Bad arguments or option values: exit 2."""


def add(p: argparse.ArgumentParser, *names: str, **kw) -> None:
    """The render parameters `names` as options of a command (a group's name stands for its parameters, in the
    schema's order: flows/params.py); `kw`: argparse's arguments that differ for this command (its help, default)."""
    for f in named(*names):
        p.add_argument(flag(f), **{**_argparse(f), **f.metadata["cli"], **kw})
        if old := f.metadata.get("old"):                 # a renamed flag: the old spelling does the same, with a note
            p.add_argument(old, dest=_dest(f), action=_Renamed, new=flag(f),
                           help=argparse.SUPPRESS)


def add_params(p: argparse.ArgumentParser, command: str) -> None:
    """The command's render parameters (COMMAND_PARAMS) as options of its parser."""
    for entry in COMMAND_PARAMS[command]:
        name, kw = (entry, {}) if isinstance(entry, str) else entry
        add(p, name, **kw)


def _dest(f) -> str:
    """Where argparse keeps a parameter's option: its flag's name (--no-t2s: no_t2s)."""
    return flag(f).removeprefix("--").replace("-", "_")


class _Renamed(argparse.Action):
    """A bool flag's old spelling (RenderParams' `old`): sets it as the new one does, and says the new name once."""

    def __init__(self, option_strings, dest, new: str, **kw) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{PROG}: note: {option_string} is now {self.new} (the old name still works)", file=sys.stderr)
        setattr(namespace, self.dest, True)


def _argparse(f) -> dict:
    """argparse's arguments for a parameter, from its type and default: a bool is a flag, a tuple a comma-separated
    list, a Literal its choices, an int or a float its type."""
    if TYPES[f.name] is bool:
        return {"action": "store_true", "help": help_of(f)}
    out = {"default": ",".join(f.default) if isinstance(f.default, tuple) else f.default, "help": help_of(f)}
    if choices(f):
        out["choices"] = choices(f)
    kinds = get_args(TYPES[f.name]) or (TYPES[f.name],)
    for t in (int, float):                       # float over int when the type admits both
        if t in kinds:
            out["type"] = t
    return out


def params_of(a: argparse.Namespace, command: str) -> dict:
    """The command's render parameters (COMMAND_PARAMS) by their Python names, from its parsed options."""
    out = {}
    for f in named(*(e if isinstance(e, str) else e[0] for e in COMMAND_PARAMS[command])):
        value = getattr(a, _dest(f))
        if flag(f).startswith("--no-"):
            value = not value                        # --no-t2s: t2s False
        elif isinstance(f.default, tuple) and isinstance(value, str):
            value = tuple(value.split(","))          # --format flac,m4b
        out[f.name] = value
    return out


def render_params(a: argparse.Namespace) -> dict:
    """The parameters of a render (the flow's and the deployment's parameters too): every one of the schema."""
    return {"book": str(a.book), **params_of(a, "render")}


@contextmanager
def usage():
    """A ValueError from checking options (a stage's options validator, RenderParams') is a usage error: exit 2."""
    try:
        yield
    except ValueError as e:
        raise UsageError(str(e)) from None


def note_threads(engine: EngineOptions) -> None:
    """One line on stderr when --threads asks for more threads than this process has CPUs (they share them)."""
    threads, cpus = engine.threads, cpu_count()
    if threads is not None and threads > cpus:
        print(f"{PROG}: note: --threads {threads} is more than the {cpus} CPUs this process may use; the threads "
              "share them (slower, never faster)", file=sys.stderr)


def package_version() -> str:
    """This package's version: its installed metadata, else (a checkout that is not installed) pyproject.toml's."""
    try:
        return version(PROG)
    except PackageNotFoundError:
        return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def add_check_command(sub) -> argparse.ArgumentParser:
    """`check`'s parser (flows/check.py runs it)."""
    d = QAOptions()
    p = sub.add_parser("check", help="Hear recordings and check them against their texts (ASR, voice drift).",
                       description="Transcribe recordings with Whisper and compare them with what they should say; "
                                   "with --voice-ref, also compare their speaker with a reference clip.",
                       epilog="Exit status: 0 when every recording passes or is inconclusive (a short text "
                              "heard in part, or Whisper too unsure to judge: reported, not a failure), 1 when any "
                              "is flagged (--acx: misses a limit), 2 for bad input or usage or a missing qa extra or "
                              "ASR model. The same with --json.")
    p.add_argument("audio", nargs="*", help="recordings (any format soundfile or ffmpeg reads); with --acx, a rendered "
                                            "book's folder or audio files")
    p.add_argument("--acx", action="store_true",
                   help="check ACX's published limits instead (RMS -23..-18 dBFS, peaks <= -3 dBFS, noise floor <= -60 "
                        "dBFS RMS, as Audacity's ACX Check measures them): per chapter file of a rendered book, or "
                        "per file given; no text needed")
    texts = p.add_mutually_exclusive_group()
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


def add_studio_command(sub) -> None:
    """`studio`'s parser (flows/studio.py runs it)."""
    p = sub.add_parser("studio", help="A local web app: open a book, choose a voice, render, listen and fix lines.",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=str(DEFAULT_OUT), help="the output root it works in (default ./output)")
    p.add_argument("--host", default=DEFAULT_HOST, help="the address to listen on (default 127.0.0.1; any other "
                                                        "needs the access token it prints)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT})")
    p.add_argument("--books", default=None, help="a folder of books (EPUB, TXT) the library offers to add")
    p.add_argument("--max-upload-mb", type=float, default=MAX_UPLOAD_BYTES / 1048576,
                   help="the largest upload accepted, MB (default %(default)g)")
    p.set_defaults(run="studio")
