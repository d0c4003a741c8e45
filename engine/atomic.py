"""Crash-safe writes: every file or folder the package writes into place goes through this module.

    write_bytes(final, data)                        # a small file, old or new, never torn
    write_once(final, data)                         # a small file, unless one is there: the first writer's stays
    with atomic_path(final) as tmp: encoder(tmp)    # a file an encoder writes by path
    with atomic_dir(final) as tmp: build(tmp)       # a whole folder (the random-asset cache)
    with scratch(folder, ".f32") as tmp: ...        # a work file that never becomes an output
    for p in find_temps(book_dir): remove_temp(p)   # what a killed run left behind
    read_json(path), file_sha256(path)              # what a write left: a JSON object ({} never raises), a hash

Temps are `.tmp-<random><suffix>` beside their destination; `durable=True` fsyncs the file and its folder.  Names,
modes, when to fsync and the crash hook: docs/modules.md, "Crash-safe writes".
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_PREFIX = ".tmp-"              # every temp file and folder starts with it
TEMP_TOKEN_BYTES = 6               # random bytes in a temp name (12 hex characters)
CREATE_ATTEMPTS = 100              # names tried before giving up (a collision is already 1 in 2^48)
# Temps of the writer this module replaced (mkstemp(prefix=<name>.", suffix=".tmp"): `<name>.<8 chars>.tmp`,
# in manifest/ and segments/xx/): still found, so a book dir from an older version is cleaned too.
LEGACY_TEMP_RE = re.compile(r"^.+\.[a-z0-9_]{8}\.tmp$")


def _create(folder: Path, suffix: str, directory: bool) -> Path:
    """A new, empty temp file (or folder) in `folder`, created exclusively with the umask's mode."""
    for _ in range(CREATE_ATTEMPTS):
        path = Path(folder) / f"{TEMP_PREFIX}{secrets.token_hex(TEMP_TOKEN_BYTES)}{suffix}"
        try:
            if directory:
                os.mkdir(path, 0o777)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
            return path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temp name after {CREATE_ATTEMPTS} tries", str(folder))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(final: Path, *, durable: bool = False,
                before_replace: Callable[[], None] | None = None) -> Iterator[Path]:
    """Yield an empty temp file beside `final`; when the body returns, the temp (fsynced first when durable)
    replaces `final`.  On any error, in the body or after it, the temp is removed and `final` is untouched."""
    final = Path(final)
    tmp = _create(final.parent, final.suffix, directory=False)
    try:
        yield tmp
        if durable:
            _fsync(tmp)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, final)
    except BaseException:
        remove_temp(tmp)
        raise
    if durable:
        _fsync(final.parent)                             # the rename itself


def write_bytes(final: Path, data: bytes, *, durable: bool = False,
                before_replace: Callable[[], None] | None = None, keep_same: bool = False) -> bool:
    """Write `data` to `final` atomically (see atomic_path).  keep_same: when `final` already holds exactly
    `data`, leave it alone (its mtime too).  Returns whether the file was written."""
    final = Path(final)
    if keep_same:
        try:
            if final.read_bytes() == data:
                return False
        except OSError:
            pass
    with atomic_path(final, durable=durable, before_replace=before_replace) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return True


def write_once(final: Path, data: bytes) -> bool:
    """Write `data` to `final` unless a file is there already (the first of several writers wins, whole: a temp
    file hard-linked into place, which fails where `final` exists).  Returns whether this call wrote it."""
    final = Path(final)
    tmp = _create(final.parent, final.suffix, directory=False)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.link(tmp, final)
    except FileExistsError:
        return False
    finally:
        remove_temp(tmp)
    return True


@contextmanager
def atomic_dir(final: Path, *, replace_if: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Yield an empty temp folder beside `final`; when the body returns it is renamed to `final`.

    If `final` exists by then and `replace_if(final)` says so (e.g. it is damaged), the old folder is first
    renamed aside (to a temp name) and removed after; otherwise FileExistsError (e.g. another process
    finished first).  On any error the temp folder is removed.  Not fsynced (see the module docstring)."""
    final = Path(final)
    tmp = _create(final.parent, "", directory=True)
    aside = None
    try:
        yield tmp
        if os.path.lexists(final):
            if replace_if is None or not replace_if(final):
                raise FileExistsError(errno.EEXIST, "already exists", str(final))
            aside = _create(final.parent, "", directory=True)
            os.replace(final, aside / final.name)
        try:
            os.replace(tmp, final)
        except OSError as e:                             # another process renamed its folder in meanwhile
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(e.errno, "already exists", str(final)) from e
            raise
    except BaseException:
        remove_temp(tmp)
        raise
    finally:
        if aside is not None:
            remove_temp(aside)


@contextmanager
def scratch(folder: Path, suffix: str = "", *, directory: bool = False) -> Iterator[Path]:
    """A temp file (or folder) in `folder` for work that never becomes an output (ffmpeg's side inputs, the
    M4B's raw audio); removed when the block ends, whatever happens.  A kill leaves it to find_temps."""
    tmp = _create(Path(folder), suffix, directory)
    try:
        yield tmp
    finally:
        remove_temp(tmp)


def remove_temp(path: Path) -> None:
    """Remove one temp file, or a temp folder with what is in it (a link is removed, never followed)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def find_temps(root: Path) -> list[Path]:
    """Every temp under `root` (a book directory): `.tmp-*` files and folders at any depth (a temp folder's
    contents are not listed separately), plus the older writer's `<name>.<8 chars>.tmp` files.  Only safe to
    delete while no writer is alive (the book's lock held)."""
    found = []
    for folder, dirs, files in os.walk(root):
        temp_dirs = [d for d in dirs if d.startswith(TEMP_PREFIX)]
        dirs[:] = [d for d in dirs if not d.startswith(TEMP_PREFIX)]
        found += [Path(folder) / d for d in temp_dirs]
        found += [Path(folder) / f for f in files if f.startswith(TEMP_PREFIX) or LEGACY_TEMP_RE.match(f)]
    return sorted(found)


def file_sha256(path: Path) -> str:
    """The sha256 (hex) of a file's bytes, read in chunks (OSError when it cannot be read)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_json(path: Path) -> dict:
    """The JSON object in `path`; {} when it is missing, unreadable, not JSON or not an object.  For the
    files the package rebuilds when they are bad (book.json, report.json, .chapters.json): a reader that wants
    to fail on a bad file reads it itself."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
