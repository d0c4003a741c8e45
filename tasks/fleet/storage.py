"""Storage anywhere: the output root (and the book) as an fsspec URL (`s3://bucket/prefix`, `gs://…`, any
protocol fsspec knows; plain paths and `file://` stay local folders and never come here).

The render itself is today's local render, unchanged, in a scratch folder (`--scratch DIR`, default
SCRATCH_DEFAULT; deletable at any time): atomic renames, the flock, the crash points.  The store is a layer
around it (`attached(book_dir, store)`):

    pull      before the run: the store's manifest parts replace the scratch's (the store is the truth), its
              book records (book.json, text.json, coverage.json, qa.json's frozen drift references, fixes.json,
              .chapters.json) too, and the audio of every done row that the scratch lacks is downloaded (atomic,
              fsynced); `fix` also pulls every take and check record of the segments it names (pull_takes)
    publish   after every manifest commit (manifests.store.on_commit): first the audio of the part's rows that
              the store does not hold yet (the kept take and every take listed in `takes`), then their check
              records (<key>[.t<k>].qa.json), then qa.json and fixes.json where they changed (the rows were judged
              against, or planned from, them), then the part itself; so a part in the store never names a file
              that is not there.  After the run: the outputs (chapter files, report.json, pages …), and the
              store's manifest parts that compaction folded away are deleted (the compacted part was uploaded
              first)
    lease     one render per book across machines (tasks/fleet/lease.py)

Nothing in the store is ever half-written: every object is one PUT of a complete local file (S3, GCS and
Azure make an object visible only when its upload — single or multipart — completes), so a reader sees the
old object, the new one, or none; a temp key and a copy would double the traffic for nothing.  An upload that
fails stops the render (RenderFailed, exit 1): what the store holds is a consistent earlier state and a rerun
on any machine resumes from it (a part committed locally but never published is adopted there from its
audio, as after any crash).  Credentials and endpoints are the back-end's own (for S3: AWS_ACCESS_KEY_ID …,
AWS_ENDPOINT_URL, ~/.aws/config); back-ends are extras (`pip install chattts-render[s3]`)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from engine.atomic import TEMP_PREFIX, atomic_path, read_json
from engine.atomic import scratch as temp_in
from manifests.source import SOURCE_RECORD
from tasks.bookdir import (BOOK_JSON, CHAPTERS_JSON, COVERAGE_JSON, FIXES_JSON, QA_JSON, REPORT_NAME, SEGMENTS_DIRNAME,
                           SHARD_FILE, TEXT_JSON, VOICES_DIRNAME, check_relpath, take_relpath)
from tasks.errors import BookError, RenderFailed, StoreError
from tasks.fleet.lease import Lease

SCRATCH_ENV = "CHATTTS_RENDER_SCRATCH"          # overrides the default scratch folder
SCRATCH_DEFAULT = Path("~/.cache/chattts-render/scratch")
LOCAL_PROTOCOLS = ("file", "local")
STORE_ID_CHARS = 16                             # hex chars of the store URL's hash naming its scratch folder
NOT_PUBLISHED = ("manifest", SEGMENTS_DIRNAME, VOICES_DIRNAME)   # per commit (the first two) or never
# What a render or fix reads besides the manifest, pulled from the store first (the drift references in qa.json stay
# frozen across machines, fixes.json's overrides apply at every plan, .chapters.json names the last packaging).
BOOK_RECORDS = (BOOK_JSON, TEXT_JSON, COVERAGE_JSON, QA_JSON, FIXES_JSON, CHAPTERS_JSON)
COMMIT_RECORDS = (QA_JSON, FIXES_JSON)          # committed rows depend on them: published (if changed) before a part
# Why a store cannot be used, by the exception's class name (back-ends raise their own classes).
NO_CREDENTIALS = ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError", "DefaultCredentialsError")
UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ConnectionError",
               "ServerDisconnectedError", "ReadTimeoutError", "TimeoutError")


def is_url(text: str | os.PathLike | None) -> bool:
    """True for a URL that names a remote store (`s3://…`); plain paths and file:// URLs are local."""
    text = str(text or "")
    proto, sep, _ = text.partition("://")
    return bool(sep) and proto.isidentifier() and proto.lower() not in LOCAL_PROTOCOLS


def local_path(text: str) -> str:
    """A file:// URL as the plain path it names; anything else as it is."""
    proto, sep, rest = text.partition("://")
    return rest if sep and proto.lower() in LOCAL_PROTOCOLS else text


def scratch_root(scratch: str | None, store_url: str) -> Path:
    """The scratch folder of one store: <scratch>/<hash of the store URL>/ (two stores never share books)."""
    base = Path(scratch or os.environ.get(SCRATCH_ENV) or SCRATCH_DEFAULT).expanduser()
    return base / hashlib.sha256(store_url.rstrip("/").encode()).hexdigest()[:STORE_ID_CHARS]


def describe(e: BaseException) -> str:
    """An exception as the short reason a user can act on (no credentials, unreachable, …)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & set(NO_CREDENTIALS):
        return "no credentials for this store (for S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws)"
    if names & set(UNREACHABLE):
        return "the store is unreachable (check the endpoint, e.g. AWS_ENDPOINT_URL, and the network)"
    if isinstance(e, PermissionError):
        return "access denied"
    if isinstance(e, FileNotFoundError):
        return "no such bucket or location"
    return " ".join(f"{type(e).__name__}: {e}".split())


class Store:
    """An fsspec filesystem and the root path in it that a URL names."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        try:
            from fsspec.core import url_to_fs

            self.fs, self.root = url_to_fs(self.url, skip_instance_cache=True)   # the environment as it is now
        except ImportError as e:
            raise StoreError(url, f"no storage back-end for this URL ({e}); install its extra, "
                                  "e.g. pip install chattts-render[s3]") from None
        except (ValueError, TypeError) as e:
            raise StoreError(url, f"not a storage URL: {e}") from None
        self.root = self.root.rstrip("/")

    def key(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def check(self) -> None:
        """Reach the store once before anything is written (StoreError: bad location, no credentials,
        unreachable); its bucket (or top folder) must exist."""
        try:                                    # a listing raises the back-end's own error (exists() hides it)
            self.fs.ls(self.root.split("/", 1)[0], detail=False, refresh=True)
        except Exception as e:  # noqa: BLE001 — every back-end's errors become one line
            raise StoreError(self.url, describe(e)) from None

    def put(self, local: Path, key: str) -> None:
        self.fs.put_file(str(local), key)

    def get(self, key: str, local: Path) -> None:
        """Download key to local atomically and fsynced (engine.atomic: a resume trusts what it finds)."""

        local.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(local, durable=True) as tmp:
            self.fs.get_file(key, str(tmp))

    def names(self, prefix: str) -> list[str]:
        """The file names directly under prefix (none when it does not exist)."""
        try:
            return sorted(p.rsplit("/", 1)[-1] for p in self.fs.ls(prefix, detail=False, refresh=True))
        except FileNotFoundError:
            return []


def fetched_book_path(url: str, scratch: str | None) -> Path:
    """Where fetch_book puts the book of this URL (its name there names the book dir)."""
    return scratch_root(scratch, url) / "book" / url.rstrip("/").rsplit("/", 1)[-1]


def fetch_book(url: str, scratch: str | None) -> Path:
    """A book given as a URL, downloaded into the scratch folder (BookError when it cannot be read)."""
    store = Store(url.rsplit("/", 1)[0])
    local = fetched_book_path(url, scratch)
    name = local.name
    try:
        if not store.fs.isfile(url_key := store.key(name)):
            raise BookError(url, "no such file in the store")
        store.get(url_key, local)
    except (BookError, StoreError):
        raise
    except Exception as e:  # noqa: BLE001
        raise BookError(url, describe(e)) from None
    return local


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

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}"

    def _put(self, rel: str) -> None:
        t0 = time.monotonic()
        try:
            self.store.put(self.book_dir / rel, self._key(rel))
        except Exception as e:  # noqa: BLE001 — the store was lost mid-render: exit 1, rerun resumes
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
            self.store.fs.rm_file(self._key(rel))
        except FileNotFoundError:
            pass

    def timings(self) -> dict:
        return {"store": f"{self.store.url}/{self.book_dir.name}", "published": self.puts,
                "publish_s": self.put_s, "pull_s": self.pull_s}

    def pull_manifest(self) -> None:
        """Make the scratch's manifest parts and source record the store's (the store is the truth: a part only
        the scratch holds was never published, and its rows' audio is adopted from the scratch if it is there)."""
        from manifests.store import manifest_dir

        mdir = manifest_dir(self.book_dir)
        remote = [n for n in self.store.names(self._key("manifest")) if _mirrored(n)]
        for p in (mdir.iterdir() if mdir.is_dir() else ()):
            if _mirrored(p.name) and p.name not in remote:
                p.unlink()
        for name in remote:
            self.store.get(self._key(f"manifest/{name}"), mdir / name)

    def pull_files(self, *rels: str) -> list[str]:
        """These files of the book, where the store holds them; returns those it held."""
        held = [rel for rel in rels if self.store.fs.isfile(self._key(rel))]
        for rel in held:
            self.store.get(self._key(rel), self.book_dir / rel)
        return held

    def pull_records(self) -> None:
        """What a render, `fix` or packaging reads besides the manifest (BOOK_RECORDS, the cover), so that they
        work from an empty scratch folder.  A commit record the store lacks stays as the scratch has it (no
        committed row depends on it yet: it goes up with the next commit)."""

        held = self.pull_files(*BOOK_RECORDS)
        self.digests.update({rel: _digest(self.book_dir / rel) for rel in COMMIT_RECORDS if rel in held})
        if cover := read_json(self.book_dir / BOOK_JSON).get("cover_file"):
            self.pull_files(cover)

    def pull(self, records: bool = True) -> None:
        """The store's manifest and records, and the audio of its done rows that the scratch lacks.  Every take
        and check record its rows list is in the store (published before the part that lists it): not uploaded
        again, not downloaded (pull_takes, for the segments `fix` names).  records=False: the manifest and audio
        only (a sharded render's parent after its shards: its own records, which it may have rewritten in
        prepare and not published yet, stay)."""
        from manifests.store import load

        t0 = time.monotonic()
        self.pull_manifest()
        if records:
            self.pull_records()
        kept, takes, checks = segment_files(load(self.book_dir).to_pylist())
        self.published.update(kept, takes, checks)
        for rel in kept:
            if not (self.book_dir / rel).is_file():
                self.store.get(self._key(rel), self.book_dir / rel)
        self.pull_s += time.monotonic() - t0

    def pull_takes(self, rows: list[dict]) -> None:
        """Every take of these rows' segments and its check record that the store holds and the scratch lacks
        (`fix --takes`, `--take K`, `--retake`: only the segments named, one listing per segments/ folder)."""
        t0 = time.monotonic()
        folders: dict[str, list[str]] = {}
        for key in sorted({r["content_key"] for r in rows}):
            folder = take_relpath(key, 1).rsplit("/", 1)[0]
            if folder not in folders:
                folders[folder] = self.store.names(self._key(folder))
            for rel in (f"{folder}/{n}" for n in folders[folder] if n.startswith(f"{key}.")):
                self.published.add(rel)
                if not (self.book_dir / rel).is_file():
                    self.store.get(self._key(rel), self.book_dir / rel)
        self.pull_s += time.monotonic() - t0

    def on_commit(self, part: Path) -> None:
        """A manifest part was committed: publish its rows' audio (kept, then every take), their check records,
        the commit records that changed, then the part."""
        import pyarrow.parquet as pq

        rows = pq.read_table(part, columns=["status", "content_key", "audio_path", "takes"]).to_pylist()
        kept, takes, records = segment_files(rows)
        for rel in kept:                              # must be here: a done row's audio
            self._put_once(rel)
        for rel in (*takes, *records):                # here unless a pull brought only the kept take
            if (self.book_dir / rel).is_file():
                self._put_once(rel)
        for rel in COMMIT_RECORDS if self.records else ():
            if (self.book_dir / rel).is_file() and self.digests.get(rel) != (d := _digest(self.book_dir / rel)):
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
        from manifests.store import manifest_dir
        from manifests.store import PART_RE

        local = {p.name for p in manifest_dir(self.book_dir).iterdir()}
        for name in self.store.names(self._key("manifest")):
            if PART_RE.match(name) and name not in local:
                self.store.fs.rm_file(self._key(f"manifest/{name}"))
        if SOURCE_RECORD in local:                   # which source this render read (the nightly scan's)
            self._put(f"manifest/{SOURCE_RECORD}")
        for p in sorted(self.book_dir.rglob("*")):
            rel = p.relative_to(self.book_dir).as_posix()
            if p.is_file() and rel.split("/")[0] not in NOT_PUBLISHED and not p.name.startswith(TEMP_PREFIX):
                self._put(rel)


def segment_files(rows: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """The segments/ files that manifest rows name, each once: (the done rows' kept audio, the audio of every take
    their `takes` list, those takes' check records)."""
    from manifests.store import STATUS_DONE

    kept, takes, records = {}, {}, {}
    for r in rows:
        if r["status"] == STATUS_DONE and r["audio_path"]:
            kept[r["audio_path"]] = None
        for e in json.loads(r.get("takes") or "[]"):
            if e.get("audio_path"):
                takes[e["audio_path"]] = None
            if r.get("content_key") and e.get("take"):
                records[check_relpath(r["content_key"], e["take"])] = None
    return list(kept), [t for t in takes if t not in kept], list(records)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _mirrored(name: str) -> bool:
    """A file of the manifest folder that the store holds: a part or the source record."""
    from manifests.store import PART_RE

    return bool(PART_RE.match(name)) or name == SOURCE_RECORD


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
    from manifests.store import on_commit

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
    for name in pub.store.names(pub._key(VOICES_DIRNAME)):
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

    from manifests.store import on_commit

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
    from manifests.store import load

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
                    store.get(pub._key(rel), pub.book_dir / rel)
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
