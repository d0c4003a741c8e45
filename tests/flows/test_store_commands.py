"""`status`, `package`, `voices` and `catalogue` against a store (moto's S3 server on loopback, the real s3fs
client, each command a real `chattts-render` process): the book is a URL like a render's, and each command
fetches only what it needs — status and package never the book file itself."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.flows.helpers import cli_env, write_txt_book

SLUG = "q"


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=cli_env(**env),
                          capture_output=True, text=True, timeout=600)


def upload(fs, local: Path, key: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), f"{key}/{p.relative_to(local).as_posix()}")


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A book rendered locally (random-tiny, flac): its output root."""
    tmp = tmp_path_factory.mktemp("rendered")
    book = write_txt_book(tmp / f"{SLUG}.txt", chapters=1, sentences=4)
    out = tmp / "out"
    r = run(str(book), "--model", "random-tiny", "--out", str(out), env={})
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def published(s3_server, rendered, request):
    """The rendered book dir uploaded as a render into the store publishes it, in a bucket of this test's own:
    (fs, store URL of the output root, the local output root).  The book file itself is not in the store."""
    fs = s3_server.filesystem()
    bucket = s3_server.bucket(request.node.name.replace("_", "-")[:40].strip("-").lower())
    upload(fs, rendered / SLUG, f"{bucket}/out/{SLUG}")
    return fs, f"s3://{bucket}/out", rendered


def test_status_and_package_with_a_store_never_download_the_book(published, s3_server, tmp_path):
    """The book's URL names a file that is not even in the store: status and package work from its name alone
    (manifest, book.json, the audio: what they read), and package publishes its new outputs."""
    fs, url, _ = published
    book_url = f"{url.rsplit('/', 1)[0]}/in/{SLUG}.txt"
    assert not fs.exists(book_url)
    status = run("status", book_url, "--out", url, "--scratch", str(tmp_path / "S"), env=s3_server.env())
    assert status.returncode == 0 and "done, 0 pending, 0 failed" in status.stdout, status.stderr
    assert not any("/book/" in f"/{f}" for f in files_under(tmp_path / "S")), files_under(tmp_path / "S")
    other = run("status", f"{book_url[:-len('.txt')]}-2.txt", "--out", url, "--scratch", str(tmp_path / "S"),
                env=s3_server.env())
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr     # named as given
    assert other.stderr.startswith(f"chattts-render: {book_url[:-len('.txt')]}-2.txt: no render found in {url}")

    package = run("package", book_url, "--out", url, "--format", "wav", "--scratch", str(tmp_path / "P"),
                  env=s3_server.env())
    assert package.returncode == 0, package.stderr
    fetched = files_under(tmp_path / "P")
    assert not any(f.split("/")[1] == "book" for f in fetched), fetched
    assert any(f.endswith("/book.json") for f in fetched)
    fs.invalidate_cache()
    assert fs.glob(f"{url[5:]}/{SLUG}/*.wav"), "package did not publish its outputs"


def test_catalogue_of_a_store_reads_the_books_there_and_writes_the_page_back(published, s3_server, tmp_path):
    """`catalogue s3://…` lists the store's books as `catalogue DIR` lists the same books in a folder (the same
    page, byte for byte), uploads index.html and feed.xml to the root, and downloads neither audio nor pages."""
    fs, url, out = published
    local = run("catalogue", str(out), env={})
    assert local.returncode == 0, local.stderr
    r = run("catalogue", url, "--scratch", str(tmp_path / "C"), env=s3_server.env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{url}/index.html, {url}/feed.xml: 1 books (1 done"), r.stdout
    fs.invalidate_cache()
    root = url[len("s3://"):]
    assert fs.cat_file(f"{root}/index.html") == (out / "index.html").read_bytes()
    feed = fs.cat_file(f"{root}/feed.xml").decode()
    enclosure = next(p for p in sorted(out.joinpath(SLUG).glob("*.flac")))
    assert f'length="{enclosure.stat().st_size}"' in feed and "<pubDate>" in feed
    assert not (tmp_path / "C").exists() or files_under(tmp_path / "C") == set()      # the view is temporary

    again = run("catalogue", url, "--scratch", str(tmp_path / "C"), env=s3_server.env())
    assert again.returncode == 0 and again.stdout == r.stdout

    nothing = run("catalogue", f"{url}-nothing-here", env=s3_server.env())
    assert nothing.returncode == 2 and nothing.stderr.count("\n") == 1 and "no such output root" in nothing.stderr
    fs.invalidate_cache()
    assert not fs.exists(f"{root}-nothing-here")


def test_voices_with_a_book_url_and_a_store_out(published, s3_server, tmp_path):
    """`voices URL --out URL`: the book is downloaded like a render's, the store's manifest gives the book's
    stored voice, and voices/ (page, voices.json, a FLAC per candidate) is published to the book's folder."""
    fs, url, out = published
    book_url = f"{url.rsplit('/', 1)[0]}/in/{SLUG}.txt"
    fs.put_file(str(out.parent / f"{SLUG}.txt"), book_url[len("s3://"):])
    r = run("voices", book_url, "--out", url, "--count", "2", "--from-seed", "7", "--model", "random-tiny",
            "--scratch", str(tmp_path / "V"), env={**s3_server.env(), "CHATTTS_RENDER_VOICES": str(tmp_path / "saved")})
    assert r.returncode == 0, r.stderr
    assert f"{url}/{SLUG}/voices: published" in r.stdout, r.stdout
    fs.invalidate_cache()
    prefix = f"{url[len('s3://'):]}/{SLUG}/voices"
    info = json.loads(fs.cat_file(f"{prefix}/voices.json"))
    assert [c["name"] for c in info["candidates"]] == ["book", "seed:7", "seed:8"]   # the stored voice first
    stored = {k.rsplit("/", 1)[-1] for k in fs.find(prefix)}
    assert stored == {"index.html", "voices.json", *(c["file"] for c in info["candidates"])}
