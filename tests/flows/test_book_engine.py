"""One book, one engine (issue 39): the first render records the CPU engine it chose (manifests/engine.py) and every
later process of the book runs it — a resume after a kill, two shard workers, `fix` line by line — measuring nothing,
so every row of the manifest names one engine version.  Every process here takes a random engine of those it could
run (engine.cpupath.RANDOM_ENV, two at least on any machine: our fp32 kernel and oneDNN), so a process that chose on
its own would show in the rows.  A worker that cannot run the book's engine (CHATTTS_RENDER_KERNELS allows only
another) renders nothing of it; with --reengine it renders the rest with its own, and only that changes.  The CLI
runs are processes forked by the fork server (tests/flows/forkrun.py), shard 1 a process of its own."""
from __future__ import annotations

import re
import subprocess
import sys

import manifests
from engine import cpupath
from engine.cpupath import RANDOM_ENV
from flows.cli import main
from flows.options import options_from_params
from manifests.engine import read_engine
from tasks import stages
from tasks.fleet import shards
from tests.conftest import ROOT
from tests.flows.helpers import cli_env, tree_digest, write_txt_book

TINY = ("--model", "random-tiny")
RENDERED_RE = re.compile(r"\((\d+) rendered")
SHARD = """
import sys
from flows.options import options_from_params
from tasks import stages
from tasks.fleet import shards
opts = options_from_params(sys.argv[1], out=sys.argv[2], model="random-tiny")
print(stages.synthesize(opts.book_dir, opts, shard=shards.shard(opts.book_dir, int(sys.argv[4]), sys.argv[3])))
"""


def versions(book_dir) -> set[str]:
    return {r["engine_version"] for r in manifests.load(book_dir).to_pylist()}


def test_resume_shards_and_fixes_of_a_book_run_its_one_engine_and_a_worker_without_it_renders_nothing(
        fork_server, tmp_path, monkeypatch):
    monkeypatch.setenv(RANDOM_ENV, "1")                      # this process too, and the processes it starts
    monkeypatch.setattr(cpupath, "_CHOSEN", {})
    book = write_txt_book(tmp_path / "novel.txt", chapters=3, sentences=6)
    out = tmp_path / "out"
    book_dir = out / book.stem
    args = (str(book), *TINY, "--out", str(out))

    def run(*argv: str, **env: str) -> dict:
        return fork_server.run(*argv, env={RANDOM_ENV: "1", **env})

    killed = run(*args, "--chapters", "1", CHATTTS_RENDER_CRASH_AT="commit:2")     # a plan, a batch, then SIGKILL
    assert killed["rc"] == -9, killed["output"]
    record = read_engine(book_dir)
    assert record is not None and versions(book_dir) == {record.version}
    resumed = run(*args, "--chapters", "1")
    assert resumed["rc"] == 0, resumed["output"]
    assert read_engine(book_dir) == record and versions(book_dir) == {record.version}

    # The whole book over two workers: this process plans it and renders shard 0, another process shard 1.
    opts = options_from_params(str(book), out=str(out), model="random-tiny")
    plan = shards.start(stages.prepare(opts), 2, opts.guard)
    stages.synthesize(book_dir, opts, shard=plan.shard(0))
    other = subprocess.run([sys.executable, "-c", SHARD, str(book), str(out), plan.token, "1"], cwd=ROOT,
                           env=cli_env(**{RANDOM_ENV: "1"}), capture_output=True, text=True, timeout=600)
    assert other.returncode == 0, other.stderr
    shards.gather(book_dir, plan, opts.guard)
    rows = manifests.load(book_dir).to_pylist()
    assert {r["status"] for r in rows} == {"done"} and {r["chapter"] for r in rows} == {0, 1, 2}

    # Fixed line by line: a new take here, a new text (a new key) in another process.
    assert main(["fix", str(book), "3.1", "--retake", *TINY, "--out", str(out)]) == 0
    fixed = run("fix", str(book), "3.2", "--text", "山川草木，共3个。", *TINY, "--out", str(out))
    assert fixed["rc"] == 0, fixed["output"]
    rows = manifests.load(book_dir).to_pylist()
    by_name = {(r["chapter"], r["segment"]): r for r in rows}
    assert by_name[2, 0]["take"] == 2 and by_name[2, 1]["text"].startswith("山川草木")
    assert read_engine(book_dir) == record and versions(book_dir) == {record.version}     # one engine, every row

    # A worker whose CPU (here: CHATTTS_RENDER_KERNELS) cannot run the book's engine renders nothing of it.
    with book.open("a", encoding="utf-8") as f:
        f.write("第四章　新篇\n　　山高水长，风和日丽。春眠不觉晓，处处闻啼鸟。\n")
    other_engine = "fp32-avx2" if record.path == "off" else "off"
    before = tree_digest(book_dir)
    refused = run(*args, CHATTTS_RENDER_KERNELS=other_engine)
    assert refused["rc"] == 1, refused["output"]
    line = refused["output"].strip().splitlines()[-1]
    assert line.startswith(f"chattts-render: {book_dir}: this process cannot run the book's engine {record.path} "
                           f"({record.version}): it runs {other_engine} (ours6-"), refused["output"]
    assert "--reengine" in line and tree_digest(book_dir) == before                 # nothing written

    # --reengine: the book's engine is this worker's from now on; only what was left renders, with it.
    switched = run(*args, "--reengine", CHATTTS_RENDER_KERNELS=other_engine)
    assert switched["rc"] == 0, switched["output"]
    assert "--reengine: this process's own choice replaces the book's engine" in switched["output"]
    new = read_engine(book_dir)
    assert new is not None and new.path == other_engine and new.version != record.version
    now = manifests.load(book_dir).to_pylist()
    assert int(RENDERED_RE.search(switched["output"]).group(1)) == sum(r["chapter"] == 3 for r in now) > 0
    for r in now:
        assert r["engine_version"] == (new.version if r["chapter"] == 3 else record.version)
        if r["chapter"] < 3:                                                        # done audio kept as it was
            assert r["content_key"] == by_name[r["chapter"], r["segment"]]["content_key"]
