"""A studio for the tests: in this process (uvicorn in a thread: the app as flows/studio.py builds it) or as the
real command in a child process (`chattts-render studio`, to be killed), and plain HTTP against it (http.client:
paths are sent as written, `..` and all)."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

from tests.conftest import ROOT
from tests.flows.helpers import cli_env

START_TIMEOUT_S = 60            # s: a studio that does not answer by then fails the test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Studio:
    """The studio app served by uvicorn in a thread of this process (the children it starts are real)."""

    def __init__(self, root: Path, *, token: str | None = None, hosts: bool = True, max_upload: int | None = None,
                 books_dir: Path | None = None, env: dict | None = None):
        import uvicorn

        from flows.studio import PRESET, argv, form_fields, validate
        from tasks.site.studio.app import RenderForm, StudioConfig, create_app
        from tasks.site.studio.security import allowed_hosts
        from tasks.site.studio.uploads import MAX_UPLOAD_BYTES

        self.root, self.port, self.token = Path(root).resolve(), free_port(), token
        self.root.mkdir(parents=True, exist_ok=True)
        form = RenderForm(form_fields(), partial(validate, self.root), argv, PRESET)
        config = StudioConfig(root=self.root, cli=(sys.executable, "-m", "flows.cli"), form=form,
                              books_dir=books_dir, hosts=allowed_hosts("127.0.0.1", self.port) if hosts else None,
                              token=token, max_upload=max_upload or MAX_UPLOAD_BYTES, env=env or cli_env())
        self.server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=self.port,
                                                    log_level="warning", timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_answering(self.port)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def wait_answering(port: int, proc: subprocess.Popen | None = None) -> None:
    t0 = time.monotonic()
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert proc is None or proc.poll() is None, "the studio exited before it answered"
            assert time.monotonic() - t0 < START_TIMEOUT_S, f"no studio on port {port} after {START_TIMEOUT_S} s"
            time.sleep(0.1)


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
            origin: bool = True, chunked: bool = False) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one request to the studio on `port`; `origin`: send the studio's own Origin
    (state-changing requests need it); `chunked`: send the body without a Content-Length."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Host": f"127.0.0.1:{port}", **({"Origin": f"http://127.0.0.1:{port}"} if origin else {}), **(headers or {})}
    try:
        if chunked:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in {**h, "Transfer-Encoding": "chunked"}.items():
                conn.putheader(k, v)
            conn.endheaders()
            for i in range(0, len(body or b""), 16384):
                piece = (body or b"")[i:i + 16384]
                try:
                    conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    break
            try:
                conn.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def post_json(port: int, path: str, data: dict, **kw) -> tuple[int, dict]:
    status, _, body = request(port, "POST", path, json.dumps(data).encode(), {"Content-Type": "application/json"}, **kw)
    return status, json.loads(body or b"{}")


def upload(port: int, data: bytes, name: str, **kw) -> tuple[int, dict]:
    from urllib.parse import quote

    status, _, body = request(port, "POST", f"/api/upload?name={quote(name)}", data,
                              {"Content-Type": "application/octet-stream"}, **kw)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {"text": body.decode("utf-8", "replace")}


class StudioProcess:
    """`chattts-render studio` as a real child process (it can be killed, -9 and all)."""

    def __init__(self, root: Path, port: int, env: dict | None = None, args: tuple[str, ...] = ()):
        self.port, self.log = port, Path(root).parent / f"studio-{port}-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "studio", "--root", str(root), "--port",
                                          str(port), *args], cwd=ROOT, env=env or cli_env(), stdout=out,
                                         stderr=subprocess.STDOUT)
        if "--host" not in args:                   # (on another host the test waits itself)
            wait_answering(port, self.proc)

    def first_line(self, timeout: float = START_TIMEOUT_S) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            text = self.log.read_text(encoding="utf-8", errors="replace")
            if "\n" in text:
                return text.split("\n", 1)[0]
            time.sleep(0.1)
        raise AssertionError(f"the studio printed nothing in {timeout} s")

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
