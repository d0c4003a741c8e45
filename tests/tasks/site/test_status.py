"""What a render tells its user: the chapter table, the status listing, the closing line."""
from __future__ import annotations

from engine.units import hms
from manifests import STATUS_DONE
from tasks.site.status import book_table, format_status, summary_line
from tests.flows.helpers import fake_render, write_txt_book


def test_book_table_from_manifest_and_report(tmp_path):
    book = write_txt_book(tmp_path / "t.txt", 1, 2)
    book_dir = fake_render(book, tmp_path / "out", statuses=(STATUS_DONE, "failed", STATUS_DONE))
    assert book_table(book_dir) == [{"chapter": 1, "title": "一", "segments": 3, "done": 2, "failed": 1,
                                     "seconds": 5.2, "lufs": -18.0, "true_peak_dbtp": -1.5,
                                     "file": "001 - 一.flac"}]


def test_summary_line_counts_rendered_reused_and_failed(tmp_path):
    rows = [{"done": 3, "done_s": 90.0}, {"done": 2, "done_s": 30.0}]
    ok = {"rendered": 4, "adopted": 0, "already_done": 1, "failed": 0, "total": 5}
    line = summary_line(tmp_path, rows, ok, 12.34)
    assert line == f"{tmp_path}: 2 chapters, 5 segments (4 rendered, 1 reused), 2.0 min of audio, 12.3 s"
    gaps = dict(ok, rendered=3, failed=1)
    assert "(3 rendered, 1 reused, 1 failed: gaps listed in report.json)" in summary_line(tmp_path, rows, gaps, 1)
    assert "rendered" not in summary_line(tmp_path, rows, {"book_dir": tmp_path}, 1)     # via a Prefect server


def test_status_listing_and_hms():
    rows = [{"chapter": 0, "title": "一", "done": 2, "pending": 1, "failed": 0, "done_s": 75.0, "remaining_s": 3700.0},
            {"chapter": 1, "title": "二", "done": 0, "pending": 0, "failed": 3, "done_s": 0.0, "remaining_s": 9.4}]
    lines = format_status(rows).splitlines()
    assert lines[0].split() == ["ch", "done", "pend", "fail", "audio", "left~", "title"]
    assert lines[1].split() == ["1", "2", "1", "0", "1:15", "1:01:40", "一"]
    assert lines[2].split() == ["2", "0", "0", "3", "0:00", "0:09", "二"]
    assert lines[3] == "total 2 done, 1 pending, 3 failed; 1:15 rendered, about 1:01:49 of audio left"
    assert [hms(s) for s in (0, 59.6, 3599, 3600)] == ["0:00", "1:00", "59:59", "1:00:00"]
