"""tasks/fleet/shards.py: the split of a book's rows over shards (property-tested), the shard file that authorises a
shard, and shards rendering one book side by side (the guard's engine double: no model)."""
from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

import manifests
from engine.units import expected_tokens
from tasks.errors import RenderFailed
from tasks.fleet import shards
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.render import synthesize_book
from tests.tasks.synthesize.test_guard import StubEngine, make_book

TEXT = st.text(alphabet="山水风月花鸟，。", min_size=1, max_size=60)
# rows as (key, text); a repeated key is a repeated sentence (same text)
ROWS = st.lists(st.tuples(st.integers(0, 40), TEXT), min_size=0, max_size=80)


def as_rows(pairs):
    texts: dict[int, str] = {}
    return [{"content_key": f"k{k}", "text": texts.setdefault(k, t)} for k, t in pairs]


@settings(max_examples=200, deadline=None)
@given(ROWS, st.integers(1, 9), st.randoms(use_true_random=False))
def test_split_is_disjoint_complete_balanced_and_deterministic(pairs, n, rnd):
    rows = as_rows(pairs)
    got = shards.split(rows, n)
    assert len(got) == n
    keys = [k for s in got for k in s]
    assert len(keys) == len(set(keys)) and set(keys) == {r["content_key"] for r in rows}   # disjoint, complete
    weight = {r["content_key"]: expected_tokens(r["text"]) for r in rows}
    loads = [sum(weight[k] for k in s) for s in got]
    if rows:                          # greedy to the lightest shard: no shard exceeds another by a whole group
        assert max(loads) - min(loads) <= max(weight.values())
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert shards.split(shuffled, n) == got                                          # from the rows alone


def test_split_refuses_a_bad_count():
    with pytest.raises(ValueError, match="shards must be"):
        shards.split([], 0)
    with pytest.raises(ValueError, match="shards must be"):
        shards.split([], shards.MAX_SHARDS + 1)


def digest(book_dir, rows):
    return {r["content_key"]: hashlib.sha256((book_dir / r["audio_path"]).read_bytes()).hexdigest() for r in rows}


def test_two_shards_render_the_book_a_single_render_renders(tmp_path):
    """Each shard renders exactly its rows into tagged parts; together they leave the manifest and audio a
    one-shard render leaves; the token is checked and the file goes at the end."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    single, _ = make_book(tmp_path / "one")
    synthesize_book(single, StubEngine(lambda req: 1.0))
    book_dir, rows = make_book(tmp_path / "two")
    plan = shards.start(book_dir, 2, GuardOptions())
    assert sorted(k for s in plan.shards for k in s) == sorted(r["content_key"] for r in rows)
    assert all(plan.shards), plan.shards
    for i in (0, 1):
        shard = shards.shard(book_dir, i, plan.token)
        eng = StubEngine(lambda req: 1.0)
        counts = synthesize_book(book_dir, eng, shard=shard)
        assert sorted(k for k, _ in eng.calls) == sorted(plan.shards[i])
        assert counts["rendered"] == counts["total"] == len(plan.shards[i])
    names = sorted(p.name for p in manifests.manifest_dir(book_dir).iterdir())
    assert [n for n in names if n.startswith("part-00000002")] == [
        f"part-00000002-{plan.token}s0.parquet"]                     # the first shard's, then the second's
    assert any(n.endswith(f"-{plan.token}s1.parquet") for n in names)
    counts = shards.gather(book_dir, plan, GuardOptions())
    assert counts == {"rendered": 3, "adopted": 0, "already_done": 0, "failed": 0, "total": 3}
    assert not (book_dir / shards.SHARD_FILE).exists()
    with pytest.raises(RenderFailed, match="not the book's current sharded render"):
        shards.shard(book_dir, 0, plan.token)                        # its render is over

    strip = ("plan_id",)
    one, two = manifests.load(single).to_pylist(), manifests.load(book_dir).to_pylist()
    assert [{k: v for k, v in r.items() if k not in strip} for r in two] == [
        {k: v for k, v in r.items() if k not in strip} for r in one]
    assert digest(book_dir, two) == digest(single, one)


def test_a_stale_token_is_refused_and_rows_left_fail_the_gather(tmp_path):
    book_dir, _ = make_book(tmp_path)
    old = shards.start(book_dir, 2, GuardOptions())
    plan = shards.start(book_dir, 2, GuardOptions())               # a new render of the book
    assert plan.token != old.token
    with pytest.raises(RenderFailed, match=f"shard token {old.token}"):
        shards.shard(book_dir, 1, old.token)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0), shard=shards.shard(book_dir, 0, plan.token))
    with pytest.raises(RenderFailed, match=f"{len(plan.shards[1])} segments were not rendered"):
        shards.gather(book_dir, plan, GuardOptions())
    assert (book_dir / shards.SHARD_FILE).exists()
    again = shards.start(book_dir, 2, GuardOptions())              # the rerun splits only what is left
    assert sorted(k for s in again.shards for k in s) == sorted(plan.shards[1]) and again.done == len(plan.shards[0])


def test_shard_count_from_the_size_and_the_deployment_parameters():
    assert shards.shard_count(500, None) == 1                       # no segments_per_shard: one shard
    assert [shards.shard_count(n, 100) for n in (0, 1, 100, 101, 250)] == [1, 1, 1, 2, 3]
    assert shards.shard_count(10_000, 100, max_shards=4) == 4
    with pytest.raises(ValueError, match="segments_per_shard"):
        shards.shard_count(10, 0)


def test_segments_left_reads_the_manifest_or_segments_the_book(tmp_path):
    from tasks.ingest import load_book
    from tasks.plan.prepare import segment_book
    from tests.flows.helpers import write_txt_book

    book = write_txt_book(tmp_path / "novel.txt", chapters=3, sentences=20)
    assert shards.segments_left(book, tmp_path / "out" / "novel", planned=False) == len(
        segment_book(load_book(book))[0])
    book_dir, rows = make_book(tmp_path)                              # 3 rows planned, one of them done
    manifests.commit(book_dir, [{**rows[0], "status": "done", "attempts": 1}])
    assert shards.segments_left(book, book_dir, planned=True) == 2


def test_segments_left_reads_a_store_books_manifest(s3_server, tmp_path):
    """A book in a store (the nightly's book_dir is then OUT_URL/<slug>): the rows left in the store's manifest,
    not the whole book's segments."""
    from tests.s3server import environ_with

    book_dir, rows = make_book(tmp_path)                              # 3 rows planned, one of them done
    manifests.commit(book_dir, [{**rows[0], "status": "done", "attempts": 1}])
    fs, bucket = s3_server.filesystem(), s3_server.bucket("left")
    fs.put(str(book_dir), f"{bucket}/out/", recursive=True)
    url = f"s3://{bucket}/out/{book_dir.name}"
    with environ_with({**s3_server.env(), "CHATTTS_RENDER_SCRATCH": str(tmp_path / "scratch")}):
        assert shards.segments_left(tmp_path / "unused.txt", url, planned=True) == 2


SHARD_RUN = """
import sys
from pathlib import Path
from tasks import stages
from tasks.errors import RenderFailed
from tasks.fleet import shards
from flows.options import options_from_params
book, out, token = sys.argv[1:4]
opts = options_from_params(book, out=out, model="random-tiny")
try:
    print(stages.synthesize(opts.book_dir, opts, shard=shards.shard(opts.book_dir, 1, token)))
except RenderFailed as e:
    print(e, file=sys.stderr)
    sys.exit(1)
"""


def test_a_shard_on_a_worker_with_the_kernel_off_refuses(tmp_path):
    """The parent plans with our CPU kernel; shard 1 runs where the kernel is off (oneDNN: other arithmetic, so
    another engine version and other content keys): it refuses with one line and writes nothing; the same shard
    with the kernel on renders its rows."""
    import os
    import subprocess
    import sys

    from engine import kernels
    from flows.options import options_from_params
    from tasks import stages
    from tests.conftest import ROOT, unavailable

    if not kernels.available():
        unavailable("engine/kernels.c is not available here (no compiler or no AVX2/FMA)")
    book = tmp_path / "book.txt"
    book.write_text("第一章\n山高水长，风和日丽。\n春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。\n",
                    encoding="utf-8")
    opts = options_from_params(str(book), out=str(tmp_path / "out"), model="random-tiny")
    book_dir = stages.prepare(opts)
    plan = shards.start(book_dir, 2, opts.guard)
    assert plan.shards[1]
    files = sorted(p.relative_to(book_dir) for p in book_dir.rglob("*"))

    def run(**env):
        return subprocess.run([sys.executable, "-c", SHARD_RUN, str(book), str(tmp_path / "out"), plan.token],
                              cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **env})

    off = run(CHATTTS_RENDER_KERNELS="off")
    assert off.returncode == 1, off.stderr
    line = off.stderr.strip()
    assert "\n" not in line and f"{len(plan.shards[1])} segments to render were planned for engine" in line
    assert "-kernels" in line.split("but this process runs")[0] and "-onednn-" in line.split("runs")[1]   # any path
    assert sorted(p.relative_to(book_dir) for p in book_dir.rglob("*")) == files          # nothing written
    on = run()
    assert on.returncode == 0, on.stderr
    done = {r["content_key"] for r in manifests.load(book_dir).to_pylist() if r["status"] == "done"}
    assert done == set(plan.shards[1])
