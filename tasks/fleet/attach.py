"""A store around a command on a book dir in its scratch folder (tasks/fleet/storage.py, mirror.py): `attached`
(a render, `package`, `fix`: the lease, pull, publish every commit, publish the outputs), `attached_audition`
(`voices`), `attached_shard` (one shard of a sharded render), `viewed` and `load_manifest` (`status`, `fix
--takes`: read, not held).  Without a store (None) each is the local command exactly as it was."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from manifests.store import load, on_commit
from tasks.bookdir import BOOK_JSON, QA_JSON, SHARD_FILE, VOICES_DIRNAME
from tasks.fleet.lease import Lease
from tasks.fleet.mirror import Publisher, book_view
from tasks.fleet.storage import Store


def _publisher(book_dir: Path, store: str | None) -> Publisher | None:
    """A publisher of book_dir into the store at URL `store`, checked (StoreError when it cannot be used); None
    without one."""
    if store is None:
        return None
    checked = Store(store)
    checked.check()
    return Publisher(checked, book_dir)


@contextmanager
def attached(book_dir: Path, store: str | None):
    """Around a render (or `package`, `fix`) of book_dir (a store's scratch folder), under its local lock: with a
    store (its URL), check it, take the book's lease, pull, publish every commit, and publish the outputs at the
    end.  Without one, nothing happens (the local render is exactly what it was)."""
    if (pub := _publisher(book_dir, store)) is None:
        yield None
        return
    with Lease(pub.store, pub.prefix):
        pub.pull()
        with on_commit(book_dir, pub.on_commit):
            yield pub
        pub.finish()


@contextmanager
def attached_audition(book_dir: Path, store: str | None):
    """Around an audition (`voices BOOK --out URL`) in the scratch book dir, under its local lock: the store's
    manifest first (the book's stored voice is a candidate), then the voices/ folder published (files no longer
    there removed from the store).  No lease: an audition writes only voices/, which a render never publishes,
    and reads the manifest as it is.  Without a store, nothing happens."""
    if (pub := _publisher(book_dir, store)) is None:
        yield None
        return
    pub.pull_manifest()
    yield pub
    folder = book_dir / VOICES_DIRNAME
    local = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    for name in local:
        pub.publish(f"{VOICES_DIRNAME}/{name}")
    for name in pub.store.names(pub.key(VOICES_DIRNAME)):
        if name not in local:
            pub.remove(f"{VOICES_DIRNAME}/{name}")


@contextmanager
def attached_shard(book_dir: Path, store: str | None, writer: str):
    """Around one shard of a sharded render (flows/shards.py), whose parent holds the book (flock, lease,
    slot).  Yields the book dir the shard renders in: without a store the parent's own; with one, a scratch
    folder of its own (`<scratch>/.shards/<writer>/<book>`: other shards may run on this machine) holding the
    store's manifest, shard file and qa.json, every commit published as a render's is (its takes and records, but
    never a qa.json: the store's drift references are the parent's); the folder goes at the end."""
    if store is None:
        yield book_dir
        return

    checked = Store(store)
    checked.check()
    root = book_dir.parent / ".shards" / writer
    pub = Publisher(checked, root / book_dir.name, records=False)    # qa.json in the store is the parent's
    try:
        pub.pull_manifest()
        pub.pull_files(SHARD_FILE, QA_JSON)             # absent: the shard is refused (tasks.fleet.shards.shard)
        with on_commit(pub.book_dir, pub.on_commit):
            yield pub.book_dir
    finally:
        shutil.rmtree(root, ignore_errors=True)


def load_manifest(book_dir: Path, store: str | None):
    """The book's manifest table as the store holds it (`status BOOK --out URL`), read through a temp folder."""
    with viewed(book_dir, store) as (view, _):
        return load(view)


@contextmanager
def viewed(book_dir: Path, store: str | None):
    """The book at book_dir read, not held (`status`, `fix --takes`): yields (the book dir to read, a Publisher of it
    or None).  Without a store, book_dir and None; with one (checked), book_view's temp mirror of the store's book
    (in book_dir's scratch folder) — manifest, report.json, book.json — whose publisher pulls the takes wanted
    (Publisher.pull_takes)."""
    if store is None:
        yield book_dir, None
        return
    checked = Store(store)
    checked.check()
    with book_view(checked, book_dir.name, book_dir.parent) as view:
        pub = Publisher(checked, view)
        pub.pull_files(BOOK_JSON)
        yield view, pub
