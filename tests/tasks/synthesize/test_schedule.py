"""The "chapters" schedule (tasks/synthesize/render.py): the earliest unfinished chapter renders first while the
batch stays full, a chapter is committed the moment its last row finishes (playable), and the audio is the same
bytes as under the default "length" schedule."""
from __future__ import annotations

import shutil
from collections import Counter

import pytest

import manifests.store
from flows.options import options_from_params
from tasks import stages
from tasks.synthesize.render import chapter_ranks, synthesize_book

SHORT = "春眠不觉晓。"
LONG = "山高水长，风和日丽，我们一起去看海，看那日出东方，听那潮水拍岸，一直走到天色将晚才回家。"


def rows_of(chapters: list[int], keys: list[str] | None = None) -> list[dict]:
    return [{"chapter": c, "content_key": (keys or [f"k{i}" for i in range(len(chapters))])[i]}
            for i, c in enumerate(chapters)]


def test_chapter_ranks_are_chapters_but_the_last_batch_worth_shares_one():
    rows = rows_of([0, 0, 1, 1, 2, 2, 3, 3])
    assert chapter_ranks(rows, 3) == {"k0": 0, "k1": 0, "k2": 1, "k3": 1, "k4": 2, "k5": 2, "k6": 2, "k7": 2}
    assert set(chapter_ranks(rows, 8).values()) == {0}            # a batch holds the book: the default order
    assert chapter_ranks(rows_of([0, 1, 2, 3], ["a", "b", "c", "a"]), 1) == {"a": 0, "b": 1, "c": 2}   # repeated


@pytest.fixture(scope="module")
def planned(tmp_path_factory, engine):
    """A four-chapter book planned for the random-tiny engine (two rows a batch): chapter 1 short sentences,
    the others long ones, so that the default order renders chapter 1 last."""
    tmp = tmp_path_factory.mktemp("schedule")
    book = tmp / "book.txt"
    chapters = [[SHORT, SHORT.replace("晓", "觉")], [LONG, LONG.replace("海", "山")], [LONG.replace("家", "去")],
                [LONG.replace("晚", "黑"), SHORT.replace("春", "夏")]]
    book.write_text("".join(f"第{n}章\n\n" + "\n\n".join(ps) + "\n\n" for n, ps in zip("一二三四", chapters)),
                    encoding="utf-8")
    opts = options_from_params(str(book), out=str(tmp / "out"), model="random-tiny", max_batch=2)
    return stages.prepare(opts)


def render(planned, tmp_path, monkeypatch, schedule: str) -> tuple[dict[int, int], int, dict[str, bytes]]:
    """({chapter: the rows rendered when it became whole in the manifest}, chapter 1's rows, every segment file's
    bytes) of a render of a copy of the planned book."""
    book_dir = tmp_path / schedule
    shutil.copytree(planned, book_dir)
    left = Counter(r["chapter"] for r in manifests.store.load(book_dir).to_pylist())
    first = left[0]
    whole: dict[int, int] = {}
    done = [0]
    real = manifests.store.commit

    def commit(where, rows, **kw):
        left.subtract(r["chapter"] for r in rows if r["status"] == "done")
        done[0] += len(rows)
        whole.update({c: done[0] for c, n in left.items() if n == 0 and c not in whole})
        return real(where, rows, **kw)

    monkeypatch.setattr("tasks.synthesize.render.commit", commit)        # the stage's commits (its Commits)
    from engine.api import EngineOptions

    counts = synthesize_book(book_dir, stages.get_engine(EngineOptions(model="random-tiny", max_batch=2)),
                             schedule=schedule)
    assert counts["rendered"] == counts["total"] > 7
    return whole, first, {p.name: p.read_bytes() for p in book_dir.glob("segments/*/*.flac")}


def test_chapter_order_plays_chapter_one_first_with_the_same_audio(planned, tmp_path, monkeypatch):
    by_length, first, audio_length = render(planned, tmp_path, monkeypatch, "length")
    by_chapter, _, audio_chapter = render(planned, tmp_path, monkeypatch, "chapters")
    assert audio_chapter == audio_length and len(audio_length) > 7          # the same bytes, whatever the order
    assert by_chapter[0] == first                    # chapter 1 first, committed the moment it is whole
    assert sorted(by_chapter, key=by_chapter.__getitem__) == [0, 1, 2, 3]
    assert by_length[0] > first                      # the default order: after the long rows of later chapters


def test_a_reroll_in_chapter_one_joins_the_run_and_does_not_wait_for_the_book(planned, tmp_path, monkeypatch):
    """The guard re-rolls chapter 1's segment (its first attempt flagged): the re-roll joins the running
    engine call with its chapter's rank, so chapter 1 is still whole before the later chapters (a re-roll used
    to wait for a second pass after every first attempt of the book), and its row says two attempts."""
    from tasks.synthesize import render as stage

    flagged: list[str] = []

    def check(text, audio, sample_rate, guard):
        if text.startswith(SHORT) and not flagged:
            flagged.append(text)
            return "guard: truncated (the test's)"
        return real_check(text, audio, sample_rate, guard)

    real_check = stage.check
    monkeypatch.setattr("tasks.synthesize.render.check", check)
    by_chapter, first, _ = render(planned, tmp_path, monkeypatch, "chapters")
    assert len(flagged) == 1
    assert by_chapter[0] < by_chapter[3] and by_chapter[0] <= first + 2      # the re-roll, at most a row beside it
    [row] = [r for r in manifests.store.load(tmp_path / "chapters").to_pylist() if r["text"] == flagged[0]]
    assert row["attempts"] == 2 and row["status"] == "done"
