"""Crash consistency: SIGKILL a real render at every named crash point and at 20 seeded random times; each
rerun resumes, no committed segment is rendered again, no temp file is left, and the final outputs are
byte-identical to an uninterrupted render (random-tiny, CPU).

A fork server (tests/flows/forkrun.py) pays for `import torch, ChatTTS` once; every render is still its own
process, killed with SIGKILL, and takes a random engine of those it could run (tests.flows.helpers.random_engines):
a rerun runs the book's engine (recorded by its first render, or named by its rows when the kill came before the
record), and a render is compared with the reference of that engine.  About 3-5 min on 2 busy cores:
    python -m pytest tests/flows/test_reliability_kill.py -q
"""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import manifests
from engine.atomic import find_temps
from manifests.engine import read_engine
from tests.flows.helpers import ByEngine, random_engines, tree_digest

RANDOM_KILLS = 20
KILLS_PER_LIFE = 4
KILL_SEED = 20261130
TINY_BOOK = ("第一章　山川\n　　山高水长，风和日丽，我们一起去看海。\n　　春眠不觉晓，处处闻啼鸟。\n\n"
             "第二章　草木\n　　草木有本心，何求美人折。\n　　白日依山尽，黄河入海流。\n")


@pytest.fixture(scope="module")
def reference(fork_server, tmp_path_factory):
    """The book, its uninterrupted renders' digests by engine (refs(record)) and the first one's seconds:
    (book, refs, seconds)."""
    d = tmp_path_factory.mktemp("ref")
    book = d / "tiny.txt"
    book.write_text(TINY_BOOK, encoding="utf-8")

    def one(out: Path) -> tuple[dict[str, str], float]:
        r = fork_server.run(str(book), "--model", "random-tiny", "--out", str(out), env=random_engines())
        assert r["rc"] == 0, r["output"]
        return outputs(out / "tiny"), r["elapsed"]

    refs = ByEngine("tiny", lambda: tmp_path_factory.mktemp("ref-out"), one)
    first = one(d / "out")
    refs.made[read_engine(d / "out" / "tiny").version] = first
    return book, refs, first[1]


def run(fork_server, *args: str, env: dict | None = None, kill_after: float | None = None) -> dict:
    return fork_server.run(*args, env={**random_engines(), **(env or {})}, kill_after=kill_after)


def outputs(book_dir: Path) -> dict[str, str]:
    """Digest of everything a render leaves, but the manifest parts (their plan ids and numbering vary)."""
    return {k: v for k, v in tree_digest(book_dir).items() if not k.startswith("manifest/")}


def committed(book_dir: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of the audio file of every committed (done) segment."""
    if not (book_dir / "manifest").is_dir():
        return {}
    out = {}
    for r in manifests.load(book_dir).to_pylist():
        if r["status"] == "done":
            st = (book_dir / r["audio_path"]).stat()
            out[r["audio_path"]] = (st.st_ino, st.st_mtime_ns)
    return out


def stage_of(book_dir: Path) -> str:
    """Where a kill landed, judged from what it left: no plan yet, segments to render, or packaging."""
    rows = manifests.load(book_dir).to_pylist() if (book_dir / "manifest").is_dir() else []
    if not rows:
        return "start/ingest"
    if any(r["status"] != "done" for r in rows):
        return "synthesize"
    return "package"


def assert_not_rerendered(book_dir: Path, before: dict[str, tuple[int, int]]) -> None:
    now = {p: ((book_dir / p).stat().st_ino, (book_dir / p).stat().st_mtime_ns) for p in before}
    assert now == before, "a committed segment was rendered again"


def assert_no_temps(book_dir: Path) -> None:
    left = [str(p) for p in find_temps(book_dir)]
    assert not left, left


def test_named_crash_points_resume_byte_identical(fork_server, reference, tmp_path):
    """One render's life killed at each dangerous moment in turn (ingest, a segment written but not
    committed, a manifest part written but not renamed, a chapter assembled, an output's temp file complete);
    each rerun resumes from the state the previous kill left."""
    book, refs, _ = reference
    out = tmp_path / "out"
    book_dir = out / "tiny"
    args = (str(book), "--model", "random-tiny", "--out", str(out))
    for point in ("ingest:1", "commit:1", "segment-written:2", "commit:1", "segment-written:1", "commit:2",
                  "assemble:2", "package-file:3", "package-file:1"):
        before = committed(book_dir)
        r = run(fork_server, *args, env={"CHATTTS_RENDER_CRASH_AT": point})
        assert r["rc"] == -9 and not r["killed"], (point, r)           # the process killed itself there
        assert_not_rerendered(book_dir, before)
        if point == "ingest:1":                                      # nothing was written yet
            assert not list(book_dir.glob("manifest/part-*.parquet"))
    before = committed(book_dir)
    assert before, "the crash points never let a segment be committed"
    r = run(fork_server, *args)
    assert r["rc"] == 0, r["output"]
    assert_not_rerendered(book_dir, before)
    assert_no_temps(book_dir)
    assert outputs(book_dir) == refs(one_engine(book_dir))[0]


def one_engine(book_dir: Path):
    """The book's engine record, which every row of its manifest names."""
    record = read_engine(book_dir)
    assert record is not None
    assert {r["engine_version"] for r in manifests.load(book_dir).to_pylist()} == {record.version}
    return record


def test_twenty_random_sigkills_resume_byte_identical(fork_server, reference, tmp_path):
    """20 SIGKILLs at seeded random times spread over the reference render's duration.  Each render life
    draws KILLS_PER_LIFE kill times in [0, reference duration], sorted, and is killed at each in turn (every
    rerun resumes the previous one's state and is killed after the gap to the next time), then completes and
    is compared with the reference; the next life starts from an empty output."""
    book, refs, ref_s = reference
    rng = random.Random(KILL_SEED)
    out = tmp_path / "out"
    book_dir = out / "tiny"
    args = (str(book), "--model", "random-tiny", "--out", str(out))
    kills = lives = early = 0
    where: dict[str, int] = {}
    while kills < RANDOM_KILLS:
        shutil.rmtree(out, ignore_errors=True)
        lives += 1
        before: dict = {}
        prev = 0.0
        for t in sorted(rng.uniform(0.0, ref_s) for _ in range(KILLS_PER_LIFE)):
            r = run(fork_server, *args, kill_after=t - prev)
            prev = t
            assert_not_rerendered(book_dir, before)
            if r["rc"] == 0:                                 # finished before its kill time
                early += 1
                break
            assert r["rc"] == -9 and r["killed"], r["output"]
            kills += 1
            before = committed(book_dir)
            stage = stage_of(book_dir)
            where[stage] = where.get(stage, 0) + 1
            if kills == RANDOM_KILLS:
                break
        r = run(fork_server, *args)
        assert r["rc"] == 0, r["output"]
        assert_not_rerendered(book_dir, before)
        assert_no_temps(book_dir)
        assert outputs(book_dir) == refs(one_engine(book_dir))[0]
    print(f"{kills} kills survived in {lives} render lives ({early} runs finished before their kill time), "
          f"reference render {ref_s:.1f} s; killed during: {where}")


def heard(book_dir: Path) -> dict[str, tuple[int, bytes]]:
    """Every take's check record on disk: (mtime, bytes)."""
    return {str(p.relative_to(book_dir)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted((book_dir / "segments").glob("*/*.qa.json"))}


@pytest.mark.slow      # resume in CI: the random and named SIGKILLs above; a killed proofed render: test_proof
def test_sigkill_mid_qa_resumes_without_hearing_a_take_twice(fork_server, tmp_path):
    """`--qa full`: killed right after a take was heard (its record written, nothing committed), and again
    later; each rerun keeps every record on disk as it was (a check belongs to its audio: never heard twice),
    renders no take again, and the book finishes with every row done and its takes in the manifest."""
    import json

    from tests.conftest import unavailable

    try:
        from tasks.qa.checker import Checker
        from tasks.qa.options import QAOptions

        Checker(QAOptions(mode="full")).load()
    except Exception as e:  # noqa: BLE001 — the qa extra or its model: scripts/setup.sh test installs them
        unavailable(f"the QA checks cannot load here: {e}")
    book = tmp_path / "tiny.txt"
    book.write_text(TINY_BOOK, encoding="utf-8")
    out = tmp_path / "out"
    book_dir = out / "tiny"
    args = (str(book), "--model", "random-tiny", "--out", str(out), "--qa", "full")
    for point in ("take-heard:2", "take-heard:3"):
        before = heard(book_dir) if (book_dir / "segments").is_dir() else {}
        takes = {p: (book_dir / p).stat().st_mtime_ns for p in
                 (str(q.relative_to(book_dir)) for q in (book_dir / "segments").glob("*/*.flac"))} \
            if before else {}
        r = run(fork_server, *args, env={"CHATTTS_RENDER_CRASH_AT": point})
        assert r["rc"] == -9 and not r["killed"], (point, r["output"][-2000:])
        now = heard(book_dir)
        assert {k: now[k] for k in before} == before, "a take was heard again"
        assert len(now) >= len(before) + 1
        assert all((book_dir / p).stat().st_mtime_ns == m for p, m in takes.items()), "a take was rendered again"
    before = heard(book_dir)
    r = run(fork_server, *args)
    assert r["rc"] == 0, r["output"][-3000:]
    one_engine(book_dir)
    now = heard(book_dir)
    assert {k: now[k] for k in before} == before
    rows = manifests.load(book_dir).to_pylist()
    assert rows and all(r["status"] == "done" and r["take"] >= 1 and r["qa_checks"] for r in rows)
    listed = {t["audio_path"] for r in rows for t in json.loads(r["takes"])}
    assert listed == {str(p.relative_to(book_dir)) for p in (book_dir / "segments").glob("*/*.flac")}
    assert_no_temps(book_dir)
