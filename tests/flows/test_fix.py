"""`chattts-render fix` end to end (random-tiny, CPU): a 3-chapter book, a segment of chapter 2 fixed; only it
renders, only chapter 2's files change; `--take 1` restores them byte for byte; `--text` survives a re-render."""
from __future__ import annotations

import hashlib

import pytest

import manifests
from flows.cli import main
from tests.flows.helpers import chapter_files, cli, write_txt_book

TINY = ("--model", "random-tiny")


def digests(book_dir) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in chapter_files(book_dir)}


def stamps(book_dir) -> dict[str, tuple]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in chapter_files(book_dir)}


@pytest.fixture
def book(tmp_path, capsys):
    """(book file, out, book dir): a 3-chapter book rendered into out."""
    txt = write_txt_book(tmp_path / "novel.txt", chapters=3, sentences=4)
    out = tmp_path / "out"
    assert main([str(txt), *TINY, "--out", str(out)]) == 0
    capsys.readouterr()
    return txt, out, out / "novel"


def row(book_dir, name: str) -> dict:
    c, s = (int(x) - 1 for x in name.split("."))
    return next(r for r in manifests.load(book_dir).to_pylist() if (r["chapter"], r["segment"]) == (c, s))


def test_the_cli_retakes_lists_and_restores_a_take(book):
    """In a subprocess: the CLI as a user runs it."""
    txt, out, book_dir = book
    before, files = digests(book_dir), stamps(book_dir)
    ch1, ch2, ch3 = sorted(before)
    r = cli("fix", str(txt), "2.2", "--retake", *TINY, "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "fix: 1 segments rendered, chapters re-packaged: 2"
    after = digests(book_dir)
    assert after[ch2] != before[ch2]
    assert {n: stamps(book_dir)[n] for n in (ch1, ch3)} == {n: files[n] for n in (ch1, ch3)}   # untouched
    assert row(book_dir, "2.2")["take"] == 2
    r = cli("fix", str(txt), "2.2", "--takes", "--out", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and lines[2].rstrip().endswith("*") and lines[1].split()[1] == "1"
    seeds = {line.split()[2] for line in lines[1:]}
    assert len(seeds) == 2                                          # take 2 has its own seed
    r = cli("fix", str(txt), "2.2", "--take", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "fix: 0 segments rendered, chapters re-packaged: 2"
    assert digests(book_dir) == before                              # byte for byte


def test_a_text_fix_persists_across_a_render_and_bad_input_changes_nothing(book, capsys):
    txt, out, book_dir = book
    before = digests(book_dir)
    source = row(book_dir, "3.2")["source_text"]
    assert main(["fix", str(txt), "3.2", "--text", "湖木虫土，共3个。", *TINY, "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "fix: 1 segments rendered, chapters re-packaged: 3"
    fixed = row(book_dir, "3.2")
    assert (fixed["text"], fixed["source_text"], fixed["status"]) == ("湖木虫土，共三个。", source, "done")
    after = digests(book_dir)
    assert [n for n in before if before[n] != after[n]] == [sorted(before)[2]]
    assert main([str(txt), *TINY, "--out", str(out)]) == 0          # a normal render: nothing new
    assert "0 rendered" in capsys.readouterr().out
    assert row(book_dir, "3.2")["content_key"] == fixed["content_key"] and digests(book_dir) == after

    tree = sorted((p.relative_to(book_dir), p.stat().st_mtime_ns) for p in book_dir.rglob("*"))
    for args in (["9.1", "--retake"], ["2.2", "--take", "5"], ["2.x", "--retake"], ["2.2"],
                 ["2.2", "--retake", "--take", "1"]):
        assert main(["fix", str(txt), *args, *TINY, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert sorted((p.relative_to(book_dir), p.stat().st_mtime_ns) for p in book_dir.rglob("*")) == tree


def test_a_text_fix_is_normalized_in_the_books_reading_language(tmp_path, monkeypatch):
    """`fix --text` reads the text as the book is read: book.json's reading_language, or --language."""
    import json
    from types import SimpleNamespace

    import flows.fix as fix
    from tasks.bookdir import BOOK_JSON, READING_LANGUAGE
    from tasks.text.segment import SegmentOptions

    seen = []
    monkeypatch.setattr(fix, "normalize", lambda text, opts: seen.append(opts.lang) or text)
    book_dir = tmp_path / "crusoe"
    book_dir.mkdir()
    (book_dir / BOOK_JSON).write_text(json.dumps({READING_LANGUAGE: "en"}), encoding="utf-8")
    a = SimpleNamespace(text="Mr. Smith paid 3 dollars.", voice=None, seed=None, clip_text=None)
    fix._fix_of(a, SegmentOptions(), "auto", book_dir)
    fix._fix_of(a, SegmentOptions(), "zh", book_dir)
    assert seen == ["en", "zh"]


def test_fix_packages_as_the_book_was_last_packaged():
    """`fix` without --loudness/--tempo keeps the last packaging's (report.json): a preset by its target and
    ceiling, a plain number as itself, the tempo; an option given wins."""
    import argparse

    from flows.fix import _packaging
    from flows.options import package_options
    from flows.params import RenderParams

    p = RenderParams(book="b.txt")
    none = argparse.Namespace(format=None, loudness=None, tempo=None)
    acx = {"formats": ["mp3"], "tempo": 1.25, "loudness": {"target_lufs": -18.0, "true_peak_ceiling_dbtp": -3.5}}
    kept = _packaging(none, p, acx)
    assert (kept.loudness, kept.tempo, kept.formats) == ("acx", 1.25, ("mp3",))
    assert package_options(kept).true_peak_dbtp == -3.5
    plain = _packaging(none, p, {"loudness": {"target_lufs": -20.0, "true_peak_ceiling_dbtp": -1.5}})
    assert (plain.loudness, plain.tempo) == (-20.0, 1.0)                    # a report from before --tempo: 1
    given = _packaging(argparse.Namespace(format=None, loudness="podcast", tempo=1.1), p, acx)
    assert (given.loudness, given.tempo) == ("podcast", 1.1)
