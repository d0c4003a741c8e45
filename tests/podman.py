"""The container image for the image tests: podman (installed and configured by `scripts/setup.sh image`), the
image `make image` built (checked to hold this checkout's code), `podman run` as a user types it, and podman's
Docker-compatible socket (`podman system service`, what Prefect's Docker worker talks to) on a private path,
stopped at the end."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.flows.helpers import pages_digest, tree_digest

IMAGE = "localhost/chattts-render:latest"     # scripts/image.sh's tag of the CPU image
SOURCE_LABEL = "org.chattts-render.source"    # scripts/image.sh: the digest of the code the image was built from
IMAGE_UID = 1000                              # the image's user `render` (Containerfile)
SOCKET_TIMEOUT_S = 60                         # s: a service whose socket does not answer by then fails the test
POLL_S = 0.2
COMMAND_TIMEOUT_S = 600                       # s: one `podman run` of the sample book on a loaded 2-core machine
DEMO_RE = re.compile(r"-m flows\.cli (.*)$", re.M)    # the Makefile's demo recipe


def source_digest() -> str:
    """The digest scripts/image.sh labels the image with (`scripts/image.sh --digest`)."""
    return subprocess.run(["bash", str(ROOT / "scripts" / "image.sh"), "--digest"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def missing_reason(image: str = IMAGE) -> str | None:
    """Why the image tests cannot run here (None: they can)."""
    if shutil.which("podman") is None:
        return "podman is not installed (`make image` installs it: scripts/setup.sh image)"
    r = subprocess.run(["podman", "image", "inspect", "--format", f'{{{{index .Labels "{SOURCE_LABEL}"}}}}', image],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return f"no image {image} (build it: make image)"
    if r.stdout.strip() != source_digest():
        return f"{image} was built from other code than this checkout's (rebuild it: make image)"
    return None


def podman_run(*args: str, volumes: dict[str, str] | None = None, image: str = IMAGE,
               timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`podman run --rm [-v HOST:CONTAINER ...] IMAGE ARGS...`, to its end."""
    mounts = [w for host, inside in (volumes or {}).items() for w in ("-v", f"{host}:{inside}")]
    argv = ["podman", "run", "--rm", *mounts]
    return subprocess.run([*argv, image, *args], capture_output=True, text=True, timeout=timeout)


def writable_by_image(path: Path) -> Path:
    """A host folder the image's user may write into (a bind mount keeps the host's owner)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, IMAGE_UID, IMAGE_UID)
    return path


def remove_volume(name: str) -> None:
    subprocess.run(["podman", "volume", "rm", "--force", name], capture_output=True, timeout=120)


def demo_args() -> list[str]:
    """`make demo`'s chattts-render arguments (the Makefile's recipe), without its --out."""
    args = shlex.split(DEMO_RE.search((ROOT / "Makefile").read_text()).group(1))
    i = args.index("--out")
    return args[:i] + args[i + 2:]


def book_digest(book_dir: Path) -> dict[str, str]:
    """Every file of a rendered book by sha256, but the manifest's parts (named by their commit), book.json's source
    path (where the book was read) and the pages' book path (the same)."""
    files = {k: v for k, v in tree_digest(book_dir).items() if not k.startswith("manifest/")}
    book_json = json.loads((book_dir / "book.json").read_text(encoding="utf-8"))
    source = book_json.pop("source_path")
    files["book.json"] = json.dumps(book_json, sort_keys=True)
    files.update(pages_digest(lambda p: (book_dir / p).read_text(encoding="utf-8"), source))
    return files


class PodmanService:
    """`podman system service --time=0 unix://<folder>/podman.sock` in its own process group; `url` is what
    DOCKER_HOST takes."""

    def __init__(self, folder: Path, log_path: Path):
        self.socket = Path(folder) / "podman.sock"
        self.url = f"unix://{self.socket}"
        self._log = open(log_path, "wb")  # noqa: SIM115 — the service's log, open while it runs (stop() closes it)
        self.proc = subprocess.Popen(["podman", "system", "service", "--time=0", self.url], stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        import docker

        t0 = time.monotonic()
        while True:
            try:
                docker.DockerClient(base_url=self.url, timeout=5).ping()
                break
            except Exception:  # noqa: BLE001 — not listening yet: docker's errors are many kinds
                assert self.proc.poll() is None, f"podman system service exited: see {log_path}"
                assert time.monotonic() - t0 < SOCKET_TIMEOUT_S, f"{self.url} not answering in {SOCKET_TIMEOUT_S} s"
                time.sleep(POLL_S)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
