"""Helpers for the end-to-end tests: run the CLI in-process or as a real subprocess, stop a render at a named
crash point, read outputs."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from manifests.crashpoints import DIR_ENV, ENV, PAUSE
from tests.conftest import ROOT

SAMPLE = ROOT / "examples" / "daodejing.epub"
PAUSE_POLL_S = 0.02          # s between looks for a paused render's marker
PAUSE_TIMEOUT_S = 300        # s: a render that never reaches its crash point fails the test, not hangs it


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: one torch thread, this checkout, no Prefect server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **extra)
    return env


def cli(*args: str, cwd: Path | None = None, timeout: float = 600,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`chattts-render ARGS` as a real process (one torch thread, no Prefect server)."""
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=cwd or ROOT, env=cli_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def random_engines() -> dict[str, str]:
    """The environment in which a process takes a random one of the engines it could run (engine.cpupath.RANDOM_ENV,
    tests only).  The tests of resume, shards, the fleet, pickups and the nightly run their processes with it, so
    one whose expected value needs two processes to choose alike fails on every machine: a render is compared with
    a reference of the book's own engine (with_engine), which every later process of the book runs."""
    from engine.cpupath import RANDOM_ENV

    return {RANDOM_ENV: "1"}


def with_engine(book_dir: Path, record) -> Path:
    """book_dir, a book not rendered yet, given the engine `record` (engine.api.EngineRecord, manifests/engine.py):
    its first render runs that engine, as every render after a first one does (a reference of the same engine)."""
    from manifests.engine import record_engine

    record_engine(book_dir, record)
    return book_dir


def stored_engine(fs, prefix: str):
    """The engine record of the book at `prefix` in a store (its manifest/engine.json), as the render published it."""
    from engine.api import EngineRecord

    fs.invalidate_cache()
    return EngineRecord(**json.loads(fs.cat_file(f"{prefix}/manifest/engine.json")))


class ByEngine:
    """Reference renders of one book, one per engine, made on first use: render(out) renders the book into the
    fresh folder `out`, whose book dir (out/<slug>) already holds the engine record; returns what the test compares."""

    def __init__(self, slug: str, folder: Callable[[], Path], render: Callable[[Path], object]):
        self.slug, self.folder, self.render = slug, folder, render
        self.made: dict[str, object] = {}

    def __call__(self, record):
        if record.version not in self.made:
            out = self.folder()
            with_engine(out / self.slug, record)
            self.made[record.version] = self.render(out)
        return self.made[record.version]


def pause_at(crash_dir: Path, point: str, n: int = 1, mode: str = PAUSE) -> dict[str, str]:
    """The environment that stops a render at the n-th hit of crash point `point` (manifests.crashpoints):
    mode PAUSE (SIGSTOP) or HOLD (waits until the test releases it, its other threads alive)."""
    crash_dir.mkdir(parents=True, exist_ok=True)
    return {ENV: f"{point}:{n}:{mode}", DIR_ENV: str(crash_dir)}


def wait_paused(crash_dir: Path, point: str, exited: Callable[[], bool] = lambda: False,
                timeout: float = PAUSE_TIMEOUT_S) -> int:
    """The pid of the process that reached `point` (its marker is in crash_dir) and is now stopped, frozen
    there until the caller SIGKILLs it.  Fails at once when exited() says the render ended without getting
    there, and after `timeout` seconds (a hang guard, not a guess: the point is reached or never)."""
    import psutil

    marker = _wait_marker(crash_dir, point, lambda m: psutil.Process(int(m.suffix[1:])).status() ==
                          psutil.STATUS_STOPPED, exited, timeout)
    return int(marker.suffix[1:])


def wait_held(crash_dir: Path, point: str, exited: Callable[[], bool] = lambda: False,
              timeout: float = PAUSE_TIMEOUT_S) -> Path:
    """The marker of the process holding at `point` (pause_at(..., mode=HOLD)); deleting it lets it go on."""
    return _wait_marker(crash_dir, point, lambda m: True, exited, timeout)


def _wait_marker(crash_dir: Path, point: str, ready: Callable[[Path], bool], exited: Callable[[], bool],
                 timeout: float) -> Path:
    t0 = time.monotonic()
    while True:
        for marker in crash_dir.glob(f"{point}.*"):
            if ready(marker):
                return marker
        assert not exited(), f"the render ended before it reached crash point {point}"
        assert time.monotonic() - t0 < timeout, f"no render reached crash point {point} in {timeout} s"
        time.sleep(PAUSE_POLL_S)


BOOK_PAGES = ("index.html", "qa.html")      # their fix commands name the book as book.json's source_path has it


def pages_digest(read: Callable[[str], str], source: str) -> dict[str, str]:
    """sha256 of a book's pages with the book's path (where this render read it) taken out: two renders of one
    book read from two places write the same pages but for that path."""
    return {p: hashlib.sha256(read(p).replace(source, "BOOK").encode()).hexdigest() for p in BOOK_PAGES}


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root, by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def chapter_files(book_dir: Path, ext: str = "flac") -> list[Path]:
    return sorted(p for p in book_dir.glob(f"[0-9][0-9][0-9] - *.{ext}"))


def write_txt_book(path: Path, chapters: int = 4, sentences: int = 24) -> Path:
    """A plain UTF-8 novel with 第X章 headings and varied sentence lengths (deterministic)."""
    import random

    rng = random.Random(7)
    words = "山川草木日月星辰风雨雷电春夏秋冬东南西北江河湖海花鸟虫鱼金木水火土"
    numerals = "一二三四五六七八九十"
    out = []
    for c in range(chapters):
        out.append(f"第{numerals[c]}章　{words[c * 2:c * 2 + 2]}记\n")
        para = []
        for s in range(sentences):
            n = rng.randint(6, 40)
            para.append("".join(rng.choice(words) for _ in range(n)) + rng.choice("。！？"))
            if s % 6 == 5:
                out.append("　　" + "".join(para) + "\n")
                para = []
        if para:
            out.append("　　" + "".join(para) + "\n")
        out.append("\n")
    path.write_text("".join(out), encoding="utf-8")
    return path


def fake_render(book: Path, out: Path, statuses=("done", "done"), report: bool = True, record: bool = True) -> Path:
    """A book dir as a render leaves it: manifest rows with these statuses, report.json, the source hash."""
    from manifests import commit
    from manifests.source import record_source_hash, source_sha256

    book_dir = out / book.stem
    book_dir.mkdir(parents=True, exist_ok=True)
    commit(book_dir, [{"plan_id": "p", "chapter": 0, "chapter_title": "一", "segment": i, "text": "天地玄黄。",
                       "status": s, "duration_s": 2.5 if s == "done" else 0.0, "attempts": 1}
                      for i, s in enumerate(statuses)])
    if report:
        (book_dir / "report.json").write_text(json.dumps({"files": [
            {"file": "001 - 一.flac", "format": "flac", "chapter": 0, "seconds": 5.2, "integrated_lufs": -18.0,
             "true_peak_dbtp": -1.5}]}))
    if record:
        record_source_hash(book_dir, book, source_sha256(book))
    return book_dir


def mount_tmpfs(mnt: Path, options: str) -> Path:
    """A tmpfs mounted at mnt (created) with these mount options; the test is skipped where that needs a root
    it does not have.  The caller unmounts it (`umount -l`)."""
    import shutil

    import pytest

    mnt.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    return mnt
