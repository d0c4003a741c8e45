"""Storage anywhere (issue 15): `--out s3://…` against moto's S3 server on loopback, the real s3fs client, every
render a real `chattts-render` process (random-tiny, CPU).

Acceptance 1: a render into the store is SIGKILLed at a named crash point with scratch folder A; the same
command with an empty scratch folder B finishes it without rendering a committed segment again (attempts stay
1, the resumed run reuses exactly what the store held) and the store then holds exactly the files of an
uninterrupted local render.  Acceptance 3: a bad URL, a missing bucket, missing credentials, an unreachable
store: one line, exit 2, nothing created; the store lost mid-render: exit 1, the manifest intact.  Every render takes
a random engine of those it could run (tests.flows.helpers.random_engines): the resumed one runs the book's, and a
local render of that engine is the reference."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import manifests
from tests.conftest import ROOT
from tests.flows.helpers import (
    ByEngine,
    cli_env,
    pages_digest,
    pause_at,
    random_engines,
    stored_engine,
    tree_digest,
    wait_paused,
    write_txt_book,
)
from tests.s3server import S3Server, free_port

BOOK_CHAPTERS, BOOK_SENTENCES = 3, 12        # about 15 segments: several manifest commits
REASONS = {"bad-url": "not a storage URL", "no-bucket": "no such bucket", "no-credentials": "no credentials",
           "unreachable": "unreachable", "no-book": "no such file in the store"}
COUNTS_RE = re.compile(r"\((\d+) rendered, (\d+) reused\)")
# A store that is gone: one try a call, not the AWS client's retries with back-off; the same error ends the command
# either way (measured: the unreachable case 11.5 s -> 3 s, the store lost mid-render 31 s -> 14 s).
NO_RETRIES = {"AWS_MAX_ATTEMPTS": "1"}


def render(*args: str, env: dict[str, str], **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT,
                          env=cli_env(**{**random_engines(), **env}), capture_output=True, text=True, timeout=600,
                          **popen)


def store_files(fs, prefix: str) -> dict[str, str]:
    """sha256 of every object under prefix, by relative key (what a user downloading the book gets)."""
    fs.invalidate_cache()
    return {k[len(prefix) + 1:]: hashlib.sha256(fs.cat_file(k)).hexdigest() for k in sorted(fs.find(prefix))}


def store_manifest(fs, prefix: str, tmp: Path) -> list[dict]:
    """The book's manifest as the store holds it, read back with the manifest's own reader."""
    mdir = tmp / "manifest"
    mdir.mkdir(parents=True)
    fs.invalidate_cache()
    for k in fs.find(f"{prefix}/manifest"):
        (mdir / k.rsplit("/", 1)[-1]).write_bytes(fs.cat_file(k))
    return manifests.load(tmp).to_pylist()


def without_manifest(digest: dict[str, str]) -> dict[str, str]:
    """The manifest's parts are named by their commit sequence (and source.json by the local path)."""
    return {k: v for k, v in digest.items() if not k.startswith("manifest/")}


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    return write_txt_book(tmp_path_factory.mktemp("book") / "novel.txt", BOOK_CHAPTERS, BOOK_SENTENCES)


@pytest.fixture(scope="module")
def local_reference(book, tmp_path_factory):
    """An uninterrupted local render of the book of a given engine (local_reference(record)): its files, its
    book.json without the source path, its folder."""
    def one(out: Path):
        r = render(str(book), "--model", "random-tiny", "--out", str(out), env={})
        assert r.returncode == 0, r.stderr
        book_json = json.loads((out / "novel" / "book.json").read_text(encoding="utf-8"))
        book_json.pop("source_path")
        return tree_digest(out / "novel"), book_json, out / "novel"
    return ByEngine("novel", lambda: tmp_path_factory.mktemp("local"), one)


@pytest.mark.slow      # the fleet in CI: test_pgfleet; resume: test_reliability_kill
def test_killed_in_the_store_resumes_on_another_machine(s3_server, book, local_reference, tmp_path):
    fs = s3_server.filesystem()
    bucket = s3_server.bucket("resume")
    url, prefix = f"s3://{bucket}/out", f"{bucket}/out/novel"
    args = (str(book), "--model", "random-tiny", "--out", url)
    killed = render(*args, "--scratch", str(tmp_path / "A"),
                    env={**s3_server.env(), "CHATTTS_RENDER_CRASH_AT": "commit:3"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = store_manifest(fs, prefix, tmp_path / "before")
    done_before = {r["audio_path"] for r in before if r["status"] == "done"}
    assert 0 < len(done_before) < len(before), "the kill should land mid-book, with segments in the store"
    assert all(fs.exists(f"{prefix}/{p}") for p in done_before), "a published row names audio the store lacks"

    scratch_b = tmp_path / "B"
    assert not scratch_b.exists()
    fs.put_file(str(book), f"{bucket}/books/novel.txt")                 # machine B reads the book from the store
    done = render(f"s3://{bucket}/books/novel.txt", *args[1:], "--scratch", str(scratch_b), env=s3_server.env())
    assert done.returncode == 0, done.stderr
    rendered, reused = map(int, COUNTS_RE.search(done.stdout).groups())
    assert (rendered, reused) == (len(before) - len(done_before), len(done_before)), done.stdout
    after = store_manifest(fs, prefix, tmp_path / "after")
    assert {r["status"] for r in after} == {"done"} and {r["attempts"] for r in after} == {1}
    record = stored_engine(fs, prefix)                                  # the killed render's, which B ran
    assert {r["engine_version"] for r in after} == {record.version}
    reference = local_reference(record)
    stored = without_manifest(store_files(fs, prefix))
    book_json = json.loads(fs.cat_file(f"{prefix}/book.json"))            # source_path: where B read the book
    b_source = book_json.pop("source_path")
    assert b_source.endswith("/book/novel.txt") and book_json == reference[1]
    stored.update(pages_digest(lambda p: fs.cat_file(f"{prefix}/{p}").decode(), b_source))
    want = without_manifest(reference[0])
    want.update(pages_digest(lambda p: (reference[2] / p).read_text(encoding="utf-8"), str(book)))
    assert {k: v for k, v in stored.items() if k != "book.json"} == {k: v for k, v in want.items() if k != "book.json"}
    assert not fs.exists(f"{prefix}/.lease.json"), "the lease outlived its render"

    status = render("status", str(book), "--out", url, "--scratch", str(tmp_path / "C"), env=s3_server.env())
    assert status.returncode == 0 and f"total {len(after)} done, 0 pending, 0 failed" in status.stdout, status


@pytest.mark.slow      # the store's package in CI: test_store_commands
def test_package_from_the_store_in_an_empty_scratch(s3_server, book, local_reference, tmp_path):
    """`package BOOK --out URL --format flac,m4b` on a machine that never rendered the book: the manifest, the
    records packaging reads (book.json, text.json) and the audio come from the store, the new outputs go to it;
    the store then holds byte for byte what `package` writes beside the local render.  The store's source
    record is the render's."""
    import shutil

    fs = s3_server.filesystem()
    bucket = s3_server.bucket("package")
    url, prefix = f"s3://{bucket}/out", f"{bucket}/out/novel"
    r = render(str(book), "--model", "random-tiny", "--out", url, "--scratch", str(tmp_path / "A"), env=s3_server.env())
    assert r.returncode == 0, r.stderr
    source = json.loads(fs.cat_file(f"{prefix}/manifest/source.json"))
    assert source["sha256"] == hashlib.sha256(book.read_bytes()).hexdigest()
    assert not any(k.endswith(".m4b") for k in fs.find(prefix))

    p = render("package", str(book), "--out", url, "--format", "flac,m4b", "--scratch", str(tmp_path / "P"),
               env=s3_server.env())
    assert p.returncode == 0, p.stderr
    local = tmp_path / "local"
    shutil.copytree(local_reference(stored_engine(fs, prefix))[2], local / "novel")
    q = render("package", str(book), "--out", str(local), "--format", "flac,m4b", env={})
    assert q.returncode == 0, q.stderr
    stored, want = without_manifest(store_files(fs, prefix)), without_manifest(tree_digest(local / "novel"))
    assert stored.pop("book.json") and want.pop("book.json")        # its source_path: where the book was read
    assert any(k.endswith(".m4b") for k in stored) and stored == want


def no_credentials_env() -> dict[str, str]:
    return {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.mark.parametrize("case", ["bad-url", "no-bucket", "no-credentials", "unreachable", "no-book"])
def test_an_unusable_store_is_one_line_exit_2_and_creates_nothing(case, s3_server, book, tmp_path):
    bucket = s3_server.bucket("refused")
    url, env = f"s3://{bucket}/out", s3_server.env()
    if case == "bad-url":
        url = "nosuchproto://bucket/out"
    elif case == "no-bucket":
        url = "s3://no-such-bucket/out"
    elif case == "no-book":
        book = url = f"s3://{bucket}/books/missing.txt"
    elif case == "no-credentials":
        env = {"AWS_ENDPOINT_URL": s3_server.endpoint, **no_credentials_env()}
    else:
        env = {**env, **NO_RETRIES, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    env = {**{k: v for k, v in cli_env().items() if not k.startswith("AWS_")}, **env}
    r = subprocess.run([sys.executable, "-m", "flows.cli", str(book), "--model", "random-tiny", "--out", url,
                        "--scratch", str(tmp_path / "scratch")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and REASONS[case] in lines[0], r.stderr
    assert s3_server.filesystem().find(bucket) == []
    assert not list((tmp_path / "scratch").rglob("novel")), "a refused render left a book folder"


def test_the_store_lost_mid_render_exits_1_with_the_manifest_intact(book, tmp_path):
    server = S3Server(tmp_path / "moto.log")
    try:
        server.bucket("lost")
        crash = tmp_path / "crash"
        env = cli_env(**server.env(), **NO_RETRIES, **pause_at(crash, "segment-written", 3))
        proc = subprocess.Popen([sys.executable, "-m", "flows.cli", str(book), "--model", "random-tiny", "--out",
                                 "s3://lost/out", "--scratch", str(tmp_path / "A")], cwd=ROOT, env=env,
                                stderr=subprocess.PIPE, text=True)
        pid = wait_paused(crash, "segment-written", exited=lambda: proc.poll() is not None)
    finally:
        server.stop()                                  # the store goes away while the render is paused
    os.kill(pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and "rerun to resume" in err, err
    book_dir = next((tmp_path / "A").glob("*/novel"))
    rows = manifests.load(book_dir).to_pylist()
    done = [r for r in rows if r["status"] == "done"]
    assert rows and done and all((book_dir / r["audio_path"]).is_file() for r in done)
