"""Synthesize with proof (tasks/synthesize/proof.py) on real speech: the speech stand-in (tests/speech_engine.py)
returns corpus recordings for the book's sentences, take by take, and the real checks (faster-whisper base,
resemblyzer) hear them.

The book is one voice: three THCHS-30 sentences of one reader (similarity 0.92 between them, measured) and an
AISHELL-1 sentence of another reader.  Takes: a right clip passes; another sentence's clip and a truncated clip are
flagged by the ASR and re-taken, and the re-take (the right clip) is kept; the other reader is flagged by the drift
gate on every take and stays flagged with its best take kept."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

import manifests
from tasks.book import Book, BookMeta, Chapter, Segment
from tasks.bookdir import QA_JSON, check_relpath, take_relpath
from tasks.errors import QAUnavailable
from tasks.plan.rows import plan_rows
from tasks.qa.checker import Checker
from tasks.qa.options import QAOptions
from tasks.synthesize.render import synthesize_book
from tests.conftest import corpus_path, unavailable
from tests.speech_engine import SpeechEngine, corpus_clips, truncated

SAME_READER = ("zh_thchs30_test_1.wav", "zh_thchs30_test_2.wav", "zh_thchs30_test_3.wav")
OTHER_READER = "zh_aishell1_S0764_W0121.wav"
VOICE = "spk" * 30                       # the voice string of the rows (a stand-in needs no real speaker)


@pytest.fixture(scope="module")
def clips():
    return corpus_clips(corpus_path("speech"))


@pytest.fixture(scope="module")
def checker():
    try:
        c = Checker(QAOptions(mode="full", reference_takes=3))   # the corpus has 3 sentences of one reader
        c.load()
    except QAUnavailable as e:       # the qa extra or its model: installed by scripts/setup.sh test
        unavailable(f"the QA checks cannot load here: {e}")
    return c


def make(tmp_path, texts: list[str]) -> Path:
    segs = [Segment(0, i, t, t, "sentence") for i, t in enumerate(texts)]
    book = Book(BookMeta(title="proof"), (Chapter(0, "一", tuple(texts)),))
    book_dir = tmp_path / "book"
    book_dir.mkdir()
    manifests.commit(book_dir, plan_rows(book, segs, VOICE, SpeechEngine.version, book_dir))
    return book_dir


def requested(engine: SpeechEngine) -> list[tuple[str, int]]:
    return [(text, take) for _, text, take, _ in engine.calls]


def test_flagged_takes_are_retaken_until_they_pass_and_the_manifest_says_what_was_heard(tmp_path, checker, clips):
    a, b, c = (clips[n] for n in SAME_READER)
    o = clips[OTHER_READER]
    t1, t2, t3, other = a.text, b.text, c.text, o.text
    book_dir = make(tmp_path, [t1, t2, t3, other])
    script = {t1: [a], t2: [c, b],                         # another sentence, then the right one
              t3: [truncated(c), c],                        # truncated, then whole
              other: [o]}                                   # another reader, every take
    engine = SpeechEngine(script)
    counts = synthesize_book(book_dir, engine, qa=checker.opts, checker=checker)
    rows = {r["text"]: r for r in manifests.load(book_dir).to_pylist()}

    assert counts["rendered"] == 4 and counts["failed"] == 0
    assert rows[t1]["take"] == 1 and rows[t1]["qa"] == "pass" and rows[t1]["cer"] <= 0.4
    for t in (t2, t3):                           # flagged by what it said, re-taken, the right take kept
        takes = json.loads(rows[t]["takes"])
        assert [x["verdict"] for x in takes] == ["flag", "pass"], takes
        assert "asr" in takes[0]["reason"] or "guard" in takes[0]["reason"], takes[0]
        assert rows[t]["take"] == 2 and rows[t]["qa"] == "pass"
        assert rows[t]["audio_path"] == take_relpath(rows[t]["content_key"], 2)
        assert sf.info(str(book_dir / rows[t]["audio_path"])).frames == rows[t]["samples"]
    assert sorted(requested(engine)) == sorted([(t1, 1), (t2, 1), (t2, 2), (t3, 1), (t3, 2), (other, 1),
                                                (other, 2), (other, 3)])     # each take rendered once
    # the ASR's re-takes joined the engine's running pass; the drift gate's wait for the voice's reference, which
    # is frozen after a pass, so the other reader's takes 2 and 3 are a pass each
    passes = [[sorted(r) for r in rounds] for rounds in engine.passes]
    assert passes == [[sorted([(t1, 1), (t2, 1), (t3, 1), (other, 1)]), sorted([(t2, 2), (t3, 2)])],
                      [[(other, 2)]], [[(other, 3)]]], passes
    takes = json.loads(rows[other]["takes"])     # the other reader: the drift gate, every take, still flagged
    assert len(takes) == QAOptions().max_takes and all(x["verdict"] == "flag" for x in takes), takes
    assert all("drift" in x["checks"] and x["similarity"] < 0.7 for x in takes), takes
    assert rows[other]["qa"] == "flag" and rows[other]["similarity"] is not None
    assert rows[other]["transcript"] and rows[other]["cer"] <= 0.4       # it said the right words
    ref = json.loads((book_dir / QA_JSON).read_text())["voices"][rows[t1]["voice_id"]]
    assert ref["takes"] == 3 and ref["cutoff"] >= QAOptions().drift_floor
    # every take's audio and its record are on disk, beside each other
    for r in rows.values():
        for x in json.loads(r["takes"]):
            assert (book_dir / x["audio_path"]).is_file()
            assert (book_dir / check_relpath(r["content_key"], x["take"])).is_file()


def test_a_resumed_render_hears_no_take_twice_and_renders_none_again(tmp_path, checker, clips):
    """Killed after take 1 of every segment was written and heard (their records on disk, nothing committed), as
    the engine was given the first re-take: the resume renders only the re-takes and hears only them."""
    a, b, c = (clips[n] for n in SAME_READER)
    t1, t2, t3 = a.text, b.text, c.text
    book_dir = make(tmp_path, [t1, t2, t3])
    script = {t1: [a], t2: [c, b], t3: [c]}

    class Killed(Exception):
        pass

    class CountingChecker(Checker):
        def __init__(self, *args):
            super().__init__(*args)
            self.heard: list[str] = []

        def hear_many(self, takes):
            self.heard += [t.text for t in takes]
            return super().hear_many(takes)

    class KilledAtTheRetake(SpeechEngine):
        def clip_for(self, req):
            if self.take_of(req) > 1:
                raise Killed()
            return super().clip_for(req)

    first = CountingChecker(checker.opts, checker.transcriber, checker.encoder)
    with pytest.raises(Killed):
        synthesize_book(book_dir, KilledAtTheRetake(script), qa=checker.opts, checker=first)
    assert sorted(first.heard) == sorted([t1, t2, t3])
    assert all(r["status"] == "pending" for r in manifests.load(book_dir).to_pylist())

    again = CountingChecker(checker.opts, checker.transcriber, checker.encoder)
    engine2 = SpeechEngine(script)
    counts = synthesize_book(book_dir, engine2, qa=checker.opts, checker=again)
    assert counts["rendered"] == 3
    assert requested(engine2) == [(t2, 2)]                    # only the re-take renders
    assert again.heard == [t2]                                # and only it is heard
    rows = {r["text"]: r for r in manifests.load(book_dir).to_pylist()}
    assert rows[t2]["take"] == 2 and rows[t2]["qa"] == "pass" and rows[t1]["qa"] == "pass"


def test_suspect_mode_hears_only_the_odd_takes(tmp_path, checker, clips):
    """--qa suspect: the speaker embedding on every take, the ASR only where the duration is odd (a truncated
    clip) or the drift gate flags the voice (another reader); a take of the right length and voice is not
    transcribed — so another sentence of about the right length passes unheard: suspect's price."""
    from dataclasses import replace

    a, b, c = (clips[n] for n in SAME_READER)
    o = clips[OTHER_READER]
    t1, t2, t3, other = a.text, b.text, c.text, o.text
    book_dir = make(tmp_path, [t1, t2, t3, other])
    script = {t1: [a], t2: [c], t3: [truncated(c), c], other: [o]}     # t2: another sentence, about its length
    suspect = Checker(replace(checker.opts, mode="suspect"), checker.transcriber, checker.encoder)
    synthesize_book(book_dir, SpeechEngine(script), qa=suspect.opts, checker=suspect)
    rows = {r["text"]: r for r in manifests.load(book_dir).to_pylist()}
    for t in (t1, t2):                            # unheard by the ASR, judged by the drift gate
        (take,) = json.loads(rows[t]["takes"])
        assert "asr" not in take["checks"] and "drift" in take["checks"] and take["verdict"] == "pass", take
    first = json.loads(rows[t3]["takes"])[0]      # truncated: odd duration, transcribed, flagged, re-taken
    assert "asr" in first["checks"] and first["verdict"] == "flag" and rows[t3]["take"] == 2
    takes = json.loads(rows[other]["takes"])      # drifted: transcribed too (it says its text), still flagged
    assert all("asr" in x["checks"] and x["cer"] <= 0.4 and x["verdict"] == "flag" for x in takes), takes


class _Echo:
    """A stand-in transcriber: hears exactly what the clip of these samples says (no model)."""

    def __init__(self, said: dict[int, str], batch: int):
        self.said, self.batch = said, batch

    def transcribe_many(self, items, pack=False):
        from tasks.qa.asr import Transcript

        return [Transcript(self.said[len(a)], -0.1, 0.01, lang, packed=pack) for a, _, lang in items]

    def tail_speech(self, audio, sample_rate, transcript):
        return None


class _NoVoice:
    def embed(self, audio, sample_rate):
        from tasks.qa.speaker import Embedding

        return Embedding(None, 1.0)


def test_the_checker_thread_hears_takes_once_they_fill_a_window_and_the_rest_when_the_engine_waits(tmp_path, clips):
    """Full QA packs takes into Whisper's 30-s windows: the checker thread starts on its own (the engine still
    decoding) as soon as the takes waiting fill one window, and hears that window's takes in one call; the takes
    of a window not full yet are heard when the engine waits for them (idle).  The engine waits after yielding the
    first take that does not fit in the first window until the first call has begun, and that call is held until
    the engine has yielded every row: the calls are then exactly the first window's takes, and the rest."""
    import threading

    from engine.units import SAMPLE_RATE
    from tasks.qa.asr import pack_windows
    from tests.speech_engine import padded

    six = [c for c in clips.values() if "noise" not in c.name][:6]
    book_dir = make(tmp_path, [c.text for c in six])
    said = {len(padded(c.audio)[0]): c.text for c in six}
    assert len(said) == 6                                          # the clips' lengths tell them apart
    first_call, all_yielded = threading.Event(), threading.Event()
    calls: list[tuple[list[str], bool]] = []                       # (the takes heard, the engine done by then)
    yielded: list[tuple[str, float]] = []                          # (text, seconds) in the engine's order

    class Held(Checker):
        def hear_many(self, takes):
            calls.append(([t.text for t in takes], all_yielded.is_set()))
            if len(calls) == 1:
                first_call.set()
                assert all_yielded.wait(60), "the engine never finished"
            return super().hear_many(takes)

    class Paced(SpeechEngine):
        def synthesize(self, requests, progress=None, more=None):
            def asked(idle):                                       # every row of the pass was yielded
                all_yielded.set()
                return more(idle)

            for res in super().synthesize(requests, progress, asked):
                yielded.append((said[len(res.audio)], len(res.audio) / SAMPLE_RATE))
                yield res
                if len(pack_windows([d for _, d in yielded], ["zh"] * len(yielded))) == 2 and not first_call.is_set():
                    assert first_call.wait(60), "the full window was not heard"

    qa = QAOptions(mode="full", reference_takes=3)
    checker = Held(qa, transcriber=_Echo(said, batch=4), encoder=_NoVoice())
    counts = synthesize_book(book_dir, Paced({c.text: c for c in six}), qa=qa, checker=checker)
    assert counts["rendered"] == 6 and counts["retaken"] == 0
    k = len(pack_windows([d for _, d in yielded], ["zh"] * 6)[0])
    assert 1 < k < 6
    assert calls == [([t for t, _ in yielded[:k]], False), ([t for t, _ in yielded[k:]], True)]
    rows = manifests.load(book_dir).to_pylist()
    assert len(rows) == 6 and all(r["qa"] == "pass" and r["cer"] == 0 for r in rows)
    assert all((book_dir / check_relpath(r["content_key"], 1)).is_file() for r in rows)
