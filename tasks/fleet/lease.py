"""One render per book across machines for CLI renders into a store: a lease object OUT_URL/<book>/.lease.json
holding {holder, expires}, created with a conditional PUT (S3 `If-None-Match: *`: fsspec's mode="create"),
renewed every RENEW_EVERY_S while the render runs, deleted at its end.

A lease whose holder died on this machine (same host and boot, its pid gone) is free at once, as an flock
would be.  Limits (documented in docs/service.md): a lease whose holder died on another machine is taken over
only once it has expired (up to LEASE_TTL_S after the death); the takeover of an expired lease is a
read-check-overwrite, not atomic, so two machines taking over the same expired lease at the same instant can both
go on (the one whose write was overwritten stops renewing when it sees the other holder, but does not stop
rendering); expiry is judged by the clocks of the machines (keep them in NTP sync); conditional create is tested
with s3fs (S3 and S3-compatible stores) only.
A holder that cannot renew (the store lost) keeps rendering into its scratch folder and fails when it next
publishes.  Under a Prefect server, Prefect's concurrency control does this job for flow runs."""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

from manifests.lock import BookLocked
from tasks.bookdir import LEASE_NAME

LEASE_TTL_S = 120.0          # s: a lease not renewed for this long is free
RENEW_EVERY_S = 30.0         # s between renewals (well under the TTL: three may fail before it expires)
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")     # tells a reboot from the same boot (pids are reused)


def this_machine() -> str:
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = "?"
    return f"{socket.gethostname()}/{boot}"


def holder_is_dead(holder: str) -> bool:
    """True when the holder ran on this machine, in this boot, and its process is gone."""
    machine, _, rest = holder.rpartition(":")[0].rpartition(":")
    if machine != this_machine() or not rest.isdigit():
        return False
    try:
        os.kill(int(rest), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def live(lease: dict | None) -> bool:
    """A lease read from the store is live: unexpired and its holder not known to be dead."""
    return lease is not None and lease["expires"] > time.time() and not holder_is_dead(lease["holder"])


class Lease:
    def __init__(self, store, prefix: str, ttl_s: float = LEASE_TTL_S):
        self.store, self.key, self.ttl_s = store, f"{prefix}/{LEASE_NAME}", ttl_s
        self.holder = f"{this_machine()}:{os.getpid()}:{secrets.token_hex(4)}"   # machine:pid:token
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "expires": time.time() + self.ttl_s}).encode()

    def read(self) -> dict | None:
        try:
            return json.loads(self.store.fs.cat_file(self.key))
        except FileNotFoundError:
            return None
        except ValueError:
            return {"holder": "?", "expires": 0.0}          # unreadable: treated as expired

    def held(self) -> bool:
        """True when a render holds the lease now (the nightly scan's "running" for a book in a store)."""
        return live(self.read())

    def acquire(self) -> Lease:
        fs = self.store.fs
        try:
            fs.pipe_file(self.key, self._body(), mode="create")
        except FileExistsError:
            if (current := self.read()) is not None and live(current):
                raise BookLocked(f"{self.store.url}/{self.key.rsplit('/', 2)[-2]}: already being rendered by "
                                 f"{current['holder']} (lease until {time.ctime(current['expires'])}); wait "
                                 "for it to finish or stop it") from None
            fs.pipe_file(self.key, self._body())          # expired, or its holder died here: take it over
        self._thread = threading.Thread(target=self._renew, name="lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            try:
                current = self.read()
                if current is not None and current["holder"] != self.holder:
                    return                                # taken over: the next publish may still fail
                self.store.fs.pipe_file(self.key, self._body())
            except Exception:  # noqa: BLE001 — a lost store shows when the render next publishes
                pass

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            current = self.read()
            if current is not None and current["holder"] == self.holder:
                self.store.fs.rm_file(self.key)
        except Exception:  # noqa: BLE001 — an unreleased lease expires on its own
            pass

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
