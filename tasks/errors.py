"""What can go wrong in a render, named by whose problem it is.  Each error's message is one line for the user
and names the file or folder concerned; the CLI maps the class to its exit code (flows/cli.py, exit_codes()).

    BookError      bad input: the book, a lexicon, a voice file, a chapter selection   -> exit 2
    ToolMissing    a program an output needs is not installed (ffmpeg, ffprobe)          -> exit 3
    OutputError    the output folder cannot be used (not a folder, not writable, a name
                   that would leave it)                                                   -> exit 3
    StoreError     the store (--out URL) cannot be used: a bad URL, no credentials, unreachable -> exit 2
    QAUnavailable  a QA check cannot run: the qa extra or the ASR model is missing            -> exit 2
    RenderFailed   the render stopped part-way (a stored segment file is gone, segments
                   failed); the manifest is intact and a rerun resumes                     -> exit 1

The engine's own ModelUnavailable, DeviceUnavailable (no usable GPU for --device cuda: exit 3) and VoiceError
and the manifest's BookLocked live beside the code that raises them (engine/ and manifests/ do not import tasks/)."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from engine.api import DeviceUnavailable, ModelUnavailable
from engine.voice import VoiceError
from manifests.lock import BookLocked


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


class StoreError(_Located):
    """The output store (an fsspec URL) cannot be used: a bad URL, no back-end, no credentials, unreachable.
    Raised before anything is written to it."""


class RenderFailed(_Located):
    """The render stopped part-way for a reason a rerun may fix; the manifest is intact."""


class QAUnavailable(_Located):
    """A QA check cannot run: its extra (faster-whisper, resemblyzer, pypinyin) is not installed, or the ASR
    model named is not there.  str(err) names the model or package and what to do."""


class GapsError(RenderFailed):
    """Segments are not rendered (failed or pending) and gaps were not allowed."""


DISK_FULL_FREE_BYTES = 1 << 20      # bytes: a write error with less free space than this is a full disk


def disk_full_error(e: BaseException, where: Path) -> OSError | None:
    """An OSError(ENOSPC) for an error that a full disk caused, else None.  Writers report a full disk
    differently — OSError 28 (Python, pyarrow), soundfile's LibsndfileError/RuntimeError, mutagen's errors,
    ffmpeg's exit status — so besides the errno and the message, the free space where we write decides.  An
    error that already says what it is (bad input, a busy book, a missing tool …) is never relabelled."""
    if isinstance(e, (_Located, ModelUnavailable, DeviceUnavailable, VoiceError, BookLocked)):
        return None
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return e
    text = f"{type(e).__name__}: {e}"
    low_space = False
    for p in (Path(where), *Path(where).parents):
        if p.exists():
            try:
                low_space = shutil.disk_usage(p).free < DISK_FULL_FREE_BYTES
            except OSError:
                pass
            break
    if "No space left on device" in text or "ENOSPC" in text or low_space:
        return OSError(errno.ENOSPC, "No space left on device", str(where))
    return None
