"""The voice anchor (tasks/synthesize/anchor.py): the voice renders the reference passage once and every segment
is conditioned on it; deterministic; reused from the manifest; a voice that has a sample is left as it is."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("ChatTTS")

from engine.api import Request
from engine.clip import sample_prompt
from engine.voice import decode_voice, parse_voice_spec
from tasks.plan.rows import derive_seed
from tasks.synthesize.anchor import ANCHOR_TEXT, anchored
from tasks.voice.voices import book_voice, voice_id


def anchored_book_voice(spec, stored, engine) -> str:
    """What tasks.plan.prepare does with --voice-anchor: the book's voice, then the anchor."""
    return anchored(book_voice(spec, stored, engine), stored, engine)


def test_the_voice_anchor(engine, monkeypatch):
    """Anchoring renders the reference passage once, in the voice, and conditions on it; deterministic;
    reused from the manifest; a voice that has a sample is left as it is."""
    base = engine.sample_voice(5)
    a = anchored_book_voice(parse_voice_spec("seed:5"), None, engine)
    v = decode_voice(a)
    assert json.loads(a)["origin"] == "anchor" and v.spk_emb == base and v.txt_smp == ANCHOR_TEXT
    assert anchored_book_voice(parse_voice_spec("seed:5"), None, engine) == a        # deterministic
    want = next(engine.synthesize([Request("x", ANCHOR_TEXT, base, derive_seed(ANCHOR_TEXT, voice_id(base)))]))
    assert v.spk_smp == sample_prompt(engine.loaded, want.audio)        # the voice's own rendering, encoded

    def no_render(*a, **k):
        raise AssertionError("rendered again")

    monkeypatch.setattr("tasks.synthesize.anchor.render_guarded", no_render)
    assert anchored_book_voice(parse_voice_spec("seed:5"), a, engine) == a           # reused
    assert anchored_book_voice(None, a, engine) == a
    assert anchored_book_voice(parse_voice_spec(a), None, engine) == a               # has a sample already
    assert book_voice(parse_voice_spec("seed:5"), a, engine) == base                     # no anchor asked: plain
