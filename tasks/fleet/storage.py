"""Storage anywhere: the output root (and the book) as an fsspec URL (`s3://bucket/prefix`, `gs://…`, any
protocol fsspec knows; plain paths and `file://` stay local folders and never come here).  `Store` is the
filesystem and root a URL names; a render works in a scratch folder of its own per store (`scratch_root`:
`--scratch DIR`, default SCRATCH_DEFAULT; deletable at any time) that tasks/fleet/mirror.py keeps in step with the
store, around the run (tasks/fleet/attach.py).

Nothing in the store is ever half-written: every object is one PUT of a complete local file (S3, GCS and
Azure make an object visible only when its upload — single or multipart — completes), so a reader sees the
old object, the new one, or none; a temp key and a copy would double the traffic for nothing.  Credentials and
endpoints are the back-end's own (for S3: AWS_ACCESS_KEY_ID …, AWS_ENDPOINT_URL, ~/.aws/config); back-ends are
extras (`pip install chattts-render[s3]`); what goes wrong becomes one line (`describe`)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from engine.atomic import atomic_path
from tasks.errors import BookError, StoreError

SCRATCH_ENV = "CHATTTS_RENDER_SCRATCH"          # overrides the default scratch folder
SCRATCH_DEFAULT = Path("~/.cache/chattts-render/scratch")
LOCAL_PROTOCOLS = ("file", "local")
STORE_ID_CHARS = 16                             # hex chars of the store URL's hash naming its scratch folder
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
