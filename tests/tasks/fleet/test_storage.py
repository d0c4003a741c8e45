"""tasks/fleet/storage.py and mirror.py against moto's S3 server on loopback with the real s3fs client: what is
published when, what a pull brings back, and what the end of a run leaves in the store."""
from __future__ import annotations

import json

import pytest

import manifests
from manifests.store import on_commit
from tasks.errors import StoreError
from tasks.fleet import mirror, storage
from tests.s3server import environ_with

AUDIO = "segments/ab/abc.flac"


def row(segment: int, status: str = "done", audio: str = AUDIO) -> dict:
    return {"plan_id": "p", "chapter": 0, "chapter_title": "一", "segment": segment, "text": "天地玄黄。",
            "status": status, "audio_path": audio, "attempts": 1}


@pytest.fixture
def store(s3_server, request):
    """A Store on a fresh bucket, and the environment its client reads (endpoint, credentials)."""
    bucket = s3_server.bucket(request.node.name.replace("_", "-")[:40].strip("-").lower())
    with environ_with(s3_server.env()):
        yield storage.Store(f"s3://{bucket}/out")


def book_with_audio(book_dir):
    """A scratch book dir holding one segment's audio file (AUDIO)."""
    (book_dir / AUDIO).parent.mkdir(parents=True)
    (book_dir / AUDIO).write_bytes(b"fLaC audio")
    return book_dir


class Recording(storage.Store):
    """A Store that remembers the keys it uploads, in order."""

    def __init__(self, url):
        super().__init__(url)
        self.puts: list[str] = []

    def put(self, local, key):
        super().put(local, key)
        self.puts.append(key[len(self.root) + 1:])


def test_urls_and_plain_paths():
    assert storage.is_url("s3://bucket/prefix") and storage.is_url("gs://b")
    assert not any(storage.is_url(p) for p in ("output", "/tmp/out", "file:///tmp/out", "", None, "a:b"))
    assert storage.local_path("file:///tmp/out") == "/tmp/out" and storage.local_path("out") == "out"


def test_a_part_is_published_after_the_audio_it_names_and_audio_once(store, tmp_path):
    rec = Recording(store.url)
    book_dir = book_with_audio(tmp_path / "novel")
    pub = mirror.Publisher(rec, book_dir)
    with on_commit(book_dir, pub.on_commit):
        manifests.commit(book_dir, [row(0, "pending")])
        manifests.commit(book_dir, [row(0)])
        manifests.commit(book_dir, [row(1)])          # the same audio (a repeated sentence): not uploaded again
    manifests.commit(book_dir, [row(2)])              # outside the block: not published
    assert rec.puts == ["novel/manifest/part-00000001.parquet", f"novel/{AUDIO}",
                        "novel/manifest/part-00000002.parquet", "novel/manifest/part-00000003.parquet"]


def test_pull_makes_the_scratch_manifest_the_stores_and_fetches_done_audio(store, tmp_path):
    a = book_with_audio(tmp_path / "A" / "novel")
    pub = mirror.Publisher(store, a)
    with on_commit(a, pub.on_commit):
        manifests.commit(a, [row(0), row(1, "pending", "segments/cd/cde.flac")])
    b = tmp_path / "B" / "novel"
    manifests.commit(b, [row(0, "pending"), row(1, "pending")])
    manifests.commit(b, [row(1, "done", "segments/cd/cde.flac")])     # only here: never published
    mirror.Publisher(store, b).pull()
    assert sorted(p.name for p in (b / "manifest").iterdir()) == ["part-00000001.parquet"]
    part = "manifest/part-00000001.parquet"
    assert (b / part).read_bytes() == (a / part).read_bytes()
    assert (b / AUDIO).read_bytes() == b"fLaC audio"
    assert [r["status"] for r in manifests.load(b).to_pylist()] == ["done", "pending"]


def test_finish_drops_the_parts_compaction_folded_and_publishes_the_outputs(store, tmp_path):
    book_dir = book_with_audio(tmp_path / "novel")
    pub = mirror.Publisher(store, book_dir)
    with on_commit(book_dir, pub.on_commit):
        manifests.commit(book_dir, [row(0, "pending")])
        manifests.commit(book_dir, [row(0)])
        manifests.compact(book_dir)
    (book_dir / "001 - 一.flac").write_bytes(b"chapter")
    (book_dir / ".tmp-0123.flac").write_bytes(b"half")
    pub.finish()
    fs = store.fs
    fs.invalidate_cache()
    assert sorted(k[len(store.root) + 1:] for k in fs.find(store.root)) == [
        "novel/001 - 一.flac", "novel/manifest/part-00000003.parquet", f"novel/{AUDIO}"]


def test_an_unusable_store_is_a_store_error_naming_it(s3_server):
    with environ_with(s3_server.env()):
        with pytest.raises(StoreError, match="s3://no-such-bucket/out: no such bucket"):
            storage.Store("s3://no-such-bucket/out").check()
    with pytest.raises(StoreError, match="nosuchproto://b: not a storage URL"):
        storage.Store("nosuchproto://b")


KEY, OTHER = "ab" + "1" * 30, "ab" + "2" * 30          # two segments' content keys, in one segments/ folder


def proofed_row(segment: int, key: str = KEY, takes: int = 2, kept: int = 2) -> dict:
    """A done row of a `--qa full` render: `takes` takes listed, take `kept` kept."""
    from tasks.bookdir import take_relpath

    listed = [{"take": t, "seed": t, "audio_path": take_relpath(key, t), "verdict": "flag" if t < kept else "pass"}
              for t in range(1, takes + 1)]
    return {**row(segment, audio=take_relpath(key, kept)), "content_key": key, "take": kept,
            "takes": json.dumps(listed)}


def with_takes(book_dir, key: str = KEY, takes: int = 2):
    """A scratch book dir holding every take of a segment and its check record."""
    from tasks.bookdir import check_relpath, take_relpath

    for t in range(1, takes + 1):
        for rel, data in ((take_relpath(key, t), f"take {t}".encode()), (check_relpath(key, t), b'{"version": 1}')):
            (book_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (book_dir / rel).write_bytes(data)
    return book_dir


def test_every_take_goes_up_before_its_record_and_the_references_before_the_part(store, tmp_path):
    from tasks.bookdir import QA_JSON, check_relpath, take_relpath

    rec = Recording(store.url)
    book_dir = with_takes(tmp_path / "novel")
    (book_dir / QA_JSON).write_text('{"version": 1, "voices": {}}')
    pub = mirror.Publisher(rec, book_dir)
    with on_commit(book_dir, pub.on_commit):
        manifests.commit(book_dir, [proofed_row(0)])
        manifests.commit(book_dir, [proofed_row(0), proofed_row(1)])     # nothing new: the part alone
        (book_dir / QA_JSON).write_text('{"version": 1, "voices": {"v": {}}}')
        manifests.commit(book_dir, [proofed_row(0, kept=1)])             # `fix --take 1`: qa.json changed
    assert rec.puts == [f"novel/{take_relpath(KEY, 2)}", f"novel/{take_relpath(KEY, 1)}",
                        f"novel/{check_relpath(KEY, 1)}", f"novel/{check_relpath(KEY, 2)}", f"novel/{QA_JSON}",
                        "novel/manifest/part-00000001.parquet", "novel/manifest/part-00000002.parquet",
                        f"novel/{QA_JSON}", "novel/manifest/part-00000003.parquet"]
    shard = Recording(store.url)                 # a shard keeps its qa.json: the store's is its parent's
    pub = mirror.Publisher(shard, with_takes(tmp_path / "shard" / "novel"), records=False)
    (pub.book_dir / QA_JSON).write_text("{}")
    with on_commit(pub.book_dir, pub.on_commit):
        manifests.commit(pub.book_dir, [proofed_row(0)])
    assert f"novel/{QA_JSON}" not in shard.puts and len(shard.puts) == 5


def test_a_pull_brings_the_records_and_fix_pulls_only_the_takes_of_its_segments(store, tmp_path):
    from tasks.bookdir import FIXES_JSON, QA_JSON, check_relpath, take_relpath

    a = with_takes(with_takes(tmp_path / "A" / "novel"), OTHER)
    (a / QA_JSON).write_text('{"version": 1}')
    (a / FIXES_JSON).write_text('{"1.2": {}}')
    pub = mirror.Publisher(store, a)
    with on_commit(a, pub.on_commit):
        manifests.commit(a, [proofed_row(0), proofed_row(1, OTHER)])
    pub.finish()
    b = tmp_path / "B" / "novel"                 # another machine, an empty scratch: the kept takes and the records
    rec = Recording(store.url)
    pull = mirror.Publisher(rec, b)
    pull.pull()
    assert (b / QA_JSON).read_text() == '{"version": 1}' and (b / FIXES_JSON).read_text() == '{"1.2": {}}'
    assert (b / take_relpath(KEY, 2)).is_file() and not (b / take_relpath(KEY, 1)).exists()
    rows = manifests.load(b).to_pylist()
    pull.pull_takes([r for r in rows if r["content_key"] == KEY])
    for t in (1, 2):
        assert (b / take_relpath(KEY, t)).read_bytes() == f"take {t}".encode()
        assert (b / check_relpath(KEY, t)).is_file()
    assert not (b / take_relpath(OTHER, 1)).exists() and not (b / check_relpath(OTHER, 2)).exists()
    with on_commit(b, pull.on_commit):           # every take the store holds: none uploaded again
        manifests.commit(b, rows)
    assert rec.puts == ["novel/manifest/part-00000002.parquet"]


def test_a_parent_after_its_shards_pulls_their_rows_and_keeps_its_own_records(store, tmp_path):
    """The parent of a sharded render pulls the shards' parts and audio (pull(records=False)); its book.json, which
    its prepare rewrote for an edited book and publishes only at the end, is not replaced by the store's older one."""
    from tasks.bookdir import BOOK_JSON

    a = book_with_audio(tmp_path / "A" / "novel")             # an earlier render's, in the store
    (a / BOOK_JSON).write_text('{"title": "old"}')
    pub = mirror.Publisher(store, a)
    with on_commit(a, pub.on_commit):
        manifests.commit(a, [row(0)])
    pub.finish()
    b = tmp_path / "B" / "novel"                              # the parent, re-planned for the edited book
    manifests.commit(b, [row(0, "pending")])
    (b / BOOK_JSON).write_text('{"title": "new"}')
    mirror.Publisher(store, b).pull(records=False)
    assert (b / BOOK_JSON).read_text() == '{"title": "new"}' and (b / AUDIO).read_bytes() == b"fLaC audio"
    assert [r["status"] for r in manifests.load(b).to_pylist()] == ["done"]
    mirror.Publisher(store, b).pull()                       # a render's first pull: the store is the truth
    assert (b / BOOK_JSON).read_text() == '{"title": "old"}'


def test_the_books_engine_goes_up_before_the_part_it_planned_and_comes_back_with_the_manifest(store, tmp_path):
    """manifest/engine.json (manifests/engine.py): published when it changed, before the next part (and at the end of
    a run, written after the last commit), never by a shard; a pull of the manifest brings it back, and a scratch
    record the store never had goes (the store is the truth)."""
    from engine.api import EngineRecord
    from manifests.engine import read_engine, record_engine

    record = EngineRecord(path="off", dtype="fp32", int8=False, kind="onednn", backend="onednn-avx2-aten_avx2",
                          version="ours6-fp-fp32-cpu-onednn-avx2-aten_avx2")
    rec = Recording(store.url)
    book_dir = book_with_audio(tmp_path / "A" / "novel")
    pub = mirror.Publisher(rec, book_dir)
    with on_commit(book_dir, pub.on_commit):
        manifests.commit(book_dir, [row(0, "pending")])                  # the plan, before its record
        record_engine(book_dir, record)
        manifests.commit(book_dir, [row(0)])
        manifests.commit(book_dir, [row(1)])                             # unchanged: not again
    assert rec.puts == ["novel/manifest/part-00000001.parquet", f"novel/{AUDIO}", "novel/manifest/engine.json",
                        "novel/manifest/part-00000002.parquet", "novel/manifest/part-00000003.parquet"]
    b = book_with_audio(tmp_path / "B" / "novel")
    record_engine(b, EngineRecord(**{**record.__dict__, "path": "fp32-avx2"}))
    shard = Recording(store.url)
    pull = mirror.Publisher(shard, b, records=False)
    pull.pull_manifest()
    assert read_engine(b) == record
    with on_commit(b, pull.on_commit):
        manifests.commit(b, [row(0)])
    assert "novel/manifest/engine.json" not in shard.puts
    c = tmp_path / "C" / "novel"
    record_engine(c, record)                                             # never published: dropped by a pull
    mirror.Publisher(Recording(f"{store.url}-other"), c).pull_manifest()
    assert read_engine(c) is None
    late = book_with_audio(tmp_path / "D" / "novel")
    pub = mirror.Publisher(Recording(f"{store.url}-late"), late)
    with on_commit(late, pub.on_commit):
        manifests.commit(late, [row(0)])
    record_engine(late, record)                                          # after the last commit: at the end
    pub.finish()
    assert "novel/manifest/engine.json" in pub.store.puts
