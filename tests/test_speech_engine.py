"""The speech stand-in (tests/speech_engine.py): the right clip per take, resampled, the same on every call; a book
of corpus sentences that become one segment each; a render through tasks.stages whose chapters hold the clips."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.api import Request
from engine.units import HOP, SAMPLE_RATE
from tasks.plan.rows import derive_seed
from tasks.synthesize.guard import reroll_seed
from tasks.voice.voices import voice_id
from tests.conftest import corpus_path
from tests.speech_engine import (
    TRUNCATE_SHARE,
    SpeechEngine,
    book_script,
    corpus_clips,
    noise,
    other_sentence,
    other_speaker,
    padded,
    sentences,
    tiled,
    truncated,
    write_corpus_book,
)

VOICE = "seed:2222"
S0764 = "zh_aishell1_S0764_W0121.wav"          # 16 kHz mono, 4.20 s
JFK = "en_whisper_jfk.flac"                      # 44.1 kHz stereo, 11.00 s


@pytest.fixture(scope="module")
def speech_dir() -> Path:
    return corpus_path("speech", "transcripts.tsv").parent


@pytest.fixture(scope="module")
def clips(speech_dir):
    return corpus_clips(speech_dir)


def request(engine: SpeechEngine, text: str, take: int, voice: str, key: str = "k") -> Request:
    seed = reroll_seed(derive_seed(text, voice_id(voice)), take)
    return Request(key=key, text=text, spk_emb=voice, seed=seed)


def test_clips_are_24khz_mono_resampled_from_the_recording(speech_dir, clips):
    import soundfile as sf

    info = sf.info(str(speech_dir / S0764))
    assert info.samplerate == 16_000
    c = clips[S0764]
    assert c.audio.dtype == np.float32 and c.audio.ndim == 1
    assert abs(len(c.audio) - info.frames * SAMPLE_RATE / 16_000) <= 1
    assert c.text == "甚至出现交易几乎停滞的情况" and c.speaker == "S0764"
    en = corpus_clips(speech_dir, "en")[JFK]                  # 44.1 kHz stereo -> 24 kHz mono
    info = sf.info(str(speech_dir / JFK))
    assert info.channels == 2 and en.audio.ndim == 1
    assert abs(len(en.audio) - info.frames * SAMPLE_RATE / info.samplerate) <= 1
    assert 0.01 < float(np.sqrt(np.mean(en.audio ** 2))) < 0.5


def test_each_take_gets_its_clip_the_last_past_the_script_deterministic(clips):
    right = clips[S0764]
    takes = [truncated(right), noise(right), right]
    text = "甚至出现交易几乎停滞的情况。"
    engine = SpeechEngine({text: takes})
    voice = engine.sample_voice(2222)
    reqs = [request(engine, text, k, voice, key=f"t{k}") for k in (1, 2, 3, 4, 9)]
    bogus = Request(key="bogus", text=text, spk_emb=voice, seed=12345)
    got = {r.key: r for r in engine.synthesize(reqs + [bogus])}
    want = {"t1": takes[0], "t2": takes[1], "t3": right, "t4": right, "t9": right, "bogus": right}
    for key, clip in want.items():
        audio = got[key].audio
        assert len(audio) == (2 * got[key].tokens - 1) * HOP >= len(clip.audio) > len(audio) - 2 * HOP
        np.testing.assert_array_equal(audio[:len(clip.audio)], clip.audio)
        assert not audio[len(clip.audio):].any()
    assert [(c[0], c[2], c[3]) for c in engine.calls] == [
        ("t1", 1, f"{S0764}[:45%]"), ("t2", 2, f"noise({S0764})"), ("t3", 3, S0764), ("t4", 4, S0764),
        ("t9", 9, S0764), ("bogus", None, S0764)]
    # stateless: a new engine (a resumed render) gives take 2 the same audio, alone or with others
    again = SpeechEngine({text: takes})
    np.testing.assert_array_equal(next(iter(again.synthesize([reqs[1]]))).audio, got["t2"].audio)
    # another voice is another seed: take 2 of voice A's seeds is no take of voice B
    other = again.sample_voice(7)
    assert SpeechEngine.take_of(Request("x", text, other, reqs[1].seed)) is None
    assert SpeechEngine.take_of(request(again, text, 2, other)) == 2


def test_results_come_shortest_first_and_unknown_text_is_refused_before_any(clips):
    a, b = clips[S0764], clips["zh_thchs30_test_1.wav"]          # 4.2 s, 8.75 s
    engine = SpeechEngine({"长。": b, "短。": a})
    voice = engine.sample_voice(1)
    out = [r.key for r in engine.synthesize([request(engine, "长。", 1, voice, "long"),
                                             request(engine, "短。", 1, voice, "short")])]
    assert out == ["short", "long"]
    it = engine.synthesize([request(engine, "短。", 1, voice, "ok"), request(engine, "没有。", 1, voice, "nope")])
    with pytest.raises(ValueError, match="request nope: the script has no clip for '没有。'"):
        next(it)


def test_script_helpers(clips):
    right = clips[S0764]
    t = truncated(right)
    assert len(t.audio) == int(len(right.audio) * TRUNCATE_SHARE) and t.text == right.text
    np.testing.assert_array_equal(t.audio, right.audio[:len(t.audio)])
    n = noise(right)
    assert len(n.audio) == len(right.audio) and n.text == "" and n.speaker == ""
    np.testing.assert_array_equal(n.audio, noise(right).audio)
    assert other_sentence(right, clips).text != right.text
    o = other_speaker(right, clips)
    assert o.speaker not in ("S0764", "") and not o.speaker.startswith("thchs?")
    assert other_speaker(clips["zh_thchs30_test_1.wav"], clips).speaker not in ("D4", "thchs?1")
    assert len(sentences(clips)) == len(clips) - 1            # the 0 dB-noise copy says D4_751's sentence again
    t = tiled(right, 2 * len(right.audio) + 5)
    np.testing.assert_array_equal(t.audio, np.concatenate([right.audio, right.audio, right.audio[:5]]))
    assert tiled(right, 7).audio.shape == (7,) and t.text == ""
    a, tokens = padded(np.ones(512 * 3, np.float32))
    assert tokens == 4 and len(a) == 7 * HOP and a[:1536].all() and not a[1536:].any()


def prepared(tmp_path, clips, monkeypatch, formats=("flac",), qa="off"):
    """The corpus book prepared through tasks.stages with the stand-in (QA off: the stand-in is no random model,
    so a render's default would hear it); (opts, book_dir, engine with its script)."""
    from flows.options import options_from_params
    from tasks import stages

    book = write_corpus_book(tmp_path / "speech.txt", clips)
    opts = options_from_params(str(book), out=str(tmp_path / "out"), voice=VOICE, formats=list(formats),
                              qa=qa)
    engine = SpeechEngine({})
    monkeypatch.setattr(stages, "get_engine", lambda o: engine)
    book_dir = stages.prepare(opts)
    engine.script = book_script(book_dir, clips)
    return opts, book_dir, engine


def test_the_book_makes_each_corpus_sentence_exactly_one_segment(tmp_path, clips, monkeypatch):
    import manifests

    _, book_dir, engine = prepared(tmp_path, clips, monkeypatch)
    rows = manifests.load(book_dir).to_pylist()
    pool = sentences(clips)
    assert len(rows) == len(pool) == 9
    assert sorted(c.name for c in engine.script.values()) == sorted(c.name for c in pool)   # one each, all of them
    assert len({r["chapter"] for r in rows}) == 2
    assert all(r["engine_version"] == engine.version and r["status"] == "pending" for r in rows)


def test_render_through_the_stages_packages_chapters_that_hold_the_clips(tmp_path, clips, monkeypatch):
    import soundfile as sf

    import manifests
    from tasks import stages
    from tasks.audio.assemble import AssembleOptions, expected_length, trimmed_length

    opts, book_dir, engine = prepared(tmp_path, clips, monkeypatch)
    counts = stages.synthesize(book_dir, opts)
    assert counts["rendered"] == 9 and counts["failed"] == 0
    assert sorted(c[2] for c in engine.calls) == [1] * 9                     # the first take of each
    stages.package(book_dir, opts.assemble, opts.package, opts.allow_gaps)
    rows = sorted(manifests.load(book_dir).to_pylist(), key=lambda r: (r["chapter"], r["segment"]))
    for r in rows:                                                           # stored: the clip, 24-bit FLAC
        clip = engine.script[r["text"]]
        stored, rate = sf.read(str(book_dir / r["audio_path"]), dtype="float32")
        assert rate == SAMPLE_RATE and len(stored) == len(padded(clip.audio)[0]) == r["samples"]
        np.testing.assert_allclose(stored[:len(clip.audio)], clip.audio, atol=2e-7)
    report = json.loads((book_dir / "report.json").read_text(encoding="utf-8"))
    aopts = AssembleOptions()
    for ch in report["chapters"]:
        segs = [r for r in rows if r["chapter"] == ch["index"]]
        flac = next(book_dir.glob(f"{ch['index'] + 1:03d} - *.flac"))
        audio, rate = sf.read(str(flac), dtype="float32")
        assert rate == SAMPLE_RATE
        lengths = [trimmed_length(padded(engine.script[r["text"]].audio)[0], aopts) for r in segs]
        speech_s = sum(lengths) / SAMPLE_RATE
        # the chapter is the clips (trimmed of silence) laid out with their pauses: the assembly's exact length
        assert abs(len(audio) - expected_length(lengths, [r["pause_after"] for r in segs], aopts)) <= 2 * 120
        assert len(audio) / SAMPLE_RATE > speech_s > 0.8 * sum(engine.script[r["text"]].seconds for r in segs)
        for r, (start_ms, end_ms), n in zip(segs, ch["cues_ms"], lengths):
            assert abs((end_ms - start_ms) * SAMPLE_RATE / 1000 - n) <= 2 * SAMPLE_RATE / 1000
            # its clip is there (the chapter's loudness gain and peak limiter change it a little), another is not
            assert _best_correlation(audio, start_ms, engine.script[r["text"]].audio, aopts) > 0.9, r["text"]
            other = other_sentence(engine.script[r["text"]], clips)
            assert _best_correlation(audio, start_ms, other.audio, aopts, n) < 0.3, r["text"]


def _best_correlation(chapter: np.ndarray, start_ms: int, clip: np.ndarray, aopts, length: int | None = None) -> float:
    """The clip's trimmed speech against the chapter where its cue starts (±5 ms): the best normalized
    correlation over that lag (fades at the edges are left out); `length`: at most that many samples of it."""
    from tasks.audio.assemble import trim_bounds

    s, e = trim_bounds(padded(clip)[0], SAMPLE_RATE, aopts)
    fade = aopts.crossfade_samples()
    e = min(e, s + length) if length else e
    ref = clip[s + fade:e - fade].astype(np.float64)                       # [L - 2N]
    assert len(ref) > SAMPLE_RATE
    at = int(round(start_ms * SAMPLE_RATE / 1000)) + fade
    best = 0.0
    for lag in range(-120, 121):
        x = chapter[at + lag:at + lag + len(ref)].astype(np.float64)
        if len(x) == len(ref):
            best = max(best, float(x @ ref / (np.linalg.norm(x) * np.linalg.norm(ref) + 1e-12)))
    return best
