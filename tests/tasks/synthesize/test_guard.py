"""The segment quality guard: duration band, derived re-roll seeds, attempts in the manifest, failed
segments refused by packaging unless --allow-gaps (silence of the expected duration, listed in report.json).

The engine here is a test double of the Engine API that babbles or truncates on purpose: it tests the guard,
not the engine (random-* models are forced to the expected length and always pass)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import manifests
from engine.api import Result
from engine.units import SAMPLE_RATE, estimate_seconds, expected_tokens, samples_for_tokens
from tasks import stages
from tasks.book import Book, BookMeta, Chapter, Segment
from tasks.bookdir import BOOK_JSON, book_json
from tasks.errors import GapsError
from tasks.plan.rows import plan_rows
from tasks.synthesize.guard import check, expected_band, reroll_seed
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.render import synthesize_book

TEXTS = ["山高水长，风和日丽，我们一起去看海，看那日出东方。", "春眠不觉晓，处处闻啼鸟。", "夜来风雨声，花落知多少。"]


class StubEngine:
    """Engine API double: audio whose length is `factor(req, attempt) * expected`, content from the seed."""
    version = "stub-1"

    def __init__(self, factor):
        self.factor = factor
        self.calls: list[tuple[str, int]] = []

    def synthesize(self, requests, progress=None, more=None):
        """In order; `more` asked after each result and once idle (late requests join the call, as the engine's)."""
        queue = list(requests)
        while queue or (more is not None and (queue := list(more(True)))):
            req = queue.pop(0)
            self.calls.append((req.key, req.seed))
            n = int(self.factor(req) * estimate_seconds(req.text) * SAMPLE_RATE)
            audio = (0.1 * np.random.default_rng(req.seed).standard_normal(n)).astype(np.float32)
            yield Result(key=req.key, audio=audio, tokens=n // 512)
            queue += list(more(False)) if more is not None else []


def make_book(tmp_path: Path) -> tuple[Path, list[dict]]:
    book = Book(BookMeta(title="测试"), (Chapter(0, "第一章", tuple(TEXTS[:2])), Chapter(1, "第二章", (TEXTS[2],))))
    segs = [Segment(0, 0, TEXTS[0], TEXTS[0]), Segment(0, 1, TEXTS[1], TEXTS[1], "chapter"),
            Segment(1, 0, TEXTS[2], TEXTS[2], "chapter")]
    book_dir = tmp_path / "book"
    book_dir.mkdir()
    rows = plan_rows(book, segs, "spk" * 30, StubEngine.version, book_dir)
    manifests.commit(book_dir, rows)
    (book_dir / BOOK_JSON).write_text(json.dumps(book_json(book), ensure_ascii=False), encoding="utf-8")
    return book_dir, rows


def test_band_and_check():
    o = GuardOptions()
    text = TEXTS[1]
    e = estimate_seconds(text)
    lo, hi = expected_band(text, o)
    assert lo == pytest.approx(max(0, 0.4 * e - 1.0)) and hi == pytest.approx(2.5 * e + 1.0)
    ok = np.zeros(int(e * SAMPLE_RATE), np.float32)
    assert check(text, ok, SAMPLE_RATE) is None
    assert "babbling" in check(text, np.zeros(int((hi + 0.1) * SAMPLE_RATE), np.float32), SAMPLE_RATE)
    long_text = "山" * 60 + "。"
    lo2, _ = expected_band(long_text)
    assert "truncated" in check(long_text, np.zeros(int((lo2 - 0.1) * SAMPLE_RATE), np.float32), SAMPLE_RATE)
    bad = ok.copy()
    bad[5] = np.nan
    assert "NaN" in check(text, bad, SAMPLE_RATE)
    assert check(text, np.zeros(10 * int(hi * SAMPLE_RATE), np.float32), SAMPLE_RATE,
                 GuardOptions(enabled=False)) is None
    with pytest.raises(ValueError, match="max_attempts"):
        GuardOptions(max_attempts=0)


def test_random_models_always_pass():
    """random-* models are forced to expected_tokens(text): their duration is always inside the band."""
    for text in TEXTS + ["一。", "山" * 140 + "。", "第一章", "风，" * 40]:
        n = samples_for_tokens(expected_tokens(text))
        assert check(text, np.zeros(n, np.float32), SAMPLE_RATE) is None, text


def test_reroll_seed_is_derived_from_seed_and_attempt_only():
    assert reroll_seed(1234, 1) == 1234
    seeds = [reroll_seed(1234, a) for a in range(1, 6)]
    assert len(set(seeds)) == 5 and all(0 <= s < 2 ** 63 for s in seeds)
    assert seeds == [reroll_seed(1234, a) for a in range(1, 6)]          # stable
    assert reroll_seed(1235, 2) != reroll_seed(1234, 2)
    with pytest.raises(ValueError):
        reroll_seed(1, 0)


def test_outlier_is_rerolled_with_derived_seed(tmp_path):
    """The middle segment babbles with its own seed and is fine on the re-roll: attempts=2 in the manifest,
    and the stored audio is the re-roll's."""
    book_dir, rows = make_book(tmp_path)
    bad_key = rows[1]["content_key"]
    eng = StubEngine(lambda req: 6.0 if req.key == bad_key and req.seed == rows[1]["seed"] else 1.0)
    counts = synthesize_book(book_dir, eng)
    assert counts["rendered"] == 3 and counts["failed"] == 0
    got = {(r["chapter"], r["segment"]): r for r in manifests.load(book_dir).to_pylist()}
    assert [got[k]["attempts"] for k in sorted(got)] == [1, 2, 1]
    assert all(r["status"] == "done" for r in got.values())
    assert [s for k, s in eng.calls if k == bad_key] == [rows[1]["seed"], reroll_seed(rows[1]["seed"], 2)]
    audio, _ = sf.read(book_dir / rows[1]["audio_path"], dtype="float32")
    expect = 0.1 * np.random.default_rng(reroll_seed(rows[1]["seed"], 2)).standard_normal(len(audio))
    assert np.allclose(audio, expect, atol=1e-5)          # 24-bit FLAC of the re-roll's audio


def test_hopeless_segment_fails_and_packaging_needs_allow_gaps(tmp_path):
    book_dir, rows = make_book(tmp_path)
    bad_key = rows[0]["content_key"]
    eng = StubEngine(lambda req: 0.05 if req.key == bad_key else 1.0)      # truncates on every seed
    counts = synthesize_book(book_dir, eng)
    assert counts == {"rendered": 2, "adopted": 0, "already_done": 0, "failed": 1, "total": 3}
    r0 = manifests.load(book_dir).to_pylist()[0]
    assert r0["status"] == "failed" and r0["attempts"] == 3 and "truncated" in r0["error"]
    assert [s for k, s in eng.calls if k == bad_key] == [reroll_seed(rows[0]["seed"], a) for a in (1, 2, 3)]
    assert not (book_dir / rows[0]["audio_path"]).exists()
    # A rerun does not try again (the same seeds give the same audio): nothing is rendered.
    eng2 = StubEngine(lambda req: 1.0)
    assert synthesize_book(book_dir, eng2)["failed"] == 1 and eng2.calls == []

    with pytest.raises(GapsError, match="allow-gaps"):
        stages.package(book_dir)
    assert not list(book_dir.glob("*.flac"))
    stages.package(book_dir, allow_gaps=True)
    report = json.loads((book_dir / "report.json").read_text())
    assert [(g["chapter"], g["segment"], g["status"]) for g in report["gaps"]] == [(0, 0, "failed")]
    assert report["gaps"][0]["seconds"] == pytest.approx(estimate_seconds(TEXTS[0]), abs=1e-3)
    files = sorted(book_dir.glob("0*.flac"))
    assert len(files) == 2
    # The gap is silence of the expected duration: chapter 1 is at least that long plus segment 2.
    ch1 = sf.info(str(files[0])).frames / sf.info(str(files[0])).samplerate
    assert ch1 >= estimate_seconds(TEXTS[0]) + 0.5 * estimate_seconds(TEXTS[1])


def test_a_replan_keeps_a_failure_only_under_the_same_attempt_budget(tmp_path):
    """A segment the guard failed after 3 attempts stays failed when the book is planned again with 3
    attempts, and becomes pending with more (`--guard-attempts 5`): the plan honours the render's guard."""
    book = Book(BookMeta(title="测试"), (Chapter(0, "第一章", (TEXTS[0],)),))
    segs = [Segment(0, 0, TEXTS[0], TEXTS[0], "chapter")]
    first = plan_rows(book, segs, "spk" * 30, StubEngine.version, tmp_path)[0]
    failed = {**first, "status": "failed", "error": "guard: truncated", "attempts": 3}
    previous = {failed["content_key"]: failed}
    again = plan_rows(book, segs, "spk" * 30, StubEngine.version, tmp_path, previous)[0]
    assert again["status"] == "failed" and again["attempts"] == 3
    more = plan_rows(book, segs, "spk" * 30, StubEngine.version, tmp_path, previous,
                     max_attempts=5)[0]
    assert more["status"] == "pending" and more["attempts"] == 0
