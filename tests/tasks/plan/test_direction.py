"""A direction file (tasks/plan/direction.py): its format and its errors (FILE:LINE), what it does to each segment,
and that its controls enter the content key only when they are not the defaults (tasks/plan/rows.py)."""
from __future__ import annotations

import hashlib

import pytest

from engine.api import Controls, Refine
from tasks.audio.assemble import AssembleOptions
from tasks.book import Book, BookMeta, Chapter, Segment, pause_kind, pause_seconds
from tasks.errors import BookError
from tasks.plan.direction import direct, directed_segments, direction_paths, load_direction
from tasks.plan.prepare import PrepareOptions, direct_book
from tasks.plan.rows import content_key, derive_seed, plan_rows, row_request
from tasks.voice.voices import voice_id

TEXTS = (("他笑道，好啊。", "風雨交加。", "天黑了。"), ("第二章开头。", "他又笑道，再见。"))
VOICE = "a" * 80
GOOD = """# a direction file
1.1        speed=2 pause_after=1.5        # the first line, slower
"風雨"      laugh=end temperature=0.2 top_p=0.5 top_k=7
1.3        uv_break=after:天 pause_before=0.9 lbreak=start
笑道        laugh=start
2.1        pause_before=2
"""


def segments():
    return [Segment(c, i, t, t, pause_after="paragraph" if i == len(ts) - 1 else "sentence")
            for c, ts in enumerate(TEXTS) for i, t in enumerate(ts)]


def write(tmp_path, text: str, name: str = "book.direction.txt"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_direction_file_sets_each_named_line(tmp_path):
    d = load_direction(write(tmp_path, GOOD))
    lines = direct(segments(), d)
    first, storm, night, second_first, laugh_again = lines
    assert first.controls == Controls(speed=2) and first.pause_after == 1.5
    assert first.text == "[laugh]他笑道，好啊。"                            # a text names every line holding it
    assert storm.text == "風雨交加。[laugh]"                                # Traditional in the file and the book
    assert storm.controls == Controls(temperature=0.2, top_p=0.5, top_k=7)
    assert night.text == "[lbreak]天[uv_break]黑了。" and night.pause_before == 0.9
    assert second_first.controls == Controls() and second_first.pause_before == 2.0
    assert laugh_again.text == "[laugh]他又笑道，再见。"
    assert [len(line.entries) for line in lines] == [2, 1, 1, 1, 1]


def test_pauses_go_after_the_line_before_and_not_before_a_chapter(tmp_path):
    segs = segments()
    out, by_pos, notes = directed_segments(segs, direct(segs, load_direction(write(tmp_path, GOOD))))
    pauses = {pos: p for pos, (_, p) in by_pos.items()}
    assert pauses[(0, 0)] == "sentence@1.5"                 # pause_after=1.5
    assert pauses[(0, 1)] == "sentence@0.9"                 # 1.3's pause_before=0.9: after 1.2
    assert pauses[(0, 2)] == "paragraph" and pauses[(1, 0)] == "sentence"
    assert len(notes) == 1 and "2.1" in notes[0] and "lead-in" in notes[0]      # a chapter's first line
    assert [s.text for s in out] == [line.text for line in direct(segs, load_direction(write(tmp_path, GOOD)))]
    opts = AssembleOptions()
    assert opts.pause_samples("sentence@0.9") == round(0.9 * opts.sample_rate)
    assert opts.pause_samples("sentence") == round(opts.pauses_s["sentence"] * opts.sample_rate)
    assert pause_kind("paragraph@2") == "paragraph" and pause_seconds("paragraph@2") == 2.0
    assert pause_seconds("clause") is None


@pytest.mark.parametrize("line, problem", [
    ("1.1", "sets nothing"),
    ("1.1 speed=10", "speed=10: must be 0..9"),
    ("1.1 speed=fast", "expected an integer"),
    ("1.1 loud=3", "'loud=3' is not a setting"),
    ("1.1 speed", "'speed' is not a setting"),
    ("0.1 speed=3", "count from 1"),
    ("speed=3", "starts with a setting"),
    ('"unclosed speed=3', "No closing quotation"),
    ("1.1 laugh=middle", "start, end or after:TEXT"),
    ("1.1 uv_break=after:", "start, end or after:TEXT"),
    ("1.1 pause_after=0.01", "0 or 0.08..30"),
    ("1.1 pause_before=31", "0 or 0.08..30"),
    ("1.1 top_p=1.5", "top_p 1.5"),
    ("1.1 top_k=0", "top_k 0"),
    ("1.1 temperature=0", "temperature 0.0"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, problem):
    p = write(tmp_path, f"# ok\n1.2 speed=3\n\n{line}\n")
    with pytest.raises(BookError) as e:
        load_direction(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:4: ") and problem in msg and "\n" not in msg, msg


def test_names_and_texts_the_book_does_not_have_are_errors_naming_the_line(tmp_path):
    for text, what in (("3.1 speed=3", "segment 3.1"), ("1.9 speed=3", "segment 1.9"),
                       ('"不在书里" speed=3', "text '不在书里'"), ("1.1 laugh=after:月亮", "after:月亮")):
        p = write(tmp_path, f"1.2 speed=4\n{text}\n")
        with pytest.raises(BookError, match=f"^{p}:2: .*{what}"):
            direct(segments(), load_direction(p))
    p = write(tmp_path, "3.1 speed=3\n")                    # a preview of some chapters: other names are no error
    assert direct(segments(), load_direction(p), check_names=False)[0].controls == Controls()


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(BookError, match="no such direction file"):
        load_direction(tmp_path / "nope.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("1.1 laugh=after:é\n".encode("latin-1"))
    with pytest.raises(BookError, match="UTF-8"):
        load_direction(bad)
    book = tmp_path / "novel.epub"
    assert direction_paths(book) == []
    own = write(tmp_path, "1.1 speed=3\n", "novel.direction.txt")
    assert direction_paths(book, str(tmp_path / "more.txt")) == [own, tmp_path / "more.txt"]


def test_later_entries_win_and_insertions_add_up(tmp_path):
    a = write(tmp_path, "1.1 speed=2 laugh=end\n笑道 speed=7 top_k=5\n", "a.txt")
    b = write(tmp_path, "1.1 speed=3 uv_break=start laugh=end\n", "b.txt")
    first = direct(segments(), load_direction(a, b))[0]
    assert first.controls == Controls(speed=3, top_k=5)
    assert first.text == "[uv_break]他笑道，好啊。[laugh]"


def test_speed_comes_from_the_line_then_the_voice_then_the_book(tmp_path):
    from dataclasses import replace

    from engine.voice import VoiceSpec
    from tasks.voice.cast import Cast

    segs = [*segments(), Segment(1, 2, "“走吧。”", "“走吧。”", role="dialogue", speaker="宝玉")]
    direction = load_direction(write(tmp_path, "1.1 speed=1\n"))
    base = PrepareOptions(book=tmp_path / "b.txt", direction=direction)
    speeds = lambda opts: [c.speed for c, _ in direct_book(opts, segs)[1].values()]   # noqa: E731
    assert speeds(base) == [1, 5, 5, 5, 5, 5]
    assert speeds(replace(base, speed=7)) == [1, 7, 7, 7, 7, 7]
    voiced = replace(base, speed=7, voice=VoiceSpec("narrator", seed=1, speed=4))
    assert speeds(voiced) == [1, 4, 4, 4, 4, 4]                  # the voice's own pace over --speed
    cast = Cast("cast.toml", characters=(("寶玉", VoiceSpec("seed:9", seed=9, speed=8)),))
    assert speeds(replace(voiced, voice=None, cast=cast)) == [1, 7, 7, 7, 7, 8]   # the character's own
    refine = Refine(1, 2, 3)
    assert {c.refine for c, _ in direct_book(replace(base, refine=refine), segs)[1].values()} == {refine}


def test_controls_enter_the_content_key_only_when_not_the_defaults(tmp_path):
    """A book planned without controls keeps every key it had (the formula before controls existed); a line's
    speed changes that line's key and nothing else; the row carries its controls for the engine."""
    segs = segments()
    book = Book(BookMeta(title="t"), tuple(Chapter(c, f"c{c}", ts) for c, ts in enumerate(TEXTS)))
    vid = voice_id(VOICE)
    legacy = [hashlib.sha256(f"{s.text}\x1f{vid}\x1f{derive_seed(s.text, vid)}\x1fv1".encode()).hexdigest()[:32]
              for s in segs]
    plain = plan_rows(book, segs, VOICE, "v1", tmp_path)
    assert [r["content_key"] for r in plain] == legacy
    same, by_pos, _ = directed_segments(segs, direct(segs, None))
    assert [r["content_key"] for r in plan_rows(book, same, VOICE, "v1", tmp_path, directed=by_pos)] == legacy
    assert all(r["controls"] == "" and r["refined"] == "" for r in plain)
    one = load_direction(write(tmp_path, "1.2 speed=3 top_k=5\n1.3 pause_after=2\n"))
    out, by_pos, _ = directed_segments(segs, direct(segs, one))
    rows = plan_rows(book, out, VOICE, "v1", tmp_path, directed=by_pos)
    changed = [i for i, (r, k) in enumerate(zip(rows, legacy)) if r["content_key"] != k]
    assert changed == [1]                                        # the pause re-packages, it does not re-render
    assert rows[1]["controls"] == "speed=3;top_k=5" and rows[2]["pause_after"] == "paragraph@2"
    assert rows[1]["content_key"] == content_key(rows[1]["text"], vid, rows[1]["seed"], "v1", "speed=3;top_k=5")
    req = row_request(rows[1])
    assert req.controls == Controls(speed=3, top_k=5) and req.refined is None and req.key == rows[1]["content_key"]


def test_the_readme_example_is_a_direction_file(tmp_path):
    """README's example loads and means what its comments say, on a book that has those lines."""
    import textwrap

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```text\n", 1)[1].split("```", 1)[0]
    assert "novel.direction.txt" in block
    p = write(tmp_path, textwrap.dedent(block))
    texts = {(0, 2): "他慢慢地走。", (1, 0): "他笑道，是的。", (1, 13): "风起了，雨也来了。", (3, 1): "天亮了。"}
    segs = [Segment(c, i, t, t) for (c, i), t in texts.items()]
    lines = {(s.chapter, s.index): line for s, line in zip(segs, direct(segs, load_direction(p)))}
    assert lines[(0, 2)].controls.speed == 2 and lines[(0, 2)].pause_after == 1.5
    assert lines[(1, 0)].text == "他笑道，是的。[laugh]"
    assert lines[(1, 13)].text == "风起了，[uv_break]雨也来了。" and lines[(1, 13)].pause_before == 0.8
    assert lines[(3, 1)].controls == Controls(temperature=0.2, top_p=0.5, top_k=10)
