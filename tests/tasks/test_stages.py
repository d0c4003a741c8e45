"""tasks.stages helpers that run without an engine."""
from __future__ import annotations

from engine.atomic import find_temps
from tasks.stages import clean_temp_files


def test_clean_temp_files_removes_every_leftover_and_nothing_else(tmp_path):
    book = tmp_path / "book"
    (book / "manifest").mkdir(parents=True)
    (book / "segments" / "ab").mkdir(parents=True)
    leftovers = [book / ".tmp-0a1b2c3d4e5f.flac", book / "manifest" / ".tmp-5e6f7a8b9c0d.parquet",
                 book / "segments" / "ab" / ".tmp-9c8b7a6f5e4d.flac",
                 # what versions before engine.atomic left: mkstemp(prefix=<name>., suffix=.tmp)
                 book / "manifest" / "part-00000001.parquet.k3x_9q2z.tmp",
                 book / "segments" / "ab" / "abcd.flac.0h7fu1ab.tmp"]
    keep = [book / "001 - 一.flac", book / "manifest" / "part-00000001.parquet",
            book / "segments" / "ab" / "abcd.flac", book / "notes.tmp", book / "tmp-x.flac"]
    for p in leftovers + keep:
        p.write_bytes(b"x")
    ff = book / ".tmp-7d6c5b4a3f2e"                      # an encode killed while ffmpeg read its side inputs
    ff.mkdir()
    (ff / "cover.jpg").write_bytes(b"\xff\xd8")
    assert find_temps(book) == sorted(leftovers + [ff])
    assert clean_temp_files(book) == 6
    assert not find_temps(book)
    assert all(p.exists() for p in keep)
