"""docs/containers.md "A Docker work pool", command for command: a Prefect server on loopback, podman's Docker API
socket on a private path, a Docker work pool, `prefect deploy --name container`, a Docker worker on the socket, and
the sample book rendered by the deployment in a container of the image `make image` built: into the mounted output
folder, and from moto's S3 server on loopback into it.  Either way the book equals a local render of it on this
machine byte for byte (book.json's source path, the pages' book path and the manifest's part names aside).

Slow (two renders in containers): `make test-image`."""
from __future__ import annotations

import os
import time

import pytest

from tests.conftest import unavailable
from tests.flows.helpers import SAMPLE, chapter_files
from tests.flows.prefect_service import CONTAINERS_DOC, PrefectService, doc_commands, doc_lines
from tests.flows.test_fleet import store_files
from tests.flows.test_server import flow_runs, run_logs
from tests.podman import PodmanService, book_digest, missing_reason, remove_volume, writable_by_image

pytestmark = [pytest.mark.slow, pytest.mark.image, pytest.mark.server]

RUN_TIMEOUT_S = 900            # one flow run in a container, start to end, on a loaded 2-core machine
POOL_SECTION = "A Docker work pool"
DOC_SOCKET = "unix:///run/podman/podman.sock"


def doc(fragment: str) -> str:
    """The one `prefect …` line of docs/containers.md's Docker work pool section containing fragment."""
    found = [c for c in doc_commands(CONTAINERS_DOC, section=POOL_SECTION) if fragment in c]
    assert len(found) == 1, f"{fragment!r} matches {found}"
    return found[0]


@pytest.fixture(scope="module")
def docker_pool(tmp_path_factory):
    if (reason := missing_reason()) is not None:
        unavailable(reason)
    pytest.importorskip("prefect_docker", reason="the docker extra (prefect-docker) is not installed")
    root = tmp_path_factory.mktemp("docker-pool")
    [podman_line] = [line for heading, line in doc_lines(CONTAINERS_DOC)
                     if heading.startswith(POOL_SECTION) and line.startswith("podman system service ")]
    assert podman_line == f"podman system service --time=0 {DOC_SOCKET} &", podman_line
    podman = PodmanService(root, root / "podman.log")
    svc = PrefectService(root / "server")
    cache = f"chattts-test-pool-cache-{os.getpid()}"
    t0 = time.monotonic()
    try:
        svc.start_server()
        svc.run(doc("work-pool create"))
        svc.run(doc("prefect deploy --name container"))
        svc.start("worker", doc("worker start"), replace={DOC_SOCKET: podman.url}, extra=["--name", "docker-worker"])
        svc.cache = cache
        yield svc
    finally:
        svc.stop()
        podman.stop()
        remove_volume(cache)
        print(f"\ndocker work pool: {time.monotonic() - t0:.0f} s from server start to teardown")


def run_container(svc: PrefectService, line: str, replace: dict[str, str]) -> float:
    """A documented `prefect deployment run … --watch` line, to its end: its seconds.  Completed, else the
    worker's log."""
    t0 = time.monotonic()
    p = svc.run(line, replace=replace, extra=["--param", "model=random-tiny"], timeout=RUN_TIMEOUT_S, check=False)
    assert p.returncode == 0 and "Completed" in p.stdout, \
        f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}\nworker:\n{svc.log('worker')[-4000:]}"
    return time.monotonic() - t0


def test_a_deployment_renders_the_sample_book_in_a_container(docker_pool, demo_render, tmp_path):
    out = writable_by_image(tmp_path / "out")
    seconds = run_container(docker_pool, doc("--param book=/books/daodejing.epub"), replace={
        "/srv/books": str(SAMPLE.parent),
        "/srv/audiobooks": str(out), "chattts-cache": docker_pool.cache})
    book_dir = out / SAMPLE.stem
    assert len(chapter_files(book_dir)) == 4
    assert book_digest(book_dir) == book_digest(demo_render)
    assert {p.stat().st_uid for p in book_dir.rglob("*")} == {1000}, "not written by the image's user"
    [run] = flow_runs(docker_pool, "render-book/container", out="/out")
    assert run.state.is_completed() and "skipped" not in (run.state.message or ""), run.state
    print(f"\nthe sample book through the Docker work pool: {seconds:.1f} s")


def test_a_deployment_renders_from_the_store_into_the_store_in_a_container(docker_pool, demo_render, s3_server):
    """No folder mounted but the cache: the book is read from the store and the audiobook published to it (the run
    mounts none of the deployment's folders: a bind mount of a folder the host lacks would create it)."""
    fs, bucket = s3_server.filesystem(), s3_server.bucket("pool")
    fs.put_file(str(SAMPLE), f"{bucket}/books/{SAMPLE.name}")
    env = s3_server.env()
    line = doc("--param out=s3://audiobooks/out")
    seconds = run_container(docker_pool, line, replace={
        "s3://books/in/novel.epub": f"s3://{bucket}/books/{SAMPLE.name}", "s3://audiobooks/out": f"s3://{bucket}/out",
        "key-id": env["AWS_ACCESS_KEY_ID"], "secret-key": env["AWS_SECRET_ACCESS_KEY"],
        "https://s3.example.com": env["AWS_ENDPOINT_URL"], "chattts-cache": docker_pool.cache})
    stored = store_files(fs, f"{bucket}/out/{SAMPLE.stem}")
    local = book_digest(demo_render)
    chapters = {p.name for p in chapter_files(demo_render)}
    assert len(chapters) == 4 and {k: stored.get(k) for k in chapters} == {k: local[k] for k in chapters}
    segments = {k: v for k, v in local.items() if k.startswith("segments/")}
    assert segments and {k: stored.get(k) for k in segments} == segments
    [run] = [r for r in flow_runs(docker_pool, "render-book/container") if r.parameters.get("out", "").startswith("s3")]
    assert run.job_variables["volumes"] == [f"{docker_pool.cache}:/cache"], run.job_variables
    assert "CUDA_VISIBLE_DEVICES=" in run_logs(docker_pool, run.id)
    print(f"\nthe sample book from the store into the store through the Docker work pool: {seconds:.1f} s")
