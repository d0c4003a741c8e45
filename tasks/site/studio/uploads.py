"""Books given to the studio: an upload streamed to a file under the root whose name the server chooses, within
a size limit, its type told by its first bytes (an EPUB is a ZIP whose first entry is `mimetype` holding
`application/epub+zip`; a TXT is text: no NUL bytes but after a UTF-16/32 byte-order mark, not a known binary
format), a name's extension that says otherwise refused.  Whether the book can be read is the CLI's to say
(books.py runs `chattts-render inspect` on it)."""
from __future__ import annotations

import codecs
import re
import threading
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path

from engine.atomic import atomic_path
from tasks.bookdir import SLUG_MAX_CHARS

MAX_UPLOAD_BYTES = 200 * 1024 * 1024    # bytes; a larger upload is refused (413) and nothing is kept
SNIFF_BYTES = 64 * 1024                 # bytes read before the type is decided
EPUB_HEAD = b"PK\x03\x04"
EPUB_MIMETYPE = b"mimetypeapplication/epub+zip"     # the first entry, stored: bytes 30..58 of the file
EXTENSIONS = {"epub": ".epub", "txt": ".txt"}
TEXT_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
BINARY = ((b"PK\x03\x04", "a ZIP archive that is not an EPUB"), (b"%PDF", "a PDF document"),
          (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"Rar!", "a RAR archive"), (b"7z\xbc\xaf", "a 7-Zip archive"), (b"\x1f\x8b", "gzip data"),
          (b"\x7fELF", "a program"), (b"MZ", "a program"), (b"\xd0\xcf\x11\xe0", "an MS Office document"),
          (b"ID3", "MP3 audio"), (b"RIFF", "RIFF media"), (b"fLaC", "FLAC audio"))


class UploadError(Exception):
    """An upload refused; str: the one line the page shows; status: the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def sniff(head: bytes) -> str:
    """"epub" or "txt" from a file's first bytes; UploadError (415) naming what it is otherwise."""
    if head.startswith(EPUB_HEAD) and head[30:30 + len(EPUB_MIMETYPE)] == EPUB_MIMETYPE:
        return "epub"
    if not head:
        return _refuse(415, "the file is empty")
    if head.startswith(TEXT_BOMS):
        return "txt"
    for magic, what in BINARY:
        if head.startswith(magic):
            return _refuse(415, f"not an EPUB or a TXT book: {what}")
    if b"\x00" in head:
        return _refuse(415, "not an EPUB or a TXT book: binary data")
    return "txt"


def _refuse(status: int, message: str):
    raise UploadError(status, message)


def server_name(original: str, kind: str, taken: set[str]) -> str:
    """The file name the studio keeps a book under: the original name's stem reduced to letters, digits, `-` and
    `_` (so its book folder, tasks.bookdir.book_slug, is that stem), a number added while it is `taken` (stems
    already used: books, folders, uploads), and the extension of its type."""
    stem = unicodedata.normalize("NFC", Path(original.replace("\\", "/")).name)
    stem = re.sub(r"[^\w-]+", "-", stem.rsplit(".", 1)[0] if "." in stem else stem, flags=re.UNICODE).strip("-_")
    stem = stem[:SLUG_MAX_CHARS - 8] or "book"
    name, n = stem, 1
    while name.lower() in taken:
        n += 1
        name = f"{stem}-{n}"
    return name + EXTENSIONS[kind]


def check_extension(original: str, kind: str) -> None:
    """UploadError (415) when the name's extension is a book type other than the content's."""
    ext = Path(original).suffix.lower()
    if ext in EXTENSIONS.values() and ext != EXTENSIONS[kind]:
        raise UploadError(415, f"{Path(original).name}: named {ext} but its content is "
                               f"{'an EPUB' if kind == 'epub' else 'plain text'}")


_names = threading.Lock()
_reserved: set[str] = set()                 # names being written now (folder/name), taken until they are there


async def receive(chunks: AsyncIterator[bytes], folder: Path, original: str, taken: set[str],
                  limit: int = MAX_UPLOAD_BYTES) -> Path:
    """Stream an upload into `folder` under the name the server chooses (server_name; `taken`: stems used
    elsewhere) and return its path.  Over `limit` bytes, of a type other than EPUB or TXT, or named as the other
    type: UploadError, and nothing is left.  The file appears whole or not at all (engine.atomic.atomic_path)."""
    folder.mkdir(parents=True, exist_ok=True)
    stream = aiter(chunks)
    head = b""
    async for chunk in stream:                 # the first bytes decide the type, and so the name
        head += chunk
        if len(head) >= SNIFF_BYTES:
            break
    _check_size(len(head), limit)
    kind = sniff(head)
    check_extension(original, kind)
    with _names:
        used = {p.stem.lower() for p in folder.iterdir()} | {Path(r).stem.lower() for r in _reserved} | taken
        final = folder / server_name(original, kind, used)
        _reserved.add(str(final))
    try:
        size = len(head)
        with atomic_path(final) as tmp, open(tmp, "wb") as f:
            f.write(head)
            async for chunk in stream:
                size += len(chunk)
                _check_size(size, limit)
                f.write(chunk)
    finally:
        with _names:
            _reserved.discard(str(final))
    return final


def _check_size(size: int, limit: int) -> None:
    if size > limit:
        raise UploadError(413, f"the file is larger than the studio's upload limit ({limit / 1048576:g} MB)")
