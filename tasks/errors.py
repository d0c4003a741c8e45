"""What can go wrong in a render, named by whose problem it is.  Each error's message is one line for the user
and names the file or folder concerned; the CLI maps the class to its exit code (flows/cli.py, EXIT_CODES).

    BookError      bad input: the book, a lexicon, a voice file, a chapter selection   -> exit 2
    ToolMissing    a program an output needs is not installed (ffmpeg, ffprobe)          -> exit 3
    OutputError    the output folder cannot be used (not a folder, not writable, a name
                   that would leave it)                                                   -> exit 3
    RenderFailed   the render stopped part-way (a stored segment file is gone, segments
                   failed); the manifest is intact and a rerun resumes                     -> exit 1

The engine's own ModelUnavailable and VoiceError and the manifest's BookLocked live beside the code that
raises them (engine/ and manifests/ do not import tasks/)."""
from __future__ import annotations


class _Located(Exception):
    """An error about one path: str(err) is "<path>: <problem>"."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


class BookError(_Located):
    """Bad input.  Raised before anything is written, so the output stays as it was."""


class ToolMissing(_Located):
    """A program that an output format needs (ffmpeg, ffprobe) is not installed or not executable."""


class OutputError(_Located):
    """The output folder cannot be used: not a folder, not writable, or an output name would leave it."""


class RenderFailed(_Located):
    """The render stopped part-way for a reason a rerun may fix; the manifest is intact."""


class GapsError(RenderFailed):
    """Segments are not rendered (failed or pending) and gaps were not allowed."""
