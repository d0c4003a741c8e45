"""The container image (issue 34), as `make image` builds it: `podman run IMAGE chattts-render BOOK --out /out`
renders the sample book as a non-root user with the model cache a volume, and the book equals a render of `make
demo`'s command on this machine byte for byte (book.json's source path and the pages' book path aside); bad input
in the container is the CLI's one-line error and exit code; the image holds no compiler and no test package, and
its engine runs on the C kernel built in the image's build stage.

Slow (a render in a container, minutes on 2 cores): `make test-image`, or with the image built,
`RUN_SLOW=1 python -m pytest -m image tests/test_image.py tests/flows/test_docker_pool.py`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, unavailable
from tests.flows.helpers import SAMPLE, chapter_files, cli_env
from tests.podman import (
    IMAGE,
    IMAGE_UID,
    book_digest,
    demo_args,
    missing_reason,
    podman_run,
    remove_volume,
    writable_by_image,
)

pytestmark = [pytest.mark.slow, pytest.mark.image]

BOOKS, OUT, CACHE = "/books", "/out", "/cache"         # the Containerfile's mount points


@pytest.fixture(scope="module")
def image():
    if (reason := missing_reason()) is not None:
        unavailable(reason)
    return IMAGE


@pytest.fixture(scope="module")
def cache_volume():
    """A named volume for the model cache, new for this module and removed after it."""
    name = f"chattts-test-cache-{os.getpid()}"
    yield name
    remove_volume(name)


def test_podman_run_renders_the_sample_book_as_make_demo_does(image, cache_volume, demo_render, tmp_path):
    out = writable_by_image(tmp_path / "out")
    args = [a if a != str(SAMPLE.relative_to(ROOT)) else f"{BOOKS}/{SAMPLE.name}" for a in demo_args()]
    assert f"{BOOKS}/{SAMPLE.name}" in args, args
    t0 = time.monotonic()
    r = podman_run("chattts-render", *args, "--out", OUT,
                   volumes={str(SAMPLE.parent): f"{BOOKS}:ro", str(out): OUT, cache_volume: CACHE})
    seconds = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    book_dir = out / SAMPLE.stem
    assert len(chapter_files(book_dir)) == 4
    assert book_digest(book_dir) == book_digest(demo_render)          # chapters, segments, subtitles, report …
    assert {p.stat().st_uid for p in book_dir.rglob("*")} == {IMAGE_UID}, "written by another user than render"
    cached = podman_run("sh", "-c", f"ls {CACHE}/assets", volumes={cache_volume: CACHE})
    assert cached.returncode == 0 and "random-tiny" in cached.stdout, (cached.stdout, cached.stderr)
    print(f"\npodman run of the sample book (make demo's options): {seconds:.1f} s")


def bad_inputs(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """case: (arguments as the host CLI takes them, host path -> container path)."""
    import zipfile

    notes = tmp / "books" / "notes.epub"
    notes.parent.mkdir(parents=True)
    with zipfile.ZipFile(notes, "w") as z:                      # an EPUB without its package document
        z.writestr("mimetype", "application/epub+zip")
    sample = {str(SAMPLE.parent): BOOKS}
    return {"missing book": ([str(SAMPLE.parent / "no-such-book.epub")], sample),
            "not an epub": ([str(notes)], {str(notes.parent): BOOKS}),
            "bad option": ([str(SAMPLE), "--max-batch", "0"], sample)}


@pytest.mark.parametrize("case", ["missing book", "not an epub", "bad option"])
def test_bad_input_in_the_container_is_the_clis_one_line_error(image, case, tmp_path):
    """The same exit code and the same line on stderr as on the host (its paths the container's), nothing in the
    output folder."""
    args, paths = bad_inputs(tmp_path)[case]
    host_out, out = tmp_path / "host-out", writable_by_image(tmp_path / "out")
    host = subprocess.run([sys.executable, "-m", "flows.cli", *args, "--model", "random-tiny", "--out", str(host_out)],
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)
    inside = [_in_container(a, paths) for a in args]
    volumes = {host_dir: f"{mount}:ro" for host_dir, mount in paths.items()}
    r = podman_run("chattts-render", *inside, "--model", "random-tiny", "--out", OUT,
                   volumes={**volumes, str(out): OUT})
    assert host.returncode == 2 and len(host.stderr.strip().splitlines()) == 1, host.stderr
    want = _in_container(host.stderr.strip(), {**paths, str(host_out): OUT})
    assert (r.returncode, r.stderr.strip()) == (2, want)
    assert list(out.iterdir()) == []


def _in_container(text: str, paths: dict[str, str]) -> str:
    for host_dir, mount in paths.items():
        text = text.replace(host_dir, mount)
    return text


PROBE = """
import importlib.util, os, shutil
from engine import kernels
from engine.api import EngineOptions
from engine.engine import engine_version
print(json.dumps({"uid": os.getuid(), "kernels": kernels.available(), "lib": kernels.library()._name,
                  "version": engine_version("fp", EngineOptions(), "fp32"),
                  "compilers": [c for c in ("cc", "gcc", "clang") if shutil.which(c)],
                  "test packages": [m for m in ("pytest", "hypothesis", "moto", "selenium", "pyloudnorm")
                                    if importlib.util.find_spec(m)]}))
"""


def test_the_image_runs_the_engine_on_its_c_kernel_with_no_compiler_and_no_test_package(image):
    r = podman_run("python", "-c", "import json" + PROBE)
    assert r.returncode == 0, r.stderr[-3000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found["uid"] == IMAGE_UID and found["compilers"] == [] and found["test packages"] == [], found
    assert found["kernels"] and found["lib"] == "/opt/chattts-render/kernels.so", found
    assert "-cpu-kernels-" in found["version"], found                  # the content keys of the kernel's audio
    size = subprocess.run(["podman", "image", "inspect", "--format", "{{.Size}}", image], capture_output=True,
                          text=True, timeout=120).stdout.strip()
    print(f"\n{image}: {int(size) / 1e9:.2f} GB; engine {found['version']}")
