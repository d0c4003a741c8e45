"""One render per book directory at a time: an flock on the book directory itself.

The kernel drops an flock when its holder dies (even by SIGKILL), so a lock left by a dead process is taken
over by the next render without any staleness guess.  Locking the directory (not a file in it) writes
nothing, so a refused or failed start leaves the output byte for byte as it was.  The holder's pid, for the
message, comes from /proc/locks."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path


class BookLocked(Exception):
    """Another live process is rendering this book into the same output."""


def _holder_pid(st: os.stat_result) -> str:
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].endswith(f":{st.st_ino}"):
                    return parts[4]
    except OSError:
        pass
    return "?"


class BookLock:
    def __init__(self, book_dir: str | Path):
        self.path = Path(book_dir)
        self._fd: int | None = None

    def acquire(self, wait: bool = False) -> BookLock:
        """Take the lock; BookLocked when another process holds it, or with wait, block until it is free."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            pid = _holder_pid(os.fstat(fd))
            os.close(fd)
            raise BookLocked(f"{self.path}: already being rendered by another process (pid {pid}); "
                             "wait for it to finish or stop it") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> BookLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def render_in_flight(book_dir: str | Path) -> bool:
    """True when a live process holds the book dir's lock (tried non-blockingly, released at once)."""
    if not Path(book_dir).is_dir():          # BookLock would create it: a missing dir has no holder
        return False
    try:
        BookLock(book_dir).acquire().release()
    except BookLocked:
        return True
    return False
