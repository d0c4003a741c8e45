"""Pace, refine and direction end to end (random-tiny, CPU): one line's direction changed renders that line alone and
re-packages its chapter alone; a book rendered before controls existed renders nothing again; --refine stores the
refine pass's text with each segment and `inspect --segments` shows it; bad input is one line, exit 2."""
from __future__ import annotations

import json

import pyarrow.parquet as pq

import manifests
from flows.cli import main
from tests.flows.helpers import chapter_files, write_txt_book

TINY = ("--model", "random-tiny")


def stamps(book_dir) -> dict[str, tuple]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in chapter_files(book_dir)}


def rows_by_name(book_dir) -> dict[str, dict]:
    return {f"{r['chapter'] + 1}.{r['segment'] + 1}": r for r in manifests.load(book_dir).to_pylist()}


def render(capsys, *args) -> str:
    assert main([*args, *TINY]) == 0
    return capsys.readouterr().out


def test_one_lines_direction_changed_renders_it_alone_and_repackages_its_chapter(tmp_path, capsys):
    txt = write_txt_book(tmp_path / "novel.txt", chapters=3, sentences=4)
    out = tmp_path / "out"
    book_dir = out / "novel"
    direction = tmp_path / "novel.direction.txt"              # the book's own, found beside it
    direction.write_text("2.2 speed=3\n", encoding="utf-8")
    assert "rendered" in render(capsys, str(txt), "--out", str(out))
    first = rows_by_name(book_dir)
    assert first["2.2"]["controls"] == "speed=3"
    assert {r["controls"] for n, r in first.items() if n != "2.2"} == {""}
    files = stamps(book_dir)
    ch1, ch2, ch3 = sorted(files)

    direction.write_text("2.2 speed=7\n", encoding="utf-8")   # one line's direction changed
    said = render(capsys, str(txt), "--out", str(out))
    assert "(1 rendered," in said, said
    now = rows_by_name(book_dir)
    assert [n for n in now if now[n]["content_key"] != first[n]["content_key"]] == ["2.2"]
    assert now["2.2"]["controls"] == "speed=7" and now["2.2"]["status"] == "done"
    after = stamps(book_dir)
    assert after[ch2] != files[ch2]                           # its chapter re-packaged ...
    assert {n: after[n] for n in (ch1, ch3)} == {n: files[n] for n in (ch1, ch3)}    # ... the others untouched

    direction.write_text("2.2 speed=7 pause_after=1.2\n", encoding="utf-8")          # a pause: packaging only
    said = render(capsys, str(txt), "--out", str(out))
    assert "(0 rendered," in said, said
    again = stamps(book_dir)
    assert again[ch2] != after[ch2] and {n: again[n] for n in (ch1, ch3)} == {n: files[n] for n in (ch1, ch3)}
    assert rows_by_name(book_dir)["2.2"]["pause_after"].endswith("@1.2")


def test_a_book_rendered_before_controls_resumes_with_nothing_to_render(tmp_path, capsys):
    """Its manifest parts have neither `controls` nor `refined` (they read as ""), and no key changed."""
    txt = write_txt_book(tmp_path / "novel.txt", chapters=2, sentences=3)
    out = tmp_path / "out"
    book_dir = out / "novel"
    render(capsys, str(txt), "--out", str(out))
    keys = {n: r["content_key"] for n, r in rows_by_name(book_dir).items()}
    for part in (book_dir / "manifest").glob("part-*.parquet"):          # as a render before them wrote it
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["controls", "refined"]), part)
    files = stamps(book_dir)
    said = render(capsys, str(txt), "--out", str(out))
    assert "(0 rendered," in said, said
    assert {n: r["content_key"] for n, r in rows_by_name(book_dir).items()} == keys
    assert stamps(book_dir) == files


def test_refine_stores_its_text_and_inspect_shows_it(tmp_path, capsys):
    txt = write_txt_book(tmp_path / "novel.txt", chapters=1, sentences=3)
    out = tmp_path / "out"
    book_dir = out / "novel"
    render(capsys, str(txt), "--out", str(out), "--refine", "--refine-oral", "4", "--speed", "6")
    rows = rows_by_name(book_dir)
    assert all(r["controls"] == "speed=6;refine=4/0/6" and r["refined"] and r["status"] == "done"
               for r in rows.values())
    assert len({r["refined"] for r in rows.values()}) == len(rows)
    assert "(0 rendered," in render(capsys, str(txt), "--out", str(out), "--refine", "--refine-oral", "4",
                                    "--speed", "6")                    # stored: nothing refined or rendered again
    assert main(["inspect", str(txt), "--segments", "--speed", "6", "--out", str(out), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["segments"]
    assert [e["refined"] for e in listed] == [rows[e["name"]]["refined"] for e in listed]
    assert {e["status"] for e in listed} == {"done"} and {e["speed"] for e in listed} == {6}
    assert main(["inspect", str(txt), "--segments", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    tilde = [line.split(None, 1)[1] for line in text.splitlines() if line.lstrip().startswith("~ ")]
    assert len(tilde) == len(rows) and " " not in tilde[0]          # compacted: upstream's decoding spaces gone


def test_bad_direction_and_refine_options_are_one_line_exit_2(tmp_path, capsys):
    txt = write_txt_book(tmp_path / "novel.txt", chapters=1, sentences=2)
    out = tmp_path / "out"
    bad = tmp_path / "d.txt"
    bad.write_text("# fine\n1.1 speed=12\n", encoding="utf-8")
    for args, says in ((["--direction", str(bad)], f"{bad}:2: speed=12: must be 0..9"),
                       (["--direction", str(tmp_path / "none.txt")], "no such direction file"),
                       (["--refine-laugh", "2"], "--refine-laugh is a level of the refine-text pass: add --refine"),
                       (["--refine", "--refine-laugh", "3"], "laugh level 3: must be 0..2"),
                       (["--speed", "10"], "--speed 10: must be 0..9")):
        assert main([str(txt), *TINY, "--out", str(out), *args]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
