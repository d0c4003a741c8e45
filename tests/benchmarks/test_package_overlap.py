"""benchmarks/package_overlap.py on a tiny book: both ways package the same bytes, one JSON with the ratio, and the
package module encodes chapter files on its own thread again afterwards."""
from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="ffmpeg not installed (apt-get install ffmpeg)")


def test_both_ways_write_the_same_bytes_and_the_ratio_is_theirs(tmp_path, capsys):
    import tasks.audio.package as P
    from benchmarks import package_overlap as bench

    out = tmp_path / "p.json"
    assert bench.main(["--chapters", "2", "--minutes", "0.05", "--repeat", "2", "--json", str(out)]) == 0
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["same_bytes"] is True and r["chapters"] == 2
    assert len(r["seconds"]["overlapped"]) == len(r["seconds"]["one_by_one"]) == 2
    m = r["median_s"]
    assert r["one_by_one_over_overlapped"] == pytest.approx(m["one_by_one"] / m["overlapped"], rel=0.1)  # rounded
    assert "one_by_one / overlapped" in capsys.readouterr().out
    assert P.CHAPTER_ENCODERS == 1


def test_bad_sizes_are_refused():
    from benchmarks import package_overlap as bench

    with pytest.raises(SystemExit):
        bench.main(["--chapters", "0"])
