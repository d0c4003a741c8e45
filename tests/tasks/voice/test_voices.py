"""A book's voice (tasks/voice/voices.py): saved voices, the clip transcript normalized, the stored voice reused,
and the default path unchanged (the voice string of seed:2222 is the plain spk_emb string)."""
from __future__ import annotations

import pytest

from engine.voice import VoiceError, decode_voice, parse_voice_spec
from tasks.voice.voices import book_voice, format_saved, parse_voice, save_voice, saved_voices
from tests.engine.helpers import write_clip


@pytest.fixture
def saved(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATTTS_RENDER_VOICES", str(tmp_path / "saved"))
    return tmp_path / "saved"


def test_save_list_and_use_named_voices(saved, tmp_path, engine):
    from engine.voice import resolve_voice

    voice = engine.sample_voice(11)
    save_voice("narrator", parse_voice_spec("seed:7"))
    save_voice("Old_Man-2", parse_voice_spec(voice))
    clip = write_clip(tmp_path / "me.wav")
    save_voice("me", parse_voice_spec(f"clip:{clip}"))
    clip.unlink()                                              # the saved voice keeps its own copy
    clip.with_name("me.wav.txt").unlink()
    assert sorted(p.name for p in saved.iterdir()) == ["Old_Man-2.voice", "me.clip.wav", "me.clip.wav.txt",
                                                       "me.voice", "narrator.voice"]
    assert (saved / "me.voice").read_text() == "clip:me.clip.wav\n"
    assert parse_voice_spec("narrator").seed == 7 and parse_voice_spec("narrator").name == "narrator"
    assert resolve_voice(parse_voice_spec("Old_Man-2"), engine.loaded) == voice
    me = parse_voice_spec("me")
    assert me.clip == str(saved / "me.clip.wav") and me.clip_text == "春眠不觉晓，处处闻啼鸟。"
    assert decode_voice(resolve_voice(me, engine.loaded)).txt_smp == me.clip_text
    entries = {e["name"]: e for e in saved_voices()}
    assert [(n, e["kind"]) for n, e in entries.items()] == [("Old_Man-2", "spk_emb"), ("me", "clip"),
                                                            ("narrator", "seed")]
    assert entries["narrator"]["spec"] == "seed:7" and "me.clip.wav" in entries["me"]["spec"]
    listing = format_saved(list(entries.values()))
    assert listing.splitlines()[2].split() == ["narrator", "seed", "seed:7"]

    with pytest.raises(VoiceError, match="exists"):             # no silent overwrite ...
        save_voice("me", parse_voice_spec("seed:1"))
    save_voice("me", parse_voice_spec("seed:1"), force=True)    # ... unless asked; the old recording goes
    assert sorted(p.name for p in saved.glob("me*")) == ["me.voice"] and parse_voice_spec("me").seed == 1
    for bad in ("1abc", "a.b", "名字", "x" * 41, "a b"):
        with pytest.raises(VoiceError, match="voice name"):
            save_voice(bad, parse_voice_spec("seed:1"))
    with pytest.raises(VoiceError, match="no saved voice named 'nobody'"):
        parse_voice_spec("nobody")
    (saved / "loop.voice").write_text("narrator\n")
    with pytest.raises(VoiceError, match="must hold a voice, not the name"):
        parse_voice_spec("loop")


def test_a_saved_voice_whose_recording_is_gone_is_listed_with_the_problem(saved, tmp_path):
    save_voice("gone", parse_voice_spec(f"clip:{write_clip(tmp_path / 'g.wav')}"))
    (saved / "gone.clip.wav").unlink()
    [entry] = saved_voices()
    assert entry["kind"] == "unusable" and "no such recording" in entry["problem"]
    assert format_saved([]).startswith("no saved voices in ")


def test_the_transcript_is_normalized_like_the_book(tmp_path):
    clip = write_clip(tmp_path / "n.wav", text="2023年，他說：「好！」")
    assert parse_voice(f"clip:{clip}").clip_text == "二零二三年，他说，好。"
    assert parse_voice_spec(f"clip:{clip}").clip_text == "2023年，他說：「好！」"     # the engine's parser: as written
    with pytest.raises(VoiceError, match="nothing to speak"):
        parse_voice(f"clip:{clip}", clip_text="……")
    assert parse_voice("seed:3").seed == 3


def test_default_voice_is_the_plain_spk_emb_string(engine):
    """Without the new options a book's voice is what it always was: seed:2222's spk_emb string (content keys,
    audio and existing manifests unchanged)."""
    v = book_voice(None, None, engine)
    assert v == engine.sample_voice(2222) and not v.startswith("{")
    assert book_voice(None, v, engine) == v
    assert book_voice(parse_voice_spec("seed:5"), v, engine) == engine.sample_voice(5)


def test_a_stored_clip_voice_is_reused_not_encoded_again(engine, tmp_path, monkeypatch):
    clip = write_clip(tmp_path / "r.wav")
    spec = parse_voice(f"clip:{clip}")
    stored = book_voice(spec, None, engine)
    assert decode_voice(stored).origin.startswith("clip:")

    def no_encoding(*a, **k):
        raise AssertionError("encoded again")

    monkeypatch.setattr("engine.voice.clip_voice", no_encoding)   # where resolve_voice calls it
    assert book_voice(spec, stored, engine) == stored
    assert book_voice(None, stored, engine) == stored
    with pytest.raises(AssertionError, match="encoded again"):           # another transcript: a new voice
        book_voice(parse_voice(f"clip:{clip}", clip_text="别的话。"), stored, engine)


def test_a_saved_voice_keeps_its_own_pace(saved):
    """`voices save NAME --speed N`: a second line `speed=N`; the voice parses with it, and a voice file of one line
    (every voice saved before) has none; a bad second line is one error naming the file."""
    from dataclasses import replace

    save_voice("slow", replace(parse_voice_spec("seed:7"), speed=2))
    save_voice("plain", parse_voice_spec("seed:8"))
    assert (saved / "slow.voice").read_text() == "seed:7\nspeed=2\n"
    assert (parse_voice_spec("slow").seed, parse_voice_spec("slow").speed) == (7, 2)
    assert parse_voice_spec("plain").speed is None
    assert "slow   seed      seed:7  speed 2" in format_saved(saved_voices())
    with pytest.raises(VoiceError, match="--speed 12"):
        save_voice("fast", replace(parse_voice_spec("seed:7"), speed=12))
    (saved / "odd.voice").write_text("seed:9\nspeed=fast\n")
    with pytest.raises(VoiceError, match=r"odd.voice: line 2: expected speed=0..9"):
        parse_voice_spec("odd")
