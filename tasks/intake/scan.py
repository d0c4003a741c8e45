"""The nightly's intake: which books of a folder (the nightly flow's `catalogue` parameter) need rendering
tonight, and why.  (The output root's catalogue page and feed are tasks/site/catalogue.py's.)

A book needs rendering when it is new, changed (its source file's sha256 differs from the one recorded after
its last render) or incomplete (its manifest has segments not done, or it was never packaged).  A book whose
render is in flight (its book-dir lock is held; in a store, its lease) is left alone.  The output root may be
a store URL: the state is then read from the store (tasks/fleet/mirror.py book_view).  Plain functions: flows/nightly.py
starts one render per book that needs it; the tests call these without a server."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from manifests.lock import render_in_flight
from manifests.source import read_source_hash, source_sha256
from manifests.status import STATUS_DONE
from manifests.store import load
from tasks.bookdir import REPORT_NAME, book_slug
from tasks.errors import BookError
from tasks.fleet.lease import Lease
from tasks.fleet.mirror import book_view
from tasks.fleet.storage import Store, is_url

BOOK_SUFFIXES = (".epub", ".txt")

# Why a book is (not) rendered tonight.
NEW, CHANGED, INCOMPLETE, COMPLETE, RUNNING = "new", "changed", "incomplete", "complete", "running"
TO_RENDER = (NEW, CHANGED, INCOMPLETE)


@dataclass(frozen=True)
class BookState:
    book: str           # absolute path of the source file
    book_dir: str       # OUT/<slug>
    sha256: str
    state: str          # new | changed | incomplete | complete | running

    @property
    def needs_render(self) -> bool:
        return self.state in TO_RENDER


def render_complete(book_dir: str | Path) -> bool:
    """Every segment of the latest plan is done and the outputs were packaged (report.json exists)."""
    book_dir = Path(book_dir)
    table = load(book_dir)
    if table.num_rows == 0 or not (book_dir / REPORT_NAME).is_file():
        return False
    return all(s == STATUS_DONE for s in table.column("status").to_pylist())


def book_state(book: str | Path, out: str | Path, store=None) -> BookState:
    """The book's state in `out`: a folder, or a store URL with `store` its tasks.fleet.storage.Store (the state is
    read from the store's copy of the manifest, source record and report.json; "running" is its live lease)."""

    book = Path(book).resolve()
    slug = book_slug(book)
    sha = source_sha256(book)
    if store is None:
        book_dir = Path(out).resolve() / slug
        return BookState(str(book), str(book_dir), sha, _state(book_dir, sha, render_in_flight(book_dir)))

    with book_view(store, slug) as view:
        state = _state(view, sha, Lease(store, store.key(slug)).held())
    return BookState(str(book), f"{store.url}/{slug}", sha, state)


def _state(book_dir: Path, sha: str, running: bool) -> str:
    if running:
        return RUNNING
    if not (book_dir / "manifest").is_dir():
        return NEW
    if (recorded := read_source_hash(book_dir)) is not None and recorded != sha:
        return CHANGED
    if not render_complete(book_dir):
        return INCOMPLETE
    if recorded is None:
        return CHANGED       # rendered without the service (hash never recorded): a resume run records it
    return COMPLETE


def books_in(folder: str | Path) -> list[Path]:
    """The .epub and .txt files under folder (recursively, hidden files skipped), in a stable order."""
    root = Path(folder)
    if not root.is_dir():
        raise BookError(str(root), "catalogue folder does not exist")
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in BOOK_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def scan_books(folder: str | Path, out: str | Path) -> list[BookState]:
    """Each book's state; `out` a folder or a store URL (StoreError when it cannot be used).  Two books that
    would share an output folder (same slug) are a BookError.  Files under `out` are outputs (a read-along
    EPUB), never books, when the output folder is inside the books' folder."""

    store, books = None, books_in(folder)
    if is_url(out):
        store = Store(str(out))
        store.check()
    else:
        out_dir = Path(out).resolve()
        books = [p for p in books if not p.resolve().is_relative_to(out_dir)]
    states = [book_state(p, out, store) for p in books]
    seen: dict[str, str] = {}
    for s in states:
        if s.book_dir in seen:
            raise BookError(s.book, f"would render into the same folder as {seen[s.book_dir]} ({s.book_dir})")
        seen[s.book_dir] = s.book
    return states
