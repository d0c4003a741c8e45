"""One flow run per book under a Prefect server, across machines: for a render into a store (`out` a URL,
no shared filesystem), a global concurrency limit of 1 named for the book's output (the store URL and the
book's folder name), created on first use.  A render into a folder keeps the flock alone (one filesystem;
the kernel frees it the moment its holder dies, where a Prefect slot waits for its lease to expire).
A run that finds the slot taken is refused with BookLocked at once, so a deployment run ends as *skipped,
already running*, as it does when it finds the flock held; a free slot is waited for up to ACQUIRE_TIMEOUT_S (a
busy server answers late: a slow answer must not read as "held"; one taken in between is refused after it).
Prefect renews the slot's lease while the run lives; the slot of a run killed outright is free again when its
lease expires (SLOT_LEASE_S).
The flock (one filesystem) and the store's lease (CLI renders, tasks/fleet/lease.py) still apply inside."""
from __future__ import annotations

import hashlib
from contextlib import ExitStack, contextmanager
from pathlib import Path

from manifests.lock import BookLocked

LIMIT_PREFIX = "render-book-"
ACQUIRE_TIMEOUT_S = 30.0       # s: taking a slot seen free (a held one is refused without waiting)
SLOT_LEASE_S = 60.0            # s: how long the slot of a run that died stays taken (Prefect's minimum lease)
HASH_CHARS = 12                # hex chars of the output's hash in the limit's name


def limit_name(opts) -> str:
    """`render-book-<book folder>-<hash of where it is written>`: the same book in two outputs is two books."""
    where = opts.store or str(Path(opts.out).resolve())
    digest = hashlib.sha256(f"{where}/{opts.book_dir.name}".encode()).hexdigest()[:HASH_CHARS]
    return f"{LIMIT_PREFIX}{opts.book_dir.name}-{digest}"


@contextmanager
def one_run_per_book(opts):
    """Hold the book's slot while the block runs (a render into a store); BookLocked when another run holds it."""
    if opts.store is None:
        yield
        return
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.concurrency.sync import concurrency
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    name = limit_name(opts)
    locked = BookLocked(f"{opts.store or opts.out}/{opts.book_dir.name}: already being rendered by another flow run "
                        f"(Prefect concurrency limit {name})")
    with get_client(sync_client=True) as client:
        try:
            if client.read_global_concurrency_limit_by_name(name).active_slots:
                raise locked
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:          # another run created it in between
                pass
    with ExitStack() as held:
        try:
            held.enter_context(concurrency(name, occupy=1, timeout_seconds=ACQUIRE_TIMEOUT_S,
                                           lease_duration=SLOT_LEASE_S, strict=True))
        except TimeoutError:
            raise locked from None
        yield
