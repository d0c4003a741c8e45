"""The catalogue scan: which books of a folder need rendering tonight, and why.

A book needs rendering when it is new, changed (its source file's sha256 differs from the one recorded after
its last render) or incomplete (its manifest has segments not done, or it was never packaged).  A book whose
render is in flight (its book-dir lock is held) is left alone.  Plain functions: flows/nightly.py starts one
render per book that needs it; the tests call these without a server."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from manifests.source import read_source_hash, source_sha256
from tasks.errors import BookError

CATALOGUE_SUFFIXES = (".epub", ".txt")

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
    from manifests import STATUS_DONE, load
    from tasks.audio.package import REPORT_NAME

    book_dir = Path(book_dir)
    table = load(book_dir)
    if table.num_rows == 0 or not (book_dir / REPORT_NAME).is_file():
        return False
    return all(s == STATUS_DONE for s in table.column("status").to_pylist())


def render_in_flight(book_dir: str | Path) -> bool:
    """True when a live process holds the book dir's lock (tried non-blockingly, released at once)."""
    from manifests.lock import BookLock, BookLocked

    if not Path(book_dir).is_dir():          # BookLock would create it: a missing dir has no holder
        return False
    try:
        BookLock(book_dir).acquire().release()
    except BookLocked:
        return True
    return False


def book_state(book: str | Path, out: str | Path) -> BookState:
    from tasks.options import book_slug

    book = Path(book).resolve()
    book_dir = Path(out).resolve() / book_slug(book)
    sha = source_sha256(book)
    if render_in_flight(book_dir):
        state = RUNNING
    elif not (book_dir / "manifest").is_dir():
        state = NEW
    elif (recorded := read_source_hash(book_dir)) is not None and recorded != sha:
        state = CHANGED
    elif not render_complete(book_dir):
        state = INCOMPLETE
    elif recorded is None:
        state = CHANGED      # rendered without the service (hash never recorded): a resume run records it
    else:
        state = COMPLETE
    return BookState(str(book), str(book_dir), sha, state)


def catalogue_books(catalogue: str | Path) -> list[Path]:
    """The .epub and .txt files under catalogue (recursively, hidden files skipped), in a stable order."""
    root = Path(catalogue)
    if not root.is_dir():
        raise BookError(str(root), "catalogue folder does not exist")
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in CATALOGUE_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def scan_catalogue(catalogue: str | Path, out: str | Path) -> list[BookState]:
    """Each book's state.  Two books that would share an output folder (same slug) are a BookError.  Files
    under `out` are outputs (a read-along EPUB), never books, when the output folder is inside the catalogue."""
    out_dir = Path(out).resolve()
    states = [book_state(p, out) for p in catalogue_books(catalogue) if not p.resolve().is_relative_to(out_dir)]
    seen: dict[str, str] = {}
    for s in states:
        if s.book_dir in seen:
            raise BookError(s.book, f"would render into the same folder as {seen[s.book_dir]} ({s.book_dir})")
        seen[s.book_dir] = s.book
    return states
