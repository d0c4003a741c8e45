"""The manifest: atomic part commits, latest state per segment, torn parts, plans, compaction."""
import os
import subprocess
import sys
import warnings

import pyarrow.parquet as pq
import pytest

import manifests
from manifests.lock import BookLock, BookLocked


def row(ch, seg, status="pending", plan="p1", key=None, **kw):
    r = {"plan_id": plan, "chapter": ch, "chapter_title": f"第{ch + 1}章", "segment": seg, "text": f"t{ch}.{seg}",
         "source_text": f"s{ch}.{seg}", "pause_after": "sentence", "content_key": key or f"k{ch}{seg}",
         "status": status, "audio_path": f"segments/k{ch}{seg}.flac", "samples": 0, "duration_s": 0.0,
         "voice_id": "v", "spk_emb": "emb", "seed": 7, "engine_version": "e1", "error": "", "attempts": 0}
    r.update(kw)
    return r


def test_latest_state_wins_and_order(tmp_path):
    manifests.commit(tmp_path, [row(1, 0), row(0, 1), row(0, 0)])
    manifests.commit(tmp_path, [row(0, 1, "done", samples=512, attempts=1)])
    manifests.commit(tmp_path, [row(1, 0, "failed", error="babble", attempts=3)])
    t = manifests.load(tmp_path).to_pylist()
    assert [(r["chapter"], r["segment"], r["status"]) for r in t] == [(0, 0, "pending"), (0, 1, "done"),
                                                                       (1, 0, "failed")]
    assert t[1]["samples"] == 512 and t[2]["error"] == "babble" and t[2]["attempts"] == 3
    assert sorted(p.name for p in manifests.manifest_dir(tmp_path).iterdir()) == [
        "part-00000001.parquet", "part-00000002.parquet", "part-00000003.parquet"]


def test_torn_part_is_skipped_and_tmp_files_ignored(tmp_path):
    manifests.commit(tmp_path, [row(0, 0), row(0, 1)])
    p2 = manifests.commit(tmp_path, [row(0, 0, "done")])
    data = p2.read_bytes()
    p2.write_bytes(data[: len(data) // 2])                      # a torn last part
    (manifests.manifest_dir(tmp_path) / "part-00000003.parquet.x1.tmp").write_bytes(b"garbage")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = manifests.load(tmp_path).to_pylist()
    assert [r["status"] for r in t] == ["pending", "pending"]
    assert any("unreadable manifest part" in str(x.message) for x in w)
    manifests.commit(tmp_path, [row(0, 1, "done")])             # the next commit goes after the torn one
    with pytest.warns(RuntimeWarning, match="unreadable manifest part"):    # the torn part stays skipped
        assert [r["status"] for r in manifests.load(tmp_path).to_pylist()] == ["pending", "done"]


def test_a_new_plan_replaces_the_segment_set(tmp_path):
    manifests.commit(tmp_path, [row(0, 0, plan="a"), row(0, 1, plan="a"), row(0, 2, plan="a")])
    manifests.commit(tmp_path, [row(0, 0, "done", plan="a")])
    manifests.commit(tmp_path, [row(0, 0, "done", plan="b", key="x"), row(0, 1, plan="b", key="y")])
    t = manifests.load(tmp_path).to_pylist()
    assert [(r["segment"], r["content_key"], r["status"]) for r in t] == [(0, "x", "done"), (1, "y", "pending")]


def test_compact_folds_parts_into_one(tmp_path):
    manifests.commit(tmp_path, [row(0, i) for i in range(5)])
    for i in range(5):
        manifests.commit(tmp_path, [row(0, i, "done", attempts=1)])
    before = manifests.load(tmp_path)
    dest = manifests.compact(tmp_path)
    assert [p.name for p in manifests.manifest_dir(tmp_path).iterdir()] == [dest.name]
    assert manifests.load(tmp_path).equals(before)
    assert pq.read_table(dest).num_rows == 5


def test_summary_counts_per_chapter(tmp_path):
    manifests.commit(tmp_path, [row(0, 0, "done", duration_s=2.5), row(0, 1), row(1, 0, "failed")])
    s = manifests.summary(manifests.load(tmp_path))
    assert [(c["chapter"], c["done"], c["pending"], c["failed"]) for c in s] == [(0, 1, 1, 0), (1, 0, 0, 1)]
    assert s[0]["done_s"] == 2.5 and s[0]["remaining_s"] > 0


def test_lock_refuses_a_second_holder_and_is_taken_over_after_a_kill(tmp_path):
    code = ("import sys,time; from manifests.lock import BookLock; BookLock(sys.argv[1]).acquire(); "
            "print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(BookLocked, match=f"pid {proc.pid}"):
            BookLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()
    with BookLock(tmp_path):                                     # the dead holder's lock is taken over
        with pytest.raises(BookLocked):
            BookLock(tmp_path).acquire()


def test_a_part_written_before_the_cast_columns_loads_with_their_defaults(tmp_path):
    """Parts written before `role` and `speaker` existed (main before the cast feature) read as the narrator."""
    import pyarrow as pa

    old = pa.schema([f for f in manifests.SCHEMA if f.name not in manifests.COLUMN_DEFAULTS])
    rows = [row(0, 0, "done"), row(0, 1)]
    mdir = tmp_path / "manifest"
    mdir.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=old), mdir / "part-00000001.parquet")
    manifests.commit(tmp_path, [row(0, 1, "done", role="dialogue", speaker="寶玉")])
    t = manifests.load(tmp_path).to_pylist()
    assert [(r["role"], r["speaker"], r["status"]) for r in t] == [("narrator", "", "done"),
                                                                   ("dialogue", "寶玉", "done")]


# A writer that commits the rows of one shard, tagged: `python -c WRITER BOOK_DIR TAG SEGMENT`.
WRITER = """
import sys
import manifests
from tests.manifests.test_store import row
manifests.commit(sys.argv[1], [row(0, int(sys.argv[3]), "done", attempts=1)], writer=sys.argv[2])
"""


def test_two_writers_committing_at_once_keep_both_parts(tmp_path):
    """Two shards commit at the same moment: writer a is frozen after choosing its part's name and writing it
    (crash point `commit`, before the rename) while writer b commits; both see the same last part, so both
    pick the same seq — the writer tag keeps the names apart and no committed row is lost."""
    import signal

    from tests.flows.helpers import cli_env, pause_at, wait_paused

    manifests.commit(tmp_path, [row(0, 0), row(0, 1)])                      # the plan: the one writer
    crash = tmp_path / "crash"

    def writer(tag, segment, env):
        return subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(segment)],
                                env=cli_env(**env))

    a = writer("a", 0, pause_at(crash, "commit"))
    try:
        pid = wait_paused(crash, "commit", exited=lambda: a.poll() is not None)
        assert writer("b", 1, {}).wait(timeout=120) == 0
        os.kill(pid, signal.SIGCONT)
        assert a.wait(timeout=120) == 0
    finally:
        a.kill()
    names = sorted(p.name for p in manifests.manifest_dir(tmp_path).iterdir())
    assert names == ["part-00000001.parquet", "part-00000002-a.parquet", "part-00000002-b.parquet"]
    assert [(r["segment"], r["status"]) for r in manifests.load(tmp_path).to_pylist()] == [(0, "done"),
                                                                                         (1, "done")]


def test_tagged_parts_order_after_the_untagged_part_of_their_seq(tmp_path):
    """Old names still read; (seq, writer) orders the parts; a later untagged part still wins."""
    mdir = tmp_path / "manifest"
    mdir.mkdir()
    for name, rows in [("part-00000001.parquet", [row(0, 0), row(0, 1), row(0, 2)]),
                       ("part-00000002-s1.parquet", [row(0, 1, "done", attempts=1)]),
                       ("part-00000002.parquet", [row(0, 1, "failed", error="x"), row(0, 2, "failed")]),
                       ("part-00000003.parquet", [row(0, 2, "done", attempts=2)])]:
        pq.write_table(manifests.store._as_table(rows), mdir / name)
    assert [r["status"] for r in manifests.load(tmp_path).to_pylist()] == ["pending", "done", "done"]
    assert manifests.commit(tmp_path, [row(0, 0, "done")], writer="s0").name == "part-00000004-s0.parquet"
    with pytest.raises(ValueError, match="writer tag"):
        manifests.commit(tmp_path, [row(0, 0)], writer="S-0")


def test_a_shard_left_over_from_an_older_plan_does_not_bring_it_back(tmp_path):
    """The plan is the newest untagged part's: a shard of plan a that commits after plan b is history."""
    manifests.commit(tmp_path, [row(0, 0, plan="a"), row(0, 1, plan="a")])
    manifests.commit(tmp_path, [row(0, 0, plan="b", key="x")])
    manifests.commit(tmp_path, [row(0, 1, "done", plan="a")], writer="old1")
    assert [(r["plan_id"], r["segment"]) for r in manifests.load(tmp_path).to_pylist()] == [("b", 0)]
    manifests.compact(tmp_path)
    assert [p.name for p in manifests.manifest_dir(tmp_path).iterdir()] == ["part-00000004.parquet"]
    assert [(r["plan_id"], r["segment"]) for r in manifests.load(tmp_path).to_pylist()] == [("b", 0)]
