"""One render per book directory at a time: an flock on OUT/<book>/.lock.

The kernel drops an flock when its holder dies (even by SIGKILL), so a lock left by a dead process is taken
over by the next render without any staleness guess; the holder's pid is written in the file for the message."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = ".lock"


class BookLocked(Exception):
    """Another live process is rendering this book into the same output."""


class BookLock:
    def __init__(self, book_dir: str | Path):
        self.path = Path(book_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "BookLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise BookLocked(f"{self.path.parent}: already being rendered by pid {holder}; "
                             "wait for it to finish or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "BookLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
