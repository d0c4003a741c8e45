"""Which source file a book directory was rendered from: its sha256 in manifest/source.json.  The nightly
catalogue scan compares it with the file's current hash; the CLI and the flow record it after a render."""
from __future__ import annotations

import json
from pathlib import Path

from engine.atomic import file_sha256, write_bytes
from manifests.store import manifest_dir

SOURCE_RECORD = "source.json"          # in the book's manifest dir: the sha256 of the rendered source


def source_sha256(path: str | Path) -> str:
    """The sha256 of a book's source file (what the nightly scan compares)."""
    return file_sha256(Path(path))


def record_source_hash(book_dir: str | Path, book: str | Path, sha256: str) -> None:
    """Remember which source content book_dir was rendered from (manifest/source.json, atomically)."""
    data = {"source_path": str(Path(book).resolve()), "sha256": sha256}
    mdir = manifest_dir(book_dir)
    mdir.mkdir(parents=True, exist_ok=True)
    write_bytes(mdir / SOURCE_RECORD, json.dumps(data, indent=1).encode("utf-8"), durable=True)


def read_source_hash(book_dir: str | Path) -> str | None:
    try:
        return json.loads((manifest_dir(book_dir) / SOURCE_RECORD).read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
