"""Every take of a proofed render reaches the store (tasks/fleet/mirror.py): a `--qa full` render into moto's S3
server with the speech stand-in engine (tests/speech_engine.py) and the real checks re-takes a sentence whose first
take says another sentence; then the scratch folder is deleted (the docs allow it) and `fix --out URL` lists the
segment's takes and keeps take 1 again, from the store alone — the store's outputs byte for byte those of the
same fix in a local copy of the render."""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace

import pytest

from flows import pipeline
from flows.cli import main
from flows.options import options_from_params
from tasks import stages
from tasks.book import segment_name
from tasks.bookdir import QA_JSON, check_relpath, take_relpath
from tasks.fleet import attach, storage
from tests.conftest import corpus_path, unavailable
from tests.flows.helpers import chapter_files

VOICE = "seed:2222"
MAX_TAKES = 2                  # the bad sentence's second take is the right clip


@pytest.fixture
def proofed(s3_server, tmp_path, monkeypatch):
    """A `--qa full` render into the store: (book file, store URL, scratch, the re-taken row, its take 1's bytes,
    a local copy of the rendered book dir)."""
    from tasks.qa.checker import Checker
    from tasks.qa.options import QAOptions
    from tests.speech_engine import SpeechEngine, book_script, corpus_clips, other_sentence, write_corpus_book

    try:
        Checker(QAOptions(mode="full")).load()
    except Exception as e:  # noqa: BLE001 — the qa extra or its model: scripts/setup.sh test installs them
        unavailable(f"the QA checks cannot load here: {e}")
    engine = SpeechEngine({})
    monkeypatch.setattr(stages, "get_engine", lambda o: engine)
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    url = f"s3://{s3_server.bucket('takes')}/out"
    clips = corpus_clips(corpus_path("speech"))
    book = write_corpus_book(tmp_path / "speech.txt", clips)
    scratch = tmp_path / "scratch"
    opts = options_from_params(str(book), out=url, scratch=str(scratch), voice=VOICE, formats=["flac"], qa="full")
    opts = replace(opts, qa=replace(opts.qa, max_takes=MAX_TAKES))
    bad: list[dict] = []

    def script(book_dir):
        import manifests

        engine.script = book_script(book_dir, clips)
        first = next(r for r in manifests.load(book_dir).to_pylist() if r["segment"] > 0)   # not a title line
        right = engine.script[first["text"]]
        engine.script[first["text"]] = [other_sentence(right, clips), right]
        bad.append(first)

    pipeline.render(opts, on_prepared=script)
    row = _store_row(opts, bad[0]["content_key"])
    assert row["take"] == 2, row                 # re-taken: take 1 said another sentence
    take1 = (opts.book_dir / take_relpath(row["content_key"], 1)).read_bytes()
    local = tmp_path / "local" / opts.book_dir.name
    shutil.copytree(opts.book_dir, local)
    return book, url, scratch, row, take1, local


def _store_row(opts, key: str) -> dict:
    """The row of content key `key` in the store's manifest."""
    return next(r for r in attach.load_manifest(opts.book_dir, opts.store).to_pylist() if r["content_key"] == key)


def test_fix_lists_and_restores_a_take_from_the_store_alone(proofed, tmp_path, capsys):
    book, url, scratch, row, take1, local = proofed
    key, name = row["content_key"], segment_name(row["chapter"], row["segment"])
    store = storage.Store(url)
    held = {k[len(store.root) + 1:] for k in store.fs.find(store.root)}
    slug = local.name
    for t in (1, 2):                             # every take and its check record, and the drift references
        assert {f"{slug}/{take_relpath(key, t)}", f"{slug}/{check_relpath(key, t)}"} <= held, sorted(held)
    assert f"{slug}/{QA_JSON}" in held

    shutil.rmtree(scratch)                       # the scratch folder may be deleted at any time
    assert main(["fix", str(book), name, "--takes", "--out", url, "--scratch", str(scratch)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines[1:]] == ["1", "2"], lines
    assert lines[1].split()[3] == "flag" and lines[2].rstrip().endswith("*"), lines

    assert main(["fix", str(book), name, "--take", "1", "--out", url, "--scratch", str(scratch)]) == 0
    chapter = row["chapter"] + 1                 # .chapters.json from the store: only this chapter changed
    assert capsys.readouterr().out.splitlines()[-1] == f"fix: 0 segments rendered, chapters re-packaged: {chapter}"
    assert main(["fix", str(book), name, "--take", "1", "--out", str(local.parent)]) == 0   # the same, locally
    capsys.readouterr()
    opts = options_from_params(str(book), out=url, scratch=str(scratch))
    kept = _store_row(opts, key)
    assert (kept["take"], kept["audio_path"]) == (1, take_relpath(key, 1))
    view = tmp_path / "view"
    store.fs.get(f"{store.root}/{slug}/{take_relpath(key, 1)}", str(view / "take1.flac"))
    assert (view / "take1.flac").read_bytes() == take1
    for p in chapter_files(local):               # the store's outputs: the local fix's, byte for byte
        store.fs.get(f"{store.root}/{slug}/{p.name}", str(view / p.name))
        assert _sha(view / p.name) == _sha(p), p.name
    assert json.loads(kept["takes"])[0]["verdict"] == "flag"
    for args in (["9.1", "--takes"], ["9.1", "--take", "1"], [name, "--take", "3"]):   # one line, exit 2
        assert main(["fix", str(book), *args, "--out", url, "--scratch", str(scratch)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert main(["fix", "unrendered.txt", "1.1", "--takes", "--out", url, "--scratch", str(scratch)]) == 2
    assert "no render found in s3://" in capsys.readouterr().err


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
