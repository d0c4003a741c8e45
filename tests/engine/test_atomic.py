"""engine.atomic: a killed write leaves the old file and one `.tmp-` temp; errors leave nothing; the umask's mode;
fsync only when durable; the folder variant; scratch files; finding a killed run's temps."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from engine import atomic
from engine.atomic import atomic_dir, atomic_path, find_temps, scratch, write_bytes
from tests.conftest import ROOT


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_killed_between_write_and_rename_leaves_the_old_file_and_one_temp(tmp_path):
    final = tmp_path / "part-00000001.parquet"
    final.write_bytes(b"old")
    code = ("import os, signal, sys; from engine.atomic import write_bytes; "
            "write_bytes(sys.argv[1], b'new', durable=True, "
            "before_replace=lambda: os.kill(os.getpid(), signal.SIGKILL))")
    res = subprocess.run([sys.executable, "-c", code, str(final)], cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == -signal.SIGKILL
    assert final.read_bytes() == b"old"
    temps = find_temps(tmp_path)
    assert len(temps) == 1 and temps[0].name.startswith(".tmp-") and temps[0].suffix == ".parquet"
    assert temps[0].read_bytes() == b"new"                      # complete, just not renamed
    assert listing(tmp_path) == sorted([final.name, temps[0].name])


def test_the_hook_runs_with_the_temp_complete_and_the_final_not_yet_replaced(tmp_path):
    final = tmp_path / "x.json"
    final.write_bytes(b"old")
    seen = []
    write_bytes(final, b"new", before_replace=lambda: seen.append(
        (final.read_bytes(), [p.read_bytes() for p in find_temps(tmp_path)])))
    assert seen == [(b"old", [b"new"])]
    assert final.read_bytes() == b"new" and listing(tmp_path) == ["x.json"]


@pytest.mark.parametrize("where", ["body", "hook"])
def test_an_error_removes_the_temp_and_keeps_the_old_file(tmp_path, where):
    final = tmp_path / "x.flac"
    final.write_bytes(b"old")

    def fail():
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_path(final, before_replace=fail if where == "hook" else None) as tmp:
            tmp.write_bytes(b"half")
            if where == "body":
                fail()
    assert listing(tmp_path) == ["x.flac"] and final.read_bytes() == b"old"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_files_and_folders_get_the_umasks_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_bytes(tmp_path / "f.txt", b"x")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "inner").write_bytes(b"y")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o777 & ~umask


@pytest.mark.parametrize("durable", [False, True])
def test_fsync_file_then_folder_only_when_durable(tmp_path, monkeypatch, durable):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    final = tmp_path / "a.flac"
    write_bytes(final, b"x", durable=durable)
    if durable:
        assert len(synced) == 2 and os.path.basename(synced[0]).startswith(".tmp-")
        assert synced[1] == str(tmp_path)
    else:
        assert synced == []


def test_keep_same_leaves_an_identical_file_alone(tmp_path):
    final = tmp_path / "book.json"
    assert write_bytes(final, b"{}", keep_same=True)
    before = final.stat()
    assert not write_bytes(final, b"{}", keep_same=True)
    assert final.stat().st_ino == before.st_ino and final.stat().st_mtime_ns == before.st_mtime_ns
    assert write_bytes(final, b"[]", keep_same=True) and final.read_bytes() == b"[]"


def test_folder_is_renamed_into_place_whole_or_not_at_all(tmp_path):
    target = tmp_path / "assets"
    with pytest.raises(ValueError):
        with atomic_dir(target) as tmp:
            (tmp / "half").write_bytes(b"x")
            raise ValueError("interrupted")
    assert listing(tmp_path) == []
    with atomic_dir(target) as tmp:
        (tmp / "a").write_bytes(b"1")
    assert listing(target) == ["a"]
    with pytest.raises(FileExistsError):                         # another writer finished first: kept
        with atomic_dir(target) as tmp:
            (tmp / "b").write_bytes(b"2")
    assert listing(tmp_path) == ["assets"] and listing(target) == ["a"]
    with atomic_dir(target, replace_if=lambda old: not (old / "b").exists()) as tmp:   # "damaged": replaced
        (tmp / "b").write_bytes(b"2")
    assert listing(tmp_path) == ["assets"] and listing(target) == ["b"]


def test_scratch_is_removed_whatever_happens(tmp_path):
    with scratch(tmp_path, ".f32") as f:
        assert f.name.startswith(".tmp-") and f.suffix == ".f32" and f.exists()
        f.write_bytes(b"raw")
    with pytest.raises(KeyError):
        with scratch(tmp_path, directory=True) as d:
            (d / "meta.txt").write_text("x")
            raise KeyError("boom")
    assert listing(tmp_path) == []


def test_find_temps_lists_a_temp_folder_once_and_old_style_temps(tmp_path):
    (tmp_path / "segments" / "ab").mkdir(parents=True)
    side = tmp_path / ".tmp-0123456789ab"
    side.mkdir()
    (side / ".tmp-inner.txt").write_bytes(b"")
    old = tmp_path / "segments" / "ab" / "k.flac.a1b2c3d4.tmp"
    old.write_bytes(b"")
    (tmp_path / "segments" / "ab" / "k.flac").write_bytes(b"")
    (tmp_path / "report.tmp").write_bytes(b"")                   # not a temp of ours
    assert find_temps(tmp_path) == sorted([side, old])


@pytest.mark.parametrize("content, expected", [
    (None, {}), (b"", {}), (b"{not json", {}), (b"\xff\xfe", {}), (b"[1, 2]", {}), (b'"text"', {}),
    ('{"title": "吶喊", "n": 2}'.encode(), {"title": "吶喊", "n": 2}),
])
def test_read_json_is_the_object_or_empty(tmp_path, content, expected):
    """Missing, torn, undecodable or non-object files read as {} (the caller rebuilds them); objects as written."""
    path = tmp_path / "book.json"
    if content is not None:
        path.write_bytes(content)
    assert atomic.read_json(path) == expected
