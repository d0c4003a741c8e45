"""A book dir mirrored to and from its place in a store (OUT_URL/<slug>/), by a `Publisher`; and read-only views of
a store's books (`book_view`, `catalogue_view`).  The render itself is the local one, unchanged, in a scratch folder
(tasks/fleet/storage.py); around it (tasks/fleet/attach.py) the store's state is pulled before the run and every
commit published after it, the files a part names before the part, so a part in the store never names a file that
is not there.  An upload that fails stops the render (RenderFailed): the store holds a consistent earlier state
and a rerun anywhere resumes from it.  The pull and publish steps: docs/modules.md, "A book mirrored to a store".
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

from engine.atomic import TEMP_PREFIX, file_sha256, read_json, scratch as temp_in
from manifests.source import SOURCE_RECORD
from manifests.status import STATUS_DONE
from manifests.store import PART_RE, load, manifest_dir
from tasks.bookdir import (
    BOOK_JSON,
    CHAPTERS_JSON,
    COVERAGE_JSON,
    FIXES_JSON,
    QA_JSON,
    REPORT_NAME,
    SEGMENTS_DIRNAME,
    TEXT_JSON,
    VOICES_DIRNAME,
    check_relpath,
    take_relpath,
)
from tasks.errors import BookError, RenderFailed, StoreError
from tasks.fleet.lease import Lease
from tasks.fleet.storage import Store, describe, scratch_root

NOT_PUBLISHED = ("manifest", SEGMENTS_DIRNAME, VOICES_DIRNAME)   # per commit (the first two) or never
# What a render or fix reads besides the manifest, pulled from the store first (the drift references in qa.json stay
# frozen across machines, fixes.json's overrides apply at every plan, .chapters.json names the last packaging).
BOOK_RECORDS = (BOOK_JSON, TEXT_JSON, COVERAGE_JSON, QA_JSON, FIXES_JSON, CHAPTERS_JSON)
COMMIT_RECORDS = (QA_JSON, FIXES_JSON)          # committed rows depend on them: published (if changed) before a part


class Publisher:
    """One book's place in the store: OUT_URL/<slug>/, mirrored from the scratch book dir."""

    def __init__(self, store: Store, book_dir: Path, records: bool = True):
        self.store, self.book_dir = store, Path(book_dir)
        self.prefix = store.key(self.book_dir.name)
        self.published: set[str] = set()        # relative paths of segment files (audio, check records) it holds
        self.records = records                  # publish COMMIT_RECORDS with the parts (a shard does not)
        self.digests: dict[str, str] = {}       # COMMIT_RECORDS as the store holds them: sha256 of their bytes
        self.put_s = self.pull_s = 0.0          # s spent uploading / pulling (what the store costs a render)
        self.puts = 0

    def key(self, rel: str) -> str:
        """The store key of one file of the book."""
        return f"{self.prefix}/{rel}"

    def _put(self, rel: str) -> None:
        t0 = time.monotonic()
        try:
            self.store.put(self.book_dir / rel, self.key(rel))
        except Exception as e:                  # the store was lost mid-render: exit 1, rerun resumes
            raise RenderFailed(self.store.url, f"publishing {rel} failed: {describe(e)}; the manifest is "
                                               "intact in the store and here, rerun to resume") from e
        self.put_s += time.monotonic() - t0
        self.puts += 1

    def publish(self, rel: str) -> None:
        """Upload one file of the book dir now (a sharded render's shard file, tasks/fleet/shards.py)."""
        self._put(rel)

    def remove(self, rel: str) -> None:
        """Delete one object of the book from the store, if it is there."""
        try:
            self.store.fs.rm_file(self.key(rel))
        except FileNotFoundError:
            pass

    def timings(self) -> dict:
        return {"store": f"{self.store.url}/{self.book_dir.name}", "published": self.puts,
                "publish_s": self.put_s, "pull_s": self.pull_s}

    def pull_manifest(self) -> None:
        """Make the scratch's manifest parts and source record the store's (the store is the truth: a part only
        the scratch holds was never published, and its rows' audio is adopted from the scratch if it is there)."""
        mdir = manifest_dir(self.book_dir)
        remote = [n for n in self.store.names(self.key("manifest")) if _mirrored(n)]
        for p in (mdir.iterdir() if mdir.is_dir() else ()):
            if _mirrored(p.name) and p.name not in remote:
                p.unlink()
        for name in remote:
            self.store.get(self.key(f"manifest/{name}"), mdir / name)

    def pull_files(self, *rels: str) -> list[str]:
        """These files of the book, where the store holds them; returns those it held."""
        held = [rel for rel in rels if self.store.fs.isfile(self.key(rel))]
        for rel in held:
            self.store.get(self.key(rel), self.book_dir / rel)
        return held

    def pull_records(self) -> None:
        """What a render, `fix` or packaging reads besides the manifest (BOOK_RECORDS, the cover), so that they
        work from an empty scratch folder.  A commit record the store lacks stays as the scratch has it (no
        committed row depends on it yet: it goes up with the next commit)."""

        held = self.pull_files(*BOOK_RECORDS)
        self.digests.update({rel: file_sha256(self.book_dir / rel) for rel in COMMIT_RECORDS if rel in held})
        if cover := read_json(self.book_dir / BOOK_JSON).get("cover_file"):
            self.pull_files(cover)

    def pull(self, records: bool = True) -> None:
        """The store's manifest and records, and the audio of its done rows that the scratch lacks.  Every take
        and check record its rows list is in the store (published before the part that lists it): not uploaded
        again, not downloaded (pull_takes, for the segments `fix` names).  records=False: the manifest and audio
        only (a sharded render's parent after its shards: its own records, which it may have rewritten in
        prepare and not published yet, stay)."""
        t0 = time.monotonic()
        self.pull_manifest()
        if records:
            self.pull_records()
        kept, takes, checks = segment_files(load(self.book_dir).to_pylist())
        self.published.update(kept, takes, checks)
        for rel in kept:
            if not (self.book_dir / rel).is_file():
                self.store.get(self.key(rel), self.book_dir / rel)
        self.pull_s += time.monotonic() - t0

    def pull_takes(self, rows: list[dict]) -> None:
        """Every take of these rows' segments and its check record that the store holds and the scratch lacks
        (`fix --takes`, `--take K`, `--retake`: only the segments named, one listing per segments/ folder)."""
        t0 = time.monotonic()
        folders: dict[str, list[str]] = {}
        for key in sorted({r["content_key"] for r in rows}):
            folder = take_relpath(key, 1).rsplit("/", 1)[0]
            if folder not in folders:
                folders[folder] = self.store.names(self.key(folder))
            for rel in (f"{folder}/{n}" for n in folders[folder] if n.startswith(f"{key}.")):
                self.published.add(rel)
                if not (self.book_dir / rel).is_file():
                    self.store.get(self.key(rel), self.book_dir / rel)
        self.pull_s += time.monotonic() - t0

    def on_commit(self, part: Path) -> None:
        """A manifest part was committed: publish its rows' audio (kept, then every take), their check records,
        the commit records that changed, then the part."""
        rows = pq.read_table(part, columns=["status", "content_key", "audio_path", "takes"]).to_pylist()
        kept, takes, records = segment_files(rows)
        for rel in kept:                              # must be here: a done row's audio
            self._put_once(rel)
        for rel in (*takes, *records):                # here unless a pull brought only the kept take
            if (self.book_dir / rel).is_file():
                self._put_once(rel)
        for rel in COMMIT_RECORDS if self.records else ():
            if (self.book_dir / rel).is_file() and self.digests.get(rel) != (d := file_sha256(self.book_dir / rel)):
                self._put(rel)
                self.digests[rel] = d
        self._put(f"manifest/{part.name}")

    def _put_once(self, rel: str) -> None:
        if rel not in self.published:
            self._put(rel)
            self.published.add(rel)

    def finish(self) -> None:
        """After the run: delete the store's parts that compaction folded away, publish the source record and
        the outputs."""
        local = {p.name for p in manifest_dir(self.book_dir).iterdir()}
        for name in self.store.names(self.key("manifest")):
            if PART_RE.match(name) and name not in local:
                self.store.fs.rm_file(self.key(f"manifest/{name}"))
        if SOURCE_RECORD in local:                   # which source this render read (the nightly scan's)
            self._put(f"manifest/{SOURCE_RECORD}")
        for p in sorted(self.book_dir.rglob("*")):
            rel = p.relative_to(self.book_dir).as_posix()
            if p.is_file() and rel.split("/")[0] not in NOT_PUBLISHED and not p.name.startswith(TEMP_PREFIX):
                self._put(rel)


def segment_files(rows: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """The segments/ files that manifest rows name, each once: (the done rows' kept audio, the audio of every take
    their `takes` list, those takes' check records)."""
    kept: dict[str, None] = {}                 # dicts as ordered sets
    takes: dict[str, None] = {}
    records: dict[str, None] = {}
    for r in rows:
        if r["status"] == STATUS_DONE and r["audio_path"]:
            kept[r["audio_path"]] = None
        for e in json.loads(r.get("takes") or "[]"):
            if e.get("audio_path"):
                takes[e["audio_path"]] = None
            if r.get("content_key") and e.get("take"):
                records[check_relpath(r["content_key"], e["take"])] = None
    return list(kept), [t for t in takes if t not in kept], list(records)


def _mirrored(name: str) -> bool:
    """A file of the manifest folder that the store holds: a part or the source record."""
    return bool(PART_RE.match(name)) or name == SOURCE_RECORD


@contextmanager
def catalogue_view(store: Store, scratch: str | None = None):
    """Every book of a store's output root as the catalogue reads it (`catalogue URL`), mirrored into a temp
    folder of the store's scratch folder: yields (the temp folder, [(book dir, stat, rendering)]), each book dir
    holding the book's manifest, book.json and report.json; `stat` answers for the store's own files (bytes and
    modified time, tasks.site.library.Stat) and `rendering` is its live lease.  Nothing else is downloaded.
    BookError when nothing is stored under the root (no such output root)."""
    try:
        listing = store.fs.ls(store.root, detail=True, refresh=True)
    except FileNotFoundError:
        listing = []
    except Exception as e:  # noqa: BLE001 — every back-end's errors become one line
        raise StoreError(store.url, describe(e)) from None
    if not listing:
        raise BookError(store.url, "no such output root in the store (nothing is stored under it)")
    root = scratch_root(scratch, store.url)
    root.mkdir(parents=True, exist_ok=True)
    with temp_in(root, directory=True) as tmp:
        books = []
        for info in sorted(listing, key=lambda i: i["name"]):
            slug = info["name"].rstrip("/").rsplit("/", 1)[-1]
            if info["type"] != "directory" or slug.startswith("."):
                continue
            pub = Publisher(store, tmp / slug)
            pub.pull_manifest()
            if not (pub.book_dir / "manifest").is_dir():
                continue                                 # not a book: no manifest part in the store
            top = {i["name"].rsplit("/", 1)[-1]: i for i in store.fs.ls(pub.prefix, detail=True, refresh=True)
                   if i["type"] == "file"}
            for rel in (BOOK_JSON, REPORT_NAME):
                if rel in top:
                    store.get(pub.key(rel), pub.book_dir / rel)
            books.append((pub.book_dir, _store_stat(store, pub.prefix, top), Lease(store, pub.prefix).held()))
        yield tmp, books


def _store_stat(store: Store, prefix: str, top: dict[str, dict]):
    """A book's tasks.site.library.Stat in the store: its top-level files from one listing, others asked for."""
    def stat(rel: str) -> tuple[int, float | None] | None:
        info = top.get(rel)
        if info is None and "/" in rel:
            try:
                info = store.fs.info(f"{prefix}/{rel}")
            except FileNotFoundError:
                return None
        if info is None or info.get("type") != "file":
            return None
        return int(info.get("size") or 0), _modified(store, info)
    return stat


def _modified(store: Store, info: dict) -> float | None:
    """An object's modified time (s since the epoch) from its listing, in the back-end's own field."""
    for field in ("LastModified", "last_modified", "mtime", "created"):
        value = info.get(field)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
    try:
        return store.fs.modified(info["name"]).timestamp()
    except Exception:  # noqa: BLE001 — a back-end without modified times: the feed has no date for it
        return None


@contextmanager
def book_view(store: Store, slug: str, scratch: Path | None = None):
    """What tells a book's state in the store — its manifest (parts, source record) and report.json —
    mirrored into a temp folder of the store's scratch folder; yields the mirrored book dir."""

    root = Path(scratch) if scratch is not None else scratch_root(None, store.url)
    root.mkdir(parents=True, exist_ok=True)
    with temp_in(root, directory=True) as tmp:
        pub = Publisher(store, tmp / slug)
        pub.pull_manifest()
        pub.pull_files(REPORT_NAME)
        yield pub.book_dir
