"""tasks/fleet/lease.py against moto's S3 server with the real s3fs client: one holder per book, conditional create,
takeover of an expired lease or of one whose holder died on this machine, release of one's own lease only."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from manifests.lock import BookLocked
from tasks.bookdir import LEASE_NAME
from tasks.fleet.lease import Lease, this_machine
from tasks.fleet.storage import Store
from tests.s3server import environ_with


@pytest.fixture
def store(s3_server, request):
    bucket = s3_server.bucket(request.node.name.replace("_", "-")[:40].strip("-").lower())
    with environ_with(s3_server.env()):
        yield Store(f"s3://{bucket}/out")


def holder_in(store) -> str:
    return json.loads(store.fs.cat_file(store.key("novel", LEASE_NAME)))["holder"]


def write_lease(store, holder: str, expires: float) -> None:
    store.fs.pipe_file(store.key("novel", LEASE_NAME), json.dumps({"holder": holder, "expires": expires}).encode())


def test_a_live_lease_refuses_a_second_holder_and_is_released(store):
    prefix = store.key("novel")
    with Lease(store, prefix) as first:
        with pytest.raises(BookLocked, match=f"novel: already being rendered by {first.holder}"):
            Lease(store, prefix).acquire()
        assert holder_in(store) == first.holder
    assert not store.fs.exists(store.key("novel", LEASE_NAME))


def test_an_expired_lease_is_taken_over(store):
    write_lease(store, "elsewhere/boot:123:ab", time.time() - 1)
    with Lease(store, store.key("novel")) as lease:
        assert holder_in(store) == lease.holder


def test_a_lease_whose_holder_died_on_this_machine_is_free_at_once(store):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_lease(store, f"{this_machine()}:{int(dead.stdout)}:ab", time.time() + 3600)
    with Lease(store, store.key("novel")) as lease:
        assert holder_in(store) == lease.holder


def test_a_live_lease_on_another_machine_is_not_taken(store):
    write_lease(store, "elsewhere/boot:1:ab", time.time() + 3600)
    with pytest.raises(BookLocked, match="elsewhere/boot:1:ab"):
        Lease(store, store.key("novel")).acquire()


def test_release_leaves_a_lease_another_holder_took(store):
    lease = Lease(store, store.key("novel")).acquire()
    write_lease(store, "elsewhere/boot:1:ab", time.time() + 3600)
    lease.release()
    assert holder_in(store) == "elsewhere/boot:1:ab"
