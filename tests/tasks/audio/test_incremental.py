"""Incremental packaging state (tasks.audio.incremental): what a chapter's signature depends on, .chapters.json,
the stage entry that cleans a killed run's temps first.  The whole-render behaviour (only changed chapters are
written again) is tested in tests/flows/test_reliability_package.py."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

import manifests
from tasks import stages
from tasks.audio.assemble import AssembleOptions
from tasks.audio.incremental import CHAPTERS_JSON, SIGNATURE_VERSION, chapter_rows, chapter_signature
from tasks.audio.options import PackageOptions
from tasks.book import BookMeta
from tasks.synthesize.render import synthesize_book
from tests.tasks.synthesize.test_guard import StubEngine, make_book


def test_signature_follows_every_input_and_nothing_else(tmp_path):
    book_dir, _ = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    rows = chapter_rows(book_dir, manifests.load(book_dir).to_pylist())[0]
    opts = (AssembleOptions(), PackageOptions())
    meta = BookMeta("测试", author="甲")
    base = chapter_signature(rows, "第一章", 2, meta, *opts)
    assert chapter_signature([dict(r) for r in rows], "第一章", 2, meta, *opts) == base
    changed = [
        chapter_signature(rows, "第1章", 2, meta, *opts),
        chapter_signature(rows, "第一章", 3, meta, *opts),
        chapter_signature(rows, "第一章", 2, replace(meta, author="乙"), *opts),
        chapter_signature(rows, "第一章", 2, replace(meta, cover=b"\xff\xd8\xff"), *opts),
        chapter_signature([{**rows[0], "content_key": "x" * 32}, *rows[1:]], "第一章", 2, meta, *opts),
        chapter_signature([{**rows[0], "pause_after": "paragraph"}, *rows[1:]], "第一章", 2, meta, *opts),
        chapter_signature(rows, "第一章", 2, meta, AssembleOptions(), PackageOptions(target_lufs=-20.0)),
        chapter_signature(rows, "第一章", 2, meta, AssembleOptions(lead_in_s=0.25), PackageOptions()),
        chapter_signature(rows, "第一章", 2, meta, AssembleOptions(), PackageOptions(tempo=1.25)),
        chapter_signature(rows, "第一章", 2, meta, AssembleOptions(), PackageOptions(true_peak_dbtp=-3.5)),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    gap = [{**rows[0], "status": "failed"}, *rows[1:]]           # a gap: its text counts, not its key
    assert chapter_signature(gap, "第一章", 2, meta, *opts) != base
    assert chapter_signature([{**gap[0], "content_key": "y" * 32}, *rows[1:]], "第一章", 2, meta, *opts) == \
        chapter_signature(gap, "第一章", 2, meta, *opts)


def test_a_new_tempo_repackages_every_chapter_and_renders_nothing(tmp_path):
    """--tempo is a packaging option: the segments (keys, audio) stay; every chapter's files are written again,
    shorter, and packaging again at the same tempo writes nothing."""
    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg not installed (apt-get install ffmpeg)")
    book_dir, _ = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    rows = manifests.load(book_dir).to_pylist()
    stages.package(book_dir)
    seconds = [c["seconds"] for c in json.loads((book_dir / "report.json").read_text())["chapters"]]
    first = {p.name: p.stat().st_mtime_ns for p in book_dir.glob("0*.flac")}
    stages.package(book_dir, package=PackageOptions(tempo=1.25))
    report = json.loads((book_dir / "report.json").read_text())
    assert report["tempo"] == 1.25 and manifests.load(book_dir).to_pylist() == rows
    assert [c["seconds"] for c in report["chapters"]] == pytest.approx([s / 1.25 for s in seconds], rel=0.01)
    again = {p.name: p.stat().st_mtime_ns for p in book_dir.glob("0*.flac")}
    assert set(again) == set(first) and all(again[n] != first[n] for n in first)
    stages.package(book_dir, package=PackageOptions(tempo=1.25))
    assert {p.name: p.stat().st_mtime_ns for p in book_dir.glob("0*.flac")} == again


def test_package_cleans_temps_then_writes_state_and_ignores_an_old_version(tmp_path):
    book_dir, _ = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    left = book_dir / ".tmp-0123456789ab.flac"                  # a killed run's leftover
    left.write_bytes(b"half")
    stages.package(book_dir)
    assert not left.exists()
    state = json.loads((book_dir / CHAPTERS_JSON).read_text(encoding="utf-8"))
    assert state["version"] == SIGNATURE_VERSION and set(state["chapters"]) == {"0", "1"}
    assert all(n.startswith(("001 - ", "002 - ")) for c in state["chapters"].values() for n in c["files"])
    assert set(state["book_files"]) == {"report.json"}
    first = {p.name: p.stat().st_mtime_ns for p in book_dir.glob("0*.flac")}
    (book_dir / CHAPTERS_JSON).write_text(json.dumps({**state, "version": SIGNATURE_VERSION + 99}))
    stages.package(book_dir)                               # state unreadable: everything written again
    assert all(p.stat().st_mtime_ns != first[p.name] for p in book_dir.glob("0*.flac"))
