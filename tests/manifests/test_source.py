"""The source-hash record: which source content a book dir was rendered from."""
from __future__ import annotations

from manifests.source import read_source_hash, record_source_hash, source_sha256
from tests.flows.helpers import write_txt_book


def test_source_hash_round_trip(tmp_path):
    book = write_txt_book(tmp_path / "b.txt", chapters=1, sentences=2)
    assert read_source_hash(tmp_path / "out" / "b") is None
    record_source_hash(tmp_path / "out" / "b", book, source_sha256(book))
    assert read_source_hash(tmp_path / "out" / "b") == source_sha256(book)
    assert source_sha256(book) != source_sha256(write_txt_book(tmp_path / "c.txt", chapters=2, sentences=2))
