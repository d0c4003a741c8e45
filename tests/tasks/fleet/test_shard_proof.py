"""A sharded render with proof: before it splits the book the parent freezes each voice's drift reference
(tasks.synthesize.render.render_references), so every shard judges against that one reference — the kept takes,
their verdicts, similarities and qa.json are the same for 2 shards as for 3, and no shard writes qa.json (a passing
take's transcript and cer are what its packed Whisper window heard: its neighbours differ by shard).  The speech
stand-in (tests/speech_engine.py) and the real checks (Whisper base, resemblyzer), as
tests/tasks/synthesize/test_proof.py."""
from __future__ import annotations

import pytest

import manifests
from tasks.bookdir import QA_JSON
from tasks.fleet import shards
from tasks.qa.checker import Checker
from tasks.qa.options import QAOptions
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.proof import reference_keys
from tasks.synthesize.render import render_references, synthesize_book
from tests.conftest import corpus_path, unavailable
from tests.speech_engine import SpeechEngine, corpus_clips
from tests.tasks.synthesize.test_proof import OTHER_READER, SAME_READER, make

REFERENCE_TAKES = 3                      # the corpus has three sentences of one reader


@pytest.fixture(scope="module")
def checker():
    try:
        c = Checker(QAOptions(mode="full", reference_takes=REFERENCE_TAKES))
        c.load()
    except Exception as e:  # noqa: BLE001 — the qa extra or its model: installed by scripts/setup.sh test
        unavailable(f"the QA checks cannot load here: {e}")
    return c


@pytest.fixture(scope="module")
def book():
    """(texts in reading order, the script): one reader's three sentences, then copies of them (another string:
    punctuation, which the comparison drops), one with another sentence's clip as its first take, and another
    reader's sentence, flagged by the drift gate on every take."""
    clips = corpus_clips(corpus_path("speech"))
    a, b, c = (clips[n] for n in SAME_READER)
    o = clips[OTHER_READER]
    texts = [a.text, b.text, c.text, a.text + "。", o.text, b.text + "。", c.text + "。", a.text + "！",
             b.text + "！"]
    script = {t: [clip] for t, clip in zip(texts, [a, b, c, a, o, b, c, a, b])}
    script[b.text + "。"] = [c, b]                                     # another sentence first: the ASR re-takes it
    return texts, script


def sharded(tmp_path, n: int, book, checker):
    """A sharded render's synthesis as flows/shards.py runs it, the shards one after another in this process."""
    texts, script = book
    (tmp_path / f"n{n}").mkdir()
    book_dir = make(tmp_path / f"n{n}", texts)
    engine, guard = SpeechEngine(script), GuardOptions()
    first = reference_keys(book_dir, manifests.load(book_dir).to_pylist(), checker.opts, guard.max_attempts)
    rendered = render_references(book_dir, engine, guard=guard, qa=checker.opts, checker=checker)
    frozen = (book_dir / QA_JSON).read_bytes()
    plan = shards.start(book_dir, n, guard)
    for i in range(n):
        synthesize_book(book_dir, engine, guard=guard, shard=plan.shard(i), qa=checker.opts, checker=checker)
        assert (book_dir / QA_JSON).read_bytes() == frozen, f"shard {i} of {n} wrote qa.json"
    shards.gather(book_dir, plan, guard)
    rows = {r["text"]: r for r in manifests.load(book_dir).to_pylist()}
    return first, rendered, frozen, rows


@pytest.mark.slow      # three proofed renders; shards' references in CI: the tests below
def test_the_shards_judge_against_the_parents_reference_whatever_the_split(tmp_path, book, checker):
    texts, _ = book
    first, rendered, frozen2, rows2 = sharded(tmp_path, 2, book, checker)
    by_key = {r["content_key"]: t for t, r in rows2.items()}
    assert sorted(by_key[k] for k in first) == sorted(texts[:REFERENCE_TAKES])   # the voice's first rows
    assert rendered == REFERENCE_TAKES
    _, _, frozen3, rows3 = sharded(tmp_path, 3, book, checker)
    assert frozen3 == frozen2
    def kept(rows):
        return {t: (r["take"], r["qa"], r["similarity"]) for t, r in rows.items()}

    assert kept(rows3) == kept(rows2)
    assert all(r["cer"] <= QAOptions().max_cer for rows in (rows2, rows3) for r in rows.values() if r["qa"] == "pass")
    assert all(r["status"] == "done" for r in rows2.values())
    assert rows2[texts[5]]["take"] == 2 and rows2[texts[5]]["qa"] == "pass"      # re-taken in its shard
    assert rows2[texts[4]]["qa"] == "flag" and "drift" in rows2[texts[4]]["qa_checks"]   # the other reader
    assert all(rows2[t]["qa"] == "pass" for t in texts if t not in (texts[4],))


def test_nothing_to_freeze_with_proof_off_or_a_reference_there(tmp_path, book, checker):
    texts, script = book
    book_dir = make(tmp_path, texts)
    engine = SpeechEngine(script)
    assert render_references(book_dir, engine, qa=QAOptions(mode="off")) == 0 and engine.calls == []
    rows = manifests.load(book_dir).to_pylist()
    assert len(reference_keys(book_dir, rows, checker.opts, 3)) == REFERENCE_TAKES
    assert reference_keys(book_dir, rows, checker.opts, 3, skip={r["content_key"] for r in rows}) == set()
