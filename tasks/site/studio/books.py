"""The books the studio knows, by id — a book's folder name under the root (tasks.bookdir.book_slug of its file):
folders under the root that hold a manifest (rendered, or being rendered, here or from the command line), books
uploaded into ROOT/.studio/books/, and books added from the folder the studio was told to read (--books).  A
book's file is found in that order: the upload, the added file, its book.json's source_path.

Its state folder, ROOT/.studio/ (hidden: the catalogue and the nightly scan skip it):
    books/            uploaded books, under names the server chose (uploads.py)
    added.json        {id: path} of the books added from the books folder
    inspect/<id>.json what `chattts-render inspect` said of the book (its first segments only)
    settings/<id>.json the render options the book was last started with (a resume uses them again)
    logs/             each job's output
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict
from pathlib import Path

from engine.atomic import read_json, write_bytes
from manifests.store import manifest_dir
from tasks.bookdir import book_slug, json_bytes, read_book_json
from tasks.site.library import book_entry
from tasks.site.studio.security import confined

STATE_DIRNAME = ".studio"
INSPECT_TIMEOUT_S = 600.0       # s: a book the CLI cannot read in this long is refused
SHOWN_SEGMENTS = 40             # the first segments kept from inspect (as ChatTTS will get them)
SHOWN_POLYPHONES = 60           # the most frequent polyphonic words kept
BOOK_SUFFIXES = (".epub", ".txt")
ID_RE = re.compile(r"^[^./\\\x00][^/\\\x00]{0,199}$")


class Library:
    """The books under `root` (module docstring); `books_dir`: the folder --books named, or None."""

    def __init__(self, root: Path, books_dir: Path | None = None, env: dict | None = None):
        self.env = env                  # the environment of `inspect` (None: the studio's)
        self.root = Path(root).resolve()
        self.books_dir = Path(books_dir).resolve() if books_dir is not None else None
        self.state = self.root / STATE_DIRNAME
        self.uploads = self.state / "books"
        for d in (self.uploads, self.state / "inspect", self.state / "settings", self.state / "logs"):
            d.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------------------------------------- where
    def book_dir(self, book_id: str) -> Path | None:
        """ROOT/<id> for a well-formed id that stays inside the root (it need not exist yet); else None."""
        if not ID_RE.match(book_id) or book_id != book_id.strip():
            return None
        path = confined(self.root, book_id)
        return path if path is not None and path.parent == self.root else None

    def source(self, book_id: str) -> Path | None:
        """The book's file: its upload, the file added from the books folder, or its book.json's source_path (where
        that file still is); None when none is found."""
        for p in sorted(self.uploads.glob("*")):
            if p.suffix in BOOK_SUFFIXES and book_slug(p) == book_id and p.is_file():
                return p
        added = self.added().get(book_id)
        if added and Path(added).is_file():
            return Path(added)
        d = self.book_dir(book_id)
        recorded = read_book_json(d).get("source_path") if d is not None else None
        if recorded and Path(recorded).is_file():
            return Path(recorded).resolve()
        return None

    def ids(self) -> list[str]:
        """Every book's id: folders with a manifest, uploads, added books; sorted."""
        found = {p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
                 and manifest_dir(p).is_dir()}
        found |= {book_slug(p) for p in self.uploads.iterdir() if p.suffix in BOOK_SUFFIXES and p.is_file()}
        found |= set(self.added())
        return sorted(i for i in found if self.book_dir(i) is not None)

    def taken(self) -> set[str]:
        """Stems an uploaded book may not take (lower case): every id and every name under the root."""
        return {i.lower() for i in self.ids()} | {p.name.lower() for p in self.root.iterdir()}

    # --------------------------------------------------------------------------------------------- what
    def entry(self, book_id: str) -> dict:
        """What the library shows of one book: the catalogue's entry (tasks.site.library) once it was planned, else
        what inspect said; plus whether its file is here (a render can start or resume)."""
        d = self.book_dir(book_id)
        e = book_entry(d) if d is not None and (d / "manifest").is_dir() else None
        info = self.inspected(book_id) or {}
        out = {"id": book_id, "title": info.get("title") or book_id, "author": info.get("author", ""),
               "status": "new", "percent": 0.0, "rendering": False, "seconds": 0.0,
               "chapters": info.get("totals", {}).get("chapters", 0), "formats": [], "player": None, "qa": None,
               "cover": None, "enclosure": None, "reason": "",
               "estimated_seconds": info.get("totals", {}).get("estimated_seconds", 0.0)}
        if e is not None:
            out.update({k: v for k, v in asdict(e).items() if k not in ("folder", "finished", "report_sha256")})
        out["has_source"] = self.source(book_id) is not None
        out["resumable"] = out["status"] == "partial" and not out["rendering"] and out["has_source"]
        return out

    def entries(self) -> list[dict]:
        return [self.entry(i) for i in self.ids()]

    def inspected(self, book_id: str) -> dict | None:
        data = read_json(self.state / "inspect" / f"{book_id}.json")
        return data or None

    def settings(self, book_id: str) -> dict:
        return read_json(self.state / "settings" / f"{book_id}.json")

    def save_settings(self, book_id: str, values: dict) -> None:
        write_bytes(self.state / "settings" / f"{book_id}.json", json_bytes(values), keep_same=True)

    # ---------------------------------------------------------------------------------- adding a book
    def inspect(self, cli: list[str], path: Path, shown_as: str, extra: tuple[str, ...] | list[str] = (),
                polyphones: bool = False) -> tuple[dict | None, str]:
        """Run `chattts-render inspect` on the book (the CLI's own reading: a book it refuses is refused here with
        its one line, `shown_as` in place of the path), its polyphones too when asked (they take a few seconds
        more: pypinyin's dictionary); (the trimmed report kept in inspect/<id>.json, "") or (None, the error)."""
        more = ["--polyphones"] if polyphones else []
        try:
            r = subprocess.run([*cli, "inspect", str(path), "--json", "--segments", *more, *extra],
                               capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S, stdin=subprocess.DEVNULL,
                               env=self.env)
        except subprocess.TimeoutExpired:
            return None, f"{shown_as}: the book could not be read in {INSPECT_TIMEOUT_S:g} s"
        if r.returncode != 0:
            lines = [line for line in r.stderr.splitlines() if line.strip() and "Warning" not in line]
            error = (lines[-1] if lines else f"inspect failed (exit {r.returncode})").replace(str(path), shown_as)
            return None, error.removeprefix("chattts-render: ").removeprefix("error: ")
        data = json.loads(r.stdout)
        data["segments"] = data.get("segments", [])[:SHOWN_SEGMENTS]
        if polyphones:
            data["polyphones"] = data["polyphones"][:SHOWN_POLYPHONES]
        data.pop("coverage_reports", None)
        data["source_path"] = shown_as
        write_bytes(self.state / "inspect" / f"{book_slug(path)}.json", json_bytes(data))
        return data, ""

    def added(self) -> dict[str, str]:
        return {k: v for k, v in read_json(self.state / "added.json").items() if isinstance(v, str)}

    def folder_books(self) -> list[dict]:
        """The books of the books folder: [{name, id, added}] (EPUB and TXT files, by name)."""
        if self.books_dir is None or not self.books_dir.is_dir():
            return []
        added = set(self.added().values())
        return [{"name": p.name, "id": book_slug(p), "added": str(p.resolve()) in added}
                for p in sorted(self.books_dir.iterdir()) if p.suffix.lower() in BOOK_SUFFIXES and p.is_file()
                and not p.name.startswith(".")]

    def folder_book(self, name: str) -> Path | None:
        """A file of the books folder named by the client: confined to it (no path out of it), an EPUB or TXT."""
        if self.books_dir is None:
            return None
        path = confined(self.books_dir, name)
        if path is None or path.parent != self.books_dir or not path.is_file() \
                or path.suffix.lower() not in BOOK_SUFFIXES:
            return None
        return path

    def add(self, path: Path) -> str:
        """Register a file of the books folder; its id."""
        data = self.added()
        data[book_slug(path)] = str(path)
        write_bytes(self.state / "added.json", json_bytes(data))
        return book_slug(path)
