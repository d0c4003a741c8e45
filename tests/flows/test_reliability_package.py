"""Incremental packaging (tasks.stages.package): per-chapter input signatures and output hashes in
.chapters.json decide what is written again.  No model: segment audio comes from the engine test double."""
from __future__ import annotations

import json
import shutil

import pytest

import manifests
from tasks import stages
from tasks.audio.incremental import CHAPTERS_JSON
from tasks.audio.options import PackageOptions
from tasks.synthesize.render import synthesize_book
from tests.tasks.synthesize.test_guard import StubEngine, make_book


def stamps(book_dir):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in book_dir.iterdir() if p.is_file()}


@pytest.mark.parametrize("formats", [("flac",), ("flac", "m4b")])
def test_only_changed_chapters_are_written_again(tmp_path, formats):
    if "m4b" in formats and not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        pytest.skip("m4b needs ffmpeg")
    book_dir, rows = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    package = PackageOptions(formats=formats)
    stages.package(book_dir, package=package)
    first = stamps(book_dir)
    state = json.loads((book_dir / CHAPTERS_JSON).read_text())
    assert set(state["chapters"]) == {"0", "1"}

    stages.package(book_dir, package=package)                  # nothing changed: nothing written
    assert stamps(book_dir) == first

    ch2 = sorted(book_dir.glob("002 - *.flac"))[0]
    ch2.write_bytes(b"damaged")                                # an output changed behind our back
    stages.package(book_dir, package=package)
    now = stamps(book_dir)
    ch1 = [n for n in first if n.startswith("001 - ")]
    assert ch1 and all(now[n][:2] == first[n][:2] for n in ch1)       # chapter 1 not written again
    assert now[ch2.name][2] == first[ch2.name][2] and now[ch2.name][:2] != first[ch2.name][:2]
    assert {n: v[2] for n, v in now.items()} == {n: v[2] for n, v in first.items()}   # same bytes everywhere

    # A changed segment (new content key) in chapter 2: only chapter 2's files change.
    r = next(x for x in manifests.load(book_dir).to_pylist() if x["chapter"] == 1)
    key = "f" * 32
    dest = book_dir / f"segments/ff/{key}.flac"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(book_dir / rows[0]["audio_path"], dest)
    manifests.commit(book_dir, [{**r, "content_key": key, "audio_path": f"segments/ff/{key}.flac"}])
    before = stamps(book_dir)
    stages.package(book_dir, package=package)
    after = stamps(book_dir)
    assert all(after[n] == before[n] for n in ch1)
    ch2_flac = [n for n in before if n.startswith("002 - ") and n.endswith(".flac")]
    assert ch2_flac and all(after[n][2] != before[n][2] for n in ch2_flac)
    if "m4b" in formats:
        m4b = [n for n in after if n.endswith(".m4b")]
        assert m4b and after[m4b[0]][2] != before[m4b[0]][2]          # the book file follows any chapter
    report = json.loads((book_dir / "report.json").read_text())
    assert [c["index"] for c in report["chapters"]] == [0, 1]
    assert sorted({f["chapter"] for f in report["files"]} - {None}) == [0, 1]


def test_options_change_repackages_everything(tmp_path):
    book_dir, _ = make_book(tmp_path)
    synthesize_book(book_dir, StubEngine(lambda req: 1.0))
    stages.package(book_dir)
    first = stamps(book_dir)
    stages.package(book_dir, package=PackageOptions(target_lufs=-20.0))
    now = stamps(book_dir)
    flac = [n for n in first if n.endswith(".flac")]
    assert flac and all(now[n][2] != first[n][2] for n in flac)


def test_disk_full_mapping(tmp_path):
    """Writers that do not raise OSError(ENOSPC) on a full disk still end as 'disk full' (exit 1)."""
    import errno

    from tasks.errors import disk_full_error

    e = OSError(errno.ENOSPC, "No space left on device")
    assert disk_full_error(e, tmp_path) is e
    mapped = disk_full_error(RuntimeError("Error : No space left on device"), tmp_path / "missing" / "dir")
    assert isinstance(mapped, OSError) and mapped.errno == errno.ENOSPC
    assert disk_full_error(RuntimeError("something else"), tmp_path) is None      # plenty of space here
    assert disk_full_error(OSError(errno.EACCES, "denied"), tmp_path) is None
