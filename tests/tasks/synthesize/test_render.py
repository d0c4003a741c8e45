"""Synthesis renders only rows planned for its own engine: a row's content key names the engine whose arithmetic
makes its audio, so a process with another engine (a shard on a worker with the kernel off, another ISA) refuses
before it renders or writes anything."""
from __future__ import annotations

import pytest

import manifests
from tasks.errors import RenderFailed
from tasks.fleet.shards import Shard
from tasks.synthesize.render import synthesize_book
from tests.tasks.synthesize.test_guard import StubEngine, make_book


class OtherEngine(StubEngine):
    version = "stub-1-onednn-avx2"       # the same model and settings, other arithmetic


def test_a_shard_whose_engine_differs_from_its_plan_refuses_and_writes_nothing(tmp_path):
    book_dir, rows = make_book(tmp_path)
    shard = Shard("0123abcd", 0, 1, frozenset(r["content_key"] for r in rows))
    before = sorted(p.relative_to(book_dir) for p in book_dir.rglob("*"))
    engine = OtherEngine(lambda req: 1.0)
    with pytest.raises(RenderFailed, match=r"3 segments to render were planned for engine stub-1, but this "
                                           r"process runs stub-1-onednn-avx2") as e:
        synthesize_book(book_dir, engine, shard=shard)
    assert "\n" not in str(e.value)
    assert engine.calls == []                                            # nothing rendered
    assert sorted(p.relative_to(book_dir) for p in book_dir.rglob("*")) == before   # nothing written
    assert all(r["status"] == "pending" for r in manifests.load(book_dir).to_pylist())


def test_the_same_engine_renders_the_shard(tmp_path):
    book_dir, rows = make_book(tmp_path)
    shard = Shard("0123abcd", 0, 1, frozenset(r["content_key"] for r in rows[:2]))
    counts = synthesize_book(book_dir, StubEngine(lambda req: 1.0), shard=shard)
    assert counts["rendered"] == 2 and counts["total"] == 2
    assert all((book_dir / r["audio_path"]).is_file() for r in rows[:2])
    assert not (book_dir / rows[2]["audio_path"]).exists()
