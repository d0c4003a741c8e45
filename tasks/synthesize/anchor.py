"""The voice anchor (`--voice-anchor`): one stable narrator for the whole book.

    voice = anchored(voice, stored, engine, guard)     # a prompt voice string, stored in the manifest

The voice renders ANCHOR_TEXT once (through the quality guard, with the seed tasks.plan.rows.derive_seed gives
that text in that voice), ChatTTS's DVAE encodes the rendering, and every segment is conditioned on it
(`spk_smp` + `txt_smp`, as upstream's split-text infer conditions a long text on its first part).  The anchored
voice is stored in the manifest, so a rerun renders nothing again: a stored voice that is this voice anchored is
kept, even where the DVAE's arithmetic would differ (another machine, another thread count).  A voice that
already has a sample (a clip, an anchored voice) is left as it is.  It renders audio, so it is part of the
synthesize stage; tasks/stages.prepare passes it to the plan.
"""
from __future__ import annotations

from engine.api import Request, Synthesizer
from engine.voice import decode_voice
from tasks.plan.rows import derive_seed
from tasks.synthesize.options import GuardOptions
from tasks.synthesize.render import render_guarded
from tasks.voice.voices import voice_id

ANCHOR_TEXT = "这是全书朗读所用的声音。从第一章到最后一章，语气、音色和节奏都保持一致。"   # ~8 s, normalized
ANCHOR_ORIGIN = "anchor"


def anchored(voice: str, stored: str | None, engine: Synthesizer, guard: GuardOptions | None = None) -> str:
    """`voice` conditioned on its own rendering of ANCHOR_TEXT; `stored` when it already is that; a voice with
    a sample as it is."""
    if decode_voice(voice).spk_smp is not None:
        return voice
    if stored:
        s = decode_voice(stored)
        if s.origin == ANCHOR_ORIGIN and s.spk_emb == voice and s.txt_smp == ANCHOR_TEXT:
            return stored
    item = {"anchor": Request("anchor", ANCHOR_TEXT, voice, derive_seed(ANCHOR_TEXT, voice_id(voice)))}
    # the guard's accepted rendering, or its last attempt when every attempt failed (the anchor is one sample)
    _key, audio, _reason, _attempt = next(render_guarded(engine, item, guard or GuardOptions()))
    return engine.anchor_voice(voice, audio, ANCHOR_TEXT)
