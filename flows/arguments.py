"""The command line's side of a render's parameters (flows/params.py): each command's options made from the schema
(`add`, by parameter or group; flows/cli.py builds the parser), the parameters read back from the parsed options, a
command's RenderOptions, and the notes and the version the CLI prints.  No command runs here (flows/commands.py)."""
from __future__ import annotations

import argparse
import sys
import tomllib
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import get_args

from engine.api import EngineOptions
from flows.options import options_from_params
from flows.params import GROUPS, TYPES, choices, cpu_count, flag, help_of, named
from tasks.errors import BookError

PROG = "chattts-render"
# Exit statuses of every command (README, "Exit codes"):
EXIT_OK = 0               # done; `check`: no recording flagged
EXIT_FAILED = 1           # a render failed (rerun resumes); `check`: a recording flagged
EXIT_USAGE = 2            # a user mistake (bad option, file, book; a missing extra or model): one line
EXIT_ENVIRONMENT = 3      # the machine: a tool missing (ffmpeg), no GPU for --device cuda, an unusable output folder
ROOT = Path(__file__).resolve().parents[1]        # the checkout (pyproject.toml), for package_version()


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


def params_of(a: argparse.Namespace, *names: str) -> dict:
    """The render parameters `names` (as for `add`) by their Python names, from a command's parsed options."""
    out = {}
    for f in named(*names):
        value = getattr(a, _dest(f))
        if flag(f).startswith("--no-"):
            value = not value                        # --no-t2s: t2s False
        elif isinstance(f.default, tuple) and isinstance(value, str):
            value = tuple(value.split(","))          # --format flac,m4b
        out[f.name] = value
    return out


def render_params(a: argparse.Namespace) -> dict:
    """The parameters of a render (the flow's and the deployment's parameters too): every one of the schema."""
    return {"book": str(a.book), **params_of(a, *GROUPS)}


def options(**params):
    """RenderOptions for a command that reads the book (flows/options.py; ValueError → a usage error); the book must
    be a file (BookError).  Commands that work from a book dir alone find it with flows.options.book_place."""
    with usage():
        opts = options_from_params(**params)
    if not opts.book.is_file():
        raise BookError(str(opts.book), "no such file" if not opts.book.exists() else "not a file")
    return opts


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
