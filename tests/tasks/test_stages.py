"""tasks.stages helpers that run without an engine."""
from __future__ import annotations

from tasks.stages import TEMP_GLOBS, clean_temp_files


def test_clean_temp_files_removes_every_leftover_and_nothing_else(tmp_path):
    book = tmp_path / "book"
    (book / "manifest").mkdir(parents=True)
    (book / "segments" / "ab").mkdir(parents=True)
    leftovers = [book / ".tmp-x.flac", book / "manifest" / "part-00000001.parquet.9.tmp",
                 book / "segments" / "ab" / "abcd.flac.tmp"]
    keep = [book / "001 - 一.flac", book / "manifest" / "part-00000001.parquet", book / "segments" / "ab" / "abcd.flac"]
    for p in leftovers + keep:
        p.write_bytes(b"x")
    ff = book / ".tmp-ffmpeg-k3"                      # an encode killed while ffmpeg read its side inputs
    ff.mkdir()
    (ff / "cover.jpg").write_bytes(b"\xff\xd8")
    assert clean_temp_files(book) == 4
    assert not [p for g in TEMP_GLOBS for p in book.glob(g)]
    assert all(p.exists() for p in keep)
