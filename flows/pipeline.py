"""The render pipeline's composition, shared by the CLI (direct calls) and the Prefect flow (task calls).
No Prefect import here: the CLI without a server never pays for it."""
from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from manifests.lock import BookLock
from manifests.source import record_source_hash, source_sha256
from tasks import stages
from tasks.errors import disk_full_error
from tasks.fleet import shards
from tasks.fleet.attach import attached, attached_audition, attached_shard
from tasks.options import RenderOptions
from tasks.site.audition import write_audition
from tasks.synthesize.audition import audition as render_audition
from tasks.synthesize.options import AuditionOptions

Call = Callable[..., Any]     # call(stage_function, *args) -> result


def direct(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def render(opts: RenderOptions, *, call: Call = direct, on_done: Callable[[int, int], None] | None = None,
           on_prepared: Callable[[Path], None] | None = None, fan_out: Callable | None = None) -> dict:
    """Render one book; returns {book_dir, rendered, adopted, already_done, failed, total}.  Resumable: rerun
    after any crash.  on_prepared(book_dir) runs once the manifest is planned, under the book's lock.
    fan_out(book_dir, opts, store) -> counts replaces the synthesize stage (a sharded render, flows/shards.py).
    At the end, the source file's sha256 is recorded (manifest/source.json, published with the outputs: the
    nightly scan compares it with the file's)."""
    with locked(opts.book_dir), attached(opts.book_dir, opts.store) as store:   # a store: pulled first, published
        book_dir = Path(call(stages.prepare, opts))
        sha = source_sha256(opts.book)               # the file prepare read (it refuses a missing one)
        if on_prepared is not None:
            on_prepared(book_dir)
        if fan_out is None:
            counts = call(stages.synthesize, book_dir, opts, on_done)
        else:
            counts = fan_out(book_dir, opts, store)
        call(stages.package, book_dir, opts.assemble, opts.package, opts.allow_gaps)
        record_source_hash(book_dir, opts.book, sha)
    return {"book_dir": book_dir, **counts, **(store.timings() if store else {})}


def render_shard(opts: RenderOptions, index: int, token: str, *, call: Call = direct,
                 on_done: Callable[[int, int], None] | None = None) -> dict:
    """One shard of a sharded render whose parent holds the book (its lock, lease and slot are the parent's:
    the token, checked against the book's shard file, is the shard's authority).  Renders its rows only."""

    with attached_shard(opts.book_dir, opts.store, shards.writer_tag(token, index)) as book_dir:
        return call(stages.synthesize, book_dir, opts, on_done, shards.shard(book_dir, index, token))


def audition(opts: RenderOptions, aud: AuditionOptions) -> dict:
    """`chattts-render voices BOOK`: candidate voices read one passage (tasks/synthesize/audition.py) into voices/ and
    its page (tasks/site/audition.py), under the book's lock; with a store (--out URL), in the scratch folder and
    published to the store's OUT/<book>/voices/."""

    with locked(opts.book_dir), attached_audition(opts.book_dir, opts.store) as store:
        heard = render_audition(opts.book, opts.book_dir, aud, lambda: stages.get_engine(opts.engine), opts.segment,
                                opts.language, opts.guard)
        result = write_audition(opts.book_dir, heard)
    if store is not None:
        result.update(store=f"{store.store.url}/{opts.book_dir.name}/voices", published=store.puts)
    return result


@contextmanager
def locked(book_dir: Path):
    """Hold the book's lock (a killed run's temp files removed first).  On a failure, the folders this run
    created (the book dir, its output root) are taken back while still empty, and a full disk is named as one."""
    created = [p for p in (book_dir.parent, book_dir) if not p.exists()]
    try:
        with BookLock(book_dir):
            stages.clean_temp_files(book_dir)            # a killed run's leftovers; no other writer is alive
            yield
    except Exception as e:
        _remove_created(created)          # a failure before anything was written leaves no empty folder behind
        full = disk_full_error(e, book_dir)
        if full is None or full is e:
            raise
        raise full from e


def _remove_created(created: list[Path]) -> None:
    """Take back the folders this run created, where they are still empty."""
    for p in reversed(created):
        try:
            p.rmdir()
        except OSError:
            pass
