"""An S3-compatible server on loopback for the storage tests: moto's standalone server (the `moto[server]`
test extra), spoken to by the real client a user runs (s3fs over HTTP, credentials and endpoint from the
standard AWS environment variables)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

START_TIMEOUT_S = 60          # s: a server that does not answer by then fails the test
POLL_S = 0.1                  # s between looks while it starts
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """`python -m moto.server` on 127.0.0.1:<free port>; env() is what a client process needs."""

    def __init__(self, log_path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "wb")  # noqa: SIM115 — the server's log, open while it runs (stop() closes it)
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=5).close()
                break
            except OSError:
                assert self.proc.poll() is None, f"moto server exited: see {log_path}"
                assert time.monotonic() - t0 < START_TIMEOUT_S, f"moto server not up in {START_TIMEOUT_S} s"
                time.sleep(POLL_S)

    def env(self) -> dict[str, str]:
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def filesystem(self):
        """A fresh s3fs client for this server (no listing cache shared with the code under test)."""
        import s3fs

        return s3fs.S3FileSystem(key=CREDENTIALS["AWS_ACCESS_KEY_ID"], secret=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                                 endpoint_url=self.endpoint, skip_instance_cache=True)

    def bucket(self, name: str) -> str:
        fs = self.filesystem()
        if not fs.exists(name):
            fs.mkdir(name)
        return name

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def environ_with(env: dict[str, str]):
    """A context manager: os.environ with these entries while it runs (for in-process clients)."""
    from unittest import mock

    return mock.patch.dict(os.environ, env)
