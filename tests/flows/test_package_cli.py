"""Issue 5 end to end: a 3-chapter random-tiny render to flac,mp3,opus,m4b checked with real ffprobe, and
`chattts-render package` re-encoding from stored audio without loading the engine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import main
from tasks.audio.ffmpeg import probe as _probe
from tests.conftest import ROOT
from tests.flows.helpers import SAMPLE

TITLES = ["第一章", "第二章", "第三章"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkg")
    assert main([str(SAMPLE), "--model", "random-tiny", "--out", str(out), "--chapters", "2-4",
                 "--format", "flac,mp3,opus,m4b"]) == 0
    return out / "daodejing"


def test_files_tags_chapters_and_cover(rendered):
    for ext in ("flac", "mp3", "opus"):
        files = sorted(rendered.glob(f"*.{ext}"))
        assert [f.name for f in files] == [f"{i:03d} - {t}.{ext}" for i, t in zip((2, 3, 4), TITLES)]
        tags = {k.lower(): v for k, v in _probe(files[0])["format"].get("tags", {}).items()}
        streams = _probe(files[0])["streams"]
        if not tags:                                           # ogg keeps its tags on the stream
            tags = {k.lower(): v for k, v in streams[0].get("tags", {}).items()}
        assert tags["title"] == "第一章" and tags["artist"] == "老子" and "道德经" in tags["album"], (ext, tags)
    m4b = rendered / "道德经（前三章）.m4b"
    info = _probe(m4b)
    assert [c["tags"]["title"] for c in info["chapters"]] == TITLES
    assert any(s.get("disposition", {}).get("attached_pic") == 1 for s in info["streams"])   # the cover
    assert info["format"]["tags"]["title"] == "道德经（前三章）" and info["format"]["tags"]["artist"] == "老子"
    # chapter starts: each chapter file's duration laid end to end (flac: exact sample counts)
    import soundfile as sf

    starts, t = [], 0.0
    for f in sorted(rendered.glob("*.flac")):
        starts.append(t)
        t += sf.info(str(f)).frames / 24_000
    assert [abs(float(c["start_time"]) - s) < 0.010 for c, s in zip(info["chapters"], starts)] == [True] * 3
    report = json.loads((rendered / "report.json").read_text(encoding="utf-8"))
    assert len(report["chapters"]) == 3 and report["loudness"]["target_lufs"] == -18.0


def test_subtitle_cues_are_the_assembly_boundaries(rendered):
    """SRT cue times equal the assembled chapter's segment boundaries to the millisecond, with source text."""
    import manifests
    from tasks.audio.assemble import Piece, assemble_chapter

    chapter = assemble_chapter([Piece(rendered / r["audio_path"], r["pause_after"], r["source_text"])
                                for r in manifests.load(rendered).to_pylist() if r["chapter"] == 1])
    srt = (rendered / "002 - 第一章.srt").read_text(encoding="utf-8").strip().split("\n\n")
    assert len(srt) == len(chapter.cues)

    def ms(stamp: str) -> int:
        h, m, rest = stamp.split(":")
        s, milli = rest.split(",")
        return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(milli)

    rows = [r for r in manifests.load(rendered).to_pylist() if r["chapter"] == 1]
    for block, cue, row in zip(srt, chapter.cues, rows):
        _, times, text = block.split("\n", 2)
        a, b = times.split(" --> ")
        assert (ms(a), ms(b)) == (round(cue.start_s * 1000), round(cue.end_s * 1000))
        assert text == row["source_text"]                      # the original text, not the normalized one


def test_package_reencodes_without_loading_the_engine(rendered):
    """`chattts-render package BOOK --format wav,m4a` rebuilds outputs from stored audio alone."""
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "bad = [m for m in ('engine.engine', 'engine.loader', 'ChatTTS', 'torch') if m in sys.modules]; "
            "print('LOADED', bad); sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code, "package", str(SAMPLE), "--out", str(rendered.parent),
                        "--format", "wav,m4a"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "LOADED []" in r.stdout
    assert len(list(rendered.glob("*.wav"))) == 3 and len(list(rendered.glob("*.m4a"))) == 3


def test_package_allow_gaps_is_the_option_its_error_asks_for(rendered, tmp_path, capsys):
    """A failed segment: `package` refuses (exit 1) and names --allow-gaps; with it, the chapter is packaged
    with silence in the segment's place, listed in report.json's gaps."""
    import shutil

    import manifests

    book_dir = Path(shutil.copytree(rendered, tmp_path / "out" / rendered.name))
    row = manifests.load(book_dir).to_pylist()[1]
    manifests.commit(book_dir, [{**row, "status": "failed", "error": "test: a segment that failed"}])
    args = ["package", str(SAMPLE), "--out", str(book_dir.parent), "--format", "wav"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-gaps" in err, err
    assert main([*args, "--allow-gaps"]) == 0, capsys.readouterr().err
    gaps = json.loads((book_dir / "report.json").read_text(encoding="utf-8"))["gaps"]
    assert [(g["chapter"], g["segment"]) for g in gaps] == [(row["chapter"], row["segment"])], gaps


def test_loudness_is_the_books_until_an_option_changes_it(rendered, tmp_path, capsys):
    """--loudness LUFS (render, package, fix): the outputs land on it, and `fix` keeps the last packaging's."""
    import shutil

    from flows.options import options_from_params

    assert options_from_params(str(SAMPLE), loudness=-16).package.target_lufs == -16.0     # render's options
    book_dir = Path(shutil.copytree(rendered, tmp_path / "out" / rendered.name))

    def flac_loudness() -> list[float]:
        report = json.loads((book_dir / "report.json").read_text(encoding="utf-8"))
        files = [f for f in report["files"] if f["format"] == "flac"]
        assert len(files) == 3
        return [report["loudness"]["target_lufs"], *(f["integrated_lufs"] for f in files)]

    assert main(["package", str(SAMPLE), "--out", str(book_dir.parent), "--loudness", "-23"]) == 0
    assert flac_loudness() == pytest.approx([-23.0] * 4, abs=0.5)
    assert main(["fix", str(SAMPLE), "2.1", "--take", "1", "--out", str(book_dir.parent)]) == 0
    assert flac_loudness() == pytest.approx([-23.0] * 4, abs=0.5)                        # the book's, kept
    assert main(["package", str(SAMPLE), "--out", str(book_dir.parent), "--loudness", "-80"]) == 2
    assert "target_lufs -80.0 is outside (-70, 0)" in capsys.readouterr().err
