"""Chinese TXT ingest is exactly what it was before English TXT ingest (issue 25) was added: the Book read from each
Chinese corpus TXT file (and its GBK/GB18030 transcodings) has the fingerprint the reader on main gave it.

The fingerprints were taken with main @ f0f1375 (before tasks/ingest/txt_en.py).  A deliberate change to Chinese
TXT ingest changes them: print the new ones with `python -m tests.tasks.ingest.test_txt_zh_unchanged` and say in
the commit what changed and why."""
from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from tasks.book import Book
from tasks.ingest import load_book
from tests.conftest import corpus_path

FINGERPRINTS = {  # corpus path under txt/ -> sha256 of the Book as canonical JSON (source_path left out)
    "encodings-transcoded/23865-0.gbk.txt": "6eae26e1b3c41fc4a0a0b830cbee2656946d28dbe5a8e54193a7c2c0c4e4fe1d",
    "encodings-transcoded/25124-0.gb18030.txt": "4edf8de700e11a80aba4a7e1a0940c0758842ae965bae39a44a3ac6a18ba90e2",
    "encodings-transcoded/27166-0.gb18030.txt": "914dbc1794d7eb116ecb2e5d3badc392765aae75f6cc620704527336798d500a",
    "gutenberg-zh/23865-0.txt": "e7ffb52c167887ddb25b60bdf3ecf593a2daa9a768df61919a1fd21278a04cab",
    "gutenberg-zh/23950-0.txt": "bee970f831be7010c9f51e497183735799598aaf6c0ff0f0c7dec76f9543cc19",
    "gutenberg-zh/23962-0.txt": "66633ab6ba7a2a641dee58d283d9428f3b043b36784167ecd2267fd360efb24a",
    "gutenberg-zh/24264-0.txt": "f27e26d311d3145f112fe11017cc393207712c780f3c35f5282266f6744f1114",
    "gutenberg-zh/25124-0.txt": "4ab817a2053a06644a88728c5cad8672de72813463b49472e8f6d94ea21b59eb",
    "gutenberg-zh/25271-0.txt": "59b0ef86a2f5e1e4777f98b9364fb34e77aa06584c380779ca7f24f562e56442",
    "gutenberg-zh/27166-0.txt": "01fb9002247c1d72612234ab233038af0ab96c17ea4cba386115515e21d85bb6",
}


def fingerprint(book: Book) -> str:
    """Of the book as read: its meta and chapters (what issue 41 added, the matter set aside and the chapters'
    breaks, is checked apart: Gutenberg's header and footer are set aside, nothing else)."""
    d = dataclasses.asdict(book)
    d["meta"].pop("cover", None)
    d["meta"].pop("source_path")  # where the corpus lies differs between machines
    assert all(s["kind"] == "pg-license" for s in d.pop("set_aside"))
    assert all(not c.pop("breaks") for c in d["chapters"])
    return hashlib.sha256(json.dumps(d, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(FINGERPRINTS))
def test_chinese_txt_book_is_unchanged(name):
    book = load_book(corpus_path("txt", *name.split("/")))
    assert book.meta.language == "zh"
    assert fingerprint(book) == FINGERPRINTS[name]


if __name__ == "__main__":
    for key in sorted(FINGERPRINTS):
        print(f'    "{key}": "{fingerprint(load_book(corpus_path("txt", *key.split("/"))))}",')
