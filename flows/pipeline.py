"""The render pipeline's composition, shared by the CLI (direct calls) and the Prefect flow (task calls).
No Prefect import here: the CLI without a server never pays for it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tasks import stages
from tasks.options import RenderOptions

Call = Callable[..., Any]     # call(stage_function, *args) -> result


def direct(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def render(opts: RenderOptions, *, call: Call = direct,
           on_done: Callable[[int, int], None] | None = None) -> dict:
    """Render one book; returns {book_dir, rendered, adopted, already_done, failed, total}.  Resumable: rerun
    after any crash."""
    from manifests.lock import BookLock, BookLocked
    from engine.voice import VoiceError
    from tasks.errors import BookError, GapsError

    opts.validate()
    created = [p for p in (opts.out, opts.book_dir) if not p.exists()]
    try:
        with BookLock(opts.book_dir):
            stages.clean_temp_files(opts.book_dir)       # a killed run's leftovers; no other writer is alive
            book_dir = Path(call(stages.prepare, opts))
            counts = call(stages.synthesize, book_dir, opts, on_done)
            call(stages.package, book_dir, opts)
    except (BookError, VoiceError):            # bad input: leave the output as it was
        _remove_created(created, opts.book_dir)
        raise
    except (BookLocked, GapsError):
        raise
    except Exception as e:
        full = disk_full_error(e, opts.book_dir)
        if full is not None:
            raise full from e
        raise
    return {"book_dir": book_dir, **counts}


DISK_FULL_FREE_BYTES = 1 << 20      # bytes: a write error with less free space than this is a full disk


def disk_full_error(e: BaseException, where: Path) -> OSError | None:
    """An OSError(ENOSPC) for an error that a full disk caused, else None.  Writers report a full disk
    differently — OSError 28 (Python, pyarrow), soundfile's LibsndfileError/RuntimeError, mutagen's errors,
    ffmpeg's exit status — so besides the errno and the message, the free space where we write decides."""
    import errno
    import shutil

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


def _remove_created(created: list[Path], book_dir: Path) -> None:
    """Bad input: take back the (empty) folders this run created."""
    for p in reversed(created):
        try:
            p.rmdir()
        except OSError:
            pass
