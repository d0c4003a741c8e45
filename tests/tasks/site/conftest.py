"""A book rendered once for the site tests: the sample EPUB (4 chapters, a cover) as FLAC chapters and an M4B."""
from __future__ import annotations

import pytest

from flows.cli import main
from tests.flows.helpers import SAMPLE


@pytest.fixture(scope="session")
def rendered_book(tmp_path_factory):
    """OUT/daodejing/ of a random-tiny render to flac,m4b.  Tests copy it before changing anything."""
    out = tmp_path_factory.mktemp("site-out")
    assert main([str(SAMPLE), "--model", "random-tiny", "--out", str(out), "--format", "flac,m4b"]) == 0
    return out / "daodejing"
