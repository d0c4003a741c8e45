"""The per-book manifest: a Parquet dataset at OUT/<book>/manifest/, one row per segment.

Crash-safe by construction: every commit writes a *new* part file (engine.atomic: temp file, fsync, rename),
never rewrites one.  The latest state of a segment is its row in the highest-numbered part that holds it; the
segment set is the one of the latest plan.  A torn or unreadable part (a crash mid-write can at worst leave a
`.tmp-` file, which readers never look at) is skipped with a warning on read.  `compact()` folds all parts into
one.  Queries are plain functions over the `pyarrow.Table` that `load()` returns.

Project code imports what it uses from manifests.store, and a row's status values from manifests.status
(importing `manifests`, manifests.status or manifests.lock loads no pyarrow); `manifests.load(...)` and the other
names below still work as users' scripts write them (README), loaded on first use.
"""
STORE_NAMES = ("COLUMN_DEFAULTS", "SCHEMA", "STATUS_DONE", "STATUS_FAILED", "STATUS_PENDING", "commit", "compact",
               "load", "manifest_dir", "summary")


def __getattr__(name: str):
    if name not in STORE_NAMES:
        raise AttributeError(f"module 'manifests' has no attribute {name!r}")
    from manifests import store  # pyarrow: loaded when a script asks for the manifest

    return getattr(store, name)
