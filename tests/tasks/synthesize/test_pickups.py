"""Pickups (tasks/synthesize/pickups.py, tasks/plan/fixes.py): only the named segments render, only their chapters are
re-packaged, every take is kept and `--take` restores one byte for byte; overrides are applied at every plan.

The engine is test_guard's StubEngine (audio from the request's seed), so what renders is counted exactly."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import manifests
from tasks import stages
from tasks.book import Book, BookMeta, Chapter, Segment, segment_name
from tasks.bookdir import BOOK_JSON, FIXES_JSON, book_json, take_relpath
from tasks.errors import BookError
from tasks.plan.fixes import Fix, load_fixes, match_fixes, parse_name, read_names, save_fixes
from tasks.plan.rows import derive_seed, plan_rows
from tasks.synthesize.guard import reroll_seed
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.pickups import (
    choose_take,
    find_rows,
    override,
    packaged_chapters,
    repackaged,
    retake,
    take_entries,
    takes_table,
)
from tasks.synthesize.render import synthesize_book
from tests.tasks.synthesize.test_guard import StubEngine

TEXTS = [["山高水长，风和日丽。", "春眠不觉晓，处处闻啼鸟。"], ["夜来风雨声，花落知多少。", "床前明月光，疑是地上霜。"],
         ["举头望明月，低头思故乡。", "白日依山尽，黄河入海流。"]]


class Engine(StubEngine):
    adopts = ()


def three_chapters() -> tuple[Book, list[Segment]]:
    book = Book(BookMeta(title="三章"), tuple(Chapter(c, f"第{c + 1}章", tuple(t)) for c, t in enumerate(TEXTS)))
    segs = [Segment(c, i, t, t, "chapter" if i == len(ts) - 1 else "sentence")
            for c, ts in enumerate(TEXTS) for i, t in enumerate(ts)]
    return book, segs


def rendered_book(tmp_path: Path, engine) -> Path:
    """A 3-chapter book rendered by `engine` and packaged (flac)."""
    book, segs = three_chapters()
    book_dir = tmp_path / "book"
    book_dir.mkdir(parents=True)
    manifests.commit(book_dir, plan_rows(book, segs, "spk" * 30, engine.version, book_dir))
    (book_dir / BOOK_JSON).write_text(json.dumps(book_json(book), ensure_ascii=False), encoding="utf-8")
    assert synthesize_book(book_dir, engine)["rendered"] == 6
    stages.package(book_dir)
    return book_dir


def chapter_file(book_dir: Path, n: int) -> Path:
    (f,) = book_dir.glob(f"{n:03d} - *.flac")
    return f


def stamp(p: Path) -> tuple:
    return p.stat().st_ino, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()


def rows_of(book_dir: Path) -> list[dict]:
    return manifests.load(book_dir).to_pylist()


def test_an_override_renders_exactly_the_named_segment_and_repackages_exactly_its_chapter(tmp_path):
    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    files = {n: stamp(chapter_file(book_dir, n)) for n in (1, 2, 3)}
    before, engine.calls = packaged_chapters(book_dir), []
    rows = find_rows(rows_of(book_dir), ["2.2"], "book.txt")
    changed = override(book_dir, rows, Fix("", text="床前明月光，好像地上霜。"), engine.version)
    assert [(r["chapter"], r["segment"], r["status"]) for r in changed] == [(1, 1, "pending")]
    counts = synthesize_book(book_dir, engine, keys={r["content_key"] for r in changed})
    assert counts["rendered"] == 1 and counts["total"] == 1
    assert [k for k, _ in engine.calls] == [changed[0]["content_key"]]        # one request: the named segment
    stages.package(book_dir)
    assert repackaged(before, packaged_chapters(book_dir)) == [2]
    assert stamp(chapter_file(book_dir, 1)) == files[1] and stamp(chapter_file(book_dir, 3)) == files[3]
    assert stamp(chapter_file(book_dir, 2))[2] != files[2][2]
    row = find_rows(rows_of(book_dir), ["2.2"], "book.txt")[0]
    assert row["text"] == "床前明月光，好像地上霜。" and row["source_text"] == TEXTS[1][1]   # subtitles stay


def test_only_the_named_keys_render_while_other_rows_are_pending(tmp_path):
    engine = Engine(lambda req: 1.0)
    book, segs = three_chapters()
    book_dir = tmp_path / "b"
    book_dir.mkdir()
    rows = plan_rows(book, segs, "spk" * 30, engine.version, book_dir)
    manifests.commit(book_dir, rows)
    counts = synthesize_book(book_dir, engine, keys={rows[3]["content_key"]})
    assert counts["rendered"] == 1 and [k for k, _ in engine.calls] == [rows[3]["content_key"]]
    assert [r["status"] for r in rows_of(book_dir)] == ["pending"] * 3 + ["done"] + ["pending"] * 2


def test_a_retake_is_a_new_take_kept_and_take_1_restores_the_chapter_byte_for_byte(tmp_path):
    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    ch2 = hashlib.sha256(chapter_file(book_dir, 2).read_bytes()).hexdigest()
    rows = find_rows(rows_of(book_dir), ["2.1"], "book.txt")
    engine.calls = []
    new = retake(book_dir, engine, rows, "book.txt", None, GuardOptions(), None)
    key, seed = rows[0]["content_key"], rows[0]["seed"]
    assert engine.calls == [(f"{key}#2", reroll_seed(seed, 2))] and reroll_seed(seed, 2) != seed
    assert new[0]["take"] == 2 and new[0]["audio_path"] == take_relpath(key, 2)
    one, two = (sf.read(book_dir / take_relpath(key, t))[0] for t in (1, 2))
    assert not np.array_equal(one, two)
    stages.package(book_dir)
    assert hashlib.sha256(chapter_file(book_dir, 2).read_bytes()).hexdigest() != ch2
    row = find_rows(rows_of(book_dir), ["2.1"], "book.txt")[0]
    assert [(e["take"], e["seed"]) for e in json.loads(row["takes"])] == [(1, seed), (2, reroll_seed(seed, 2))]
    table = takes_table(book_dir, [row]).splitlines()
    assert len(table) == 3 and table[2].rstrip().endswith("*") and not table[1].rstrip().endswith("*")
    before = packaged_chapters(book_dir)
    choose_take(book_dir, [row], 1, "book.txt")
    stages.package(book_dir)
    assert hashlib.sha256(chapter_file(book_dir, 2).read_bytes()).hexdigest() == ch2
    assert repackaged(before, packaged_chapters(book_dir)) == [2]
    kept = find_rows(rows_of(book_dir), ["2.1"], "book.txt")[0]
    assert kept["take"] == 1 and len(take_entries(book_dir, kept)) == 2     # take 2 stays on disk


def test_a_seed_fix_renders_with_that_seed(tmp_path):
    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    rows = find_rows(rows_of(book_dir), ["3.1"], "book.txt")
    engine.calls = []
    changed = override(book_dir, rows, Fix("", seed=12345), engine.version)
    synthesize_book(book_dir, engine, keys={r["content_key"] for r in changed})
    assert [s for _, s in engine.calls] == [12345]
    row = find_rows(rows_of(book_dir), ["3.1"], "book.txt")[0]
    want = (0.1 * np.random.default_rng(12345).standard_normal(len(sf.read(book_dir / row["audio_path"])[0])))
    assert np.allclose(sf.read(book_dir / row["audio_path"])[0], want, atol=1e-6)   # seed 12345's audio
    assert load_fixes(book_dir)["3.1"] == Fix(TEXTS[2][0], seed=12345)


def test_fixes_add_up_and_a_plan_applies_them(tmp_path):
    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    rows = find_rows(rows_of(book_dir), ["1.2"], "book.txt")
    override(book_dir, rows, Fix("", text="春眠不觉晓。"), engine.version)
    override(book_dir, find_rows(rows_of(book_dir), ["1.2"], "book.txt"), Fix("", voice="other" * 30),
             engine.version)
    fix = load_fixes(book_dir)["1.2"]
    assert (fix.text, fix.voice, fix.seed) == ("春眠不觉晓。", "other" * 30, None)
    book, segs = three_chapters()
    overrides, dropped = match_fixes(load_fixes(book_dir), segs)
    plan = plan_rows(book, segs, "spk" * 30, engine.version, book_dir, fixes=overrides)
    manifest = {(r["chapter"], r["segment"]): r for r in rows_of(book_dir)}
    assert dropped == [] and [r["content_key"] for r in plan] == [manifest[k]["content_key"] for k in sorted(manifest)]
    fixed = plan[1]
    assert (fixed["text"], fixed["source_text"], fixed["spk_emb"]) == ("春眠不觉晓。", TEXTS[0][1], "other" * 30)
    assert fixed["seed"] == derive_seed("春眠不觉晓。", fixed["voice_id"])
    assert [r["spk_emb"] for i, r in enumerate(plan) if i != 1] == ["spk" * 30] * 5


def test_a_fix_whose_sentence_moved_is_dropped_not_applied_to_another():
    _, segs = three_chapters()
    fixes = {"2.1": Fix(TEXTS[1][0], seed=1), "2.2": Fix("a sentence that is no longer there", seed=2),
             "9.1": Fix("a chapter this preview does not plan", seed=3)}
    overrides, dropped = match_fixes(fixes, segs)
    assert overrides == {(1, 0): fixes["2.1"]} and dropped == ["2.2"]


def test_names_files_and_bad_input(tmp_path):
    assert parse_name("2.14") == (1, 13) and segment_name(1, 13) == "2.14"
    for bad in ("0.1", "2", "2.x", "1.0"):
        with pytest.raises(ValueError, match=r"CHAPTER\.SEGMENT"):
            parse_name(bad)
    f = tmp_path / "list.txt"
    f.write_text("# flagged in the player\n2.1\n\n  3.2  # the name\n", encoding="utf-8")
    assert read_names(f) == ["2.1", "3.2"]
    f.write_text("2.1\nchapter two\n", encoding="utf-8")
    with pytest.raises(BookError, match=r"list.txt: line 2: .*CHAPTER.SEGMENT"):
        read_names(f)
    with pytest.raises(BookError, match="cannot read"):
        read_names(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="text, the seed or the voice"):
        Fix("x")
    save_fixes(tmp_path, {"1.1": Fix("天", text="地")})
    assert load_fixes(tmp_path) == {"1.1": Fix("天", text="地")}
    assert json.loads((tmp_path / FIXES_JSON).read_text())["fixes"] == {"1.1": {"source_text": "天", "text": "地"}}


def test_a_bad_name_or_a_missing_take_changes_nothing(tmp_path):
    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    parts = sorted(p.name for p in (book_dir / "manifest").iterdir())
    with pytest.raises(BookError, match=r"segment 2.9: not in the rendered book \(chapter 2 has 2 segments\)"):
        find_rows(rows_of(book_dir), ["2.1", "2.9"], "book.txt")
    with pytest.raises(BookError, match="no chapter 7"):
        find_rows(rows_of(book_dir), ["7.1"], "book.txt")
    rows = find_rows(rows_of(book_dir), ["1.1", "2.1"], "book.txt")
    with pytest.raises(BookError, match=r"segment 1.1 has no take 2 \(1 take on disk"):
        choose_take(book_dir, rows, 2, "book.txt")
    assert sorted(p.name for p in (book_dir / "manifest").iterdir()) == parts     # nothing committed


def test_a_retake_refuses_audio_another_engine_made(tmp_path):
    book_dir = rendered_book(tmp_path, Engine(lambda req: 1.0))

    class Other(Engine):
        version = "stub-2"

    engine = Other(lambda req: 1.0)
    with pytest.raises(BookError, match="rendered by engine stub-1, this process runs stub-2"):
        retake(book_dir, engine, find_rows(rows_of(book_dir), ["1.1"], "book.txt"), "book.txt", None,
               GuardOptions(), None)
    assert engine.calls == []


class EchoTranscriber:
    """Hears what the segment says when the audio is long enough, nothing otherwise (a stand-in for Whisper)."""

    batch = 4

    def __init__(self, texts: dict[int, str]):
        self.texts = texts                                   # samples -> transcript

    def transcribe_many(self, items, pack=False):
        from tasks.qa.asr import Transcript

        return [Transcript(self.texts.get(len(audio), ""), -0.2, 0.01, language, packed=pack)
                for audio, _, language in items]

    def tail_speech(self, audio, sample_rate, transcript):
        return None


class NoVoice:
    def embed(self, audio, sample_rate):
        from tasks.qa.speaker import Embedding

        return Embedding(None, 1.0)


def test_a_retake_with_qa_on_is_heard_and_its_record_kept(tmp_path):
    from tasks.qa.checker import Checker
    from tasks.qa.options import QAOptions

    engine = Engine(lambda req: 1.0)
    book_dir = rendered_book(tmp_path, engine)
    (row,) = find_rows(rows_of(book_dir), ["2.2"], "book.txt")
    n = row["samples"]                                          # StubEngine: every take of a text has this length
    qa = QAOptions(mode="full", min_units=4)                  # a 10-character line is conclusive
    checker = Checker(qa, transcriber=EchoTranscriber({n: row["text"]}), encoder=NoVoice())
    (new,) = retake(book_dir, engine, [row], "book.txt", qa, GuardOptions(), checker)
    assert (new["take"], new["qa"], new["cer"], new["transcript"]) == (2, "pass", 0.0, row["text"])
    assert new["qa_checks"] == "duration,asr"
    entries = json.loads(new["takes"])
    assert [(e["take"], e["verdict"]) for e in entries] == [(1, ""), (2, "pass")]   # take 1 was never heard
    choose_take(book_dir, [new], 1, "book.txt")
    (back,) = find_rows(rows_of(book_dir), ["2.2"], "book.txt")
    assert (back["take"], back["qa"], back["cer"]) == (1, "", None)   # take 1 has no check record
    choose_take(book_dir, [back], 2, "book.txt")
    assert find_rows(rows_of(book_dir), ["2.2"], "book.txt")[0]["qa"] == "pass"   # from take 2's record
