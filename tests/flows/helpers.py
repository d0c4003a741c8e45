"""Helpers for the end-to-end tests: run the CLI in-process or as a real subprocess, read outputs."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SAMPLE = ROOT / "examples" / "daodejing.epub"


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`chattts-render ARGS` as a real process (one torch thread, no Prefect server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=cwd or ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


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
