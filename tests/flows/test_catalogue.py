"""The catalogue from the flows' side.  `chattts-render catalogue OUT [--base-url URL]` writes OUT/index.html and
OUT/feed.xml; bad input is one line and exit 2 with nothing created, an unwritable output root exit 3.  A book
being rendered (the render-book flow rewrites the catalogue once its book is planned) is listed as partial."""
from __future__ import annotations

import subprocess

from tests.flows.helpers import cli, fake_render, mount_tmpfs, write_txt_book


def test_catalogue_writes_the_page_and_the_feed(tmp_path):
    out = tmp_path / "out"
    fake_render(write_txt_book(tmp_path / "a.txt"), out, statuses=("done", "pending"), report=False)
    r = cli("catalogue", str(out), "--base-url", "https://example.org/books")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{out / 'index.html'}, {out / 'feed.xml'}: 1 books (0 done, 1 partial, 0 failed)"
    assert 'data-status="partial"' in (out / "index.html").read_text(encoding="utf-8")
    assert "<item>" not in (out / "feed.xml").read_text(encoding="utf-8")      # nothing finished yet


def test_bad_input_exits_2_and_creates_nothing(tmp_path):
    r = cli("catalogue", str(tmp_path / "none"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "none: no such output folder" in r.stderr
    assert not (tmp_path / "none").exists()
    (tmp_path / "file").write_text("x")
    r = cli("catalogue", str(tmp_path / "file"))
    assert r.returncode == 2 and "file: not a folder" in r.stderr
    out = tmp_path / "out"
    out.mkdir()
    r = cli("catalogue", str(out), "--base-url", "nas.local/books")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--base-url 'nas.local/books'" in r.stderr
    assert list(out.iterdir()) == []


def test_a_read_only_output_root_exits_3(tmp_path):
    """A read-only filesystem (a tmpfs mounted ro; root ignores folder modes): exit 3, one line."""
    out = mount_tmpfs(tmp_path / "ro", "ro,size=64k")
    try:
        r = cli("catalogue", str(out))
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False)
    assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr
    assert f"{out}: cannot write the catalogue" in r.stderr


def test_a_book_being_rendered_is_listed_as_partial_then_done(tmp_path):
    """flows.pipeline.render's on_prepared hook (the render-book flow writes the catalogue there): the book is
    planned and its lock held, so it is partial and rendering; after the render it is done."""
    from flows.options import options_from_params
    from flows.pipeline import render
    from tasks.site.catalogue import write_catalogue

    book = write_txt_book(tmp_path / "q.txt", chapters=1, sentences=2)
    opts = options_from_params(str(book), out=str(tmp_path / "out"), model="random-tiny")
    seen = []
    render(opts, on_prepared=lambda book_dir: seen.append(
        [(e.folder, e.status, e.rendering, e.percent) for e in write_catalogue(opts.out)]))
    assert seen == [[("q", "partial", True, 0.0)]]
    assert [(e.folder, e.status, e.rendering) for e in write_catalogue(opts.out)] == [("q", "done", False)]
