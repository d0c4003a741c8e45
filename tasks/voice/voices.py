"""A book's voice: parsed at the edge, resolved once the model is loaded; saved voices.

    spec = parse_voice("clip:me.m4a", segment=opts.segment)     # engine.voice.parse_voice_spec + the clip's
                                                                # transcript normalized like the book's text
    voice = book_voice(spec, stored, engine)                    # the voice string the manifest stores
    save_voice("narrator", spec); saved_voices()                # ~/.config/chattts-render/voices/

Anchoring a voice (`--voice-anchor`) renders audio, so it belongs to the synthesize stage
(tasks/synthesize/anchor.py); this stage only parses, samples and encodes.

**Reuse**: a spec the stored voice was made from keeps the stored string — the same recording (by its bytes'
sha256) and transcript — so a rerun with the same options does not encode again, even where the DVAE's
arithmetic would differ (another machine, another thread count).
"""
from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from engine.api import Synthesizer
from engine.atomic import write_bytes
from engine.clip import clip_origin
from engine.voice import (
    NAME_RE,
    SPEED_KEY,
    VOICE_SUFFIX,
    VoiceError,
    VoiceSpec,
    decode_voice,
    parse_voice_spec,
    saved_voice_file,
    voices_dir,
)
from tasks.text.normalize import normalize
from tasks.text.segment import SegmentOptions

DEFAULT_VOICE = "seed:2222"           # a book without a stored voice gets this one
CLIP_FILE_INFIX = ".clip"             # a saved clip voice's recording: NAME.clip<suffix>, transcript beside it


def parse_voice(spec: str, clip_text: str | None = None, segment=None) -> VoiceSpec:
    """engine.voice.parse_voice_spec, then a clip's transcript normalized as the book's text is (`segment`:
    SegmentOptions — t2s, lexicon, numbers read aloud), since it is spoken in the same prompt."""

    out = parse_voice_spec(spec, clip_text=clip_text)
    if out.clip is None:
        return out
    seg = segment or SegmentOptions()
    text = normalize(out.clip_text or "", seg.normalize).strip()
    if not text.strip("，。、 "):
        raise VoiceError(f"{out.clip}: the transcript has nothing to speak")
    return replace(out, clip_text=text)


@lru_cache(maxsize=256)
def voice_id(spk_emb: str) -> str:
    """A voice string's short id (in content keys and seeds: tasks/plan/rows.py)."""
    return hashlib.sha256(spk_emb.encode()).hexdigest()[:16]


def book_voice(spec: VoiceSpec | None, stored: str | None, engine: Synthesizer) -> str:
    """The book's voice string: an explicit spec wins, else the stored voice, else DEFAULT_VOICE.  A spec the
    stored voice was made from keeps the stored string (see the module docstring).  An anchored stored voice is
    kept as it is when no spec is given."""
    if spec is None and stored:
        return stored
    spec = spec or parse_voice_spec(DEFAULT_VOICE)
    return _made_from(spec, stored) or engine.resolve_voice(spec)


def _made_from(spec: VoiceSpec, stored: str | None) -> str | None:
    """`stored` when it was encoded from this clip spec (same recording bytes, same transcript), else None."""

    if spec.clip is None or not stored:
        return None
    v = decode_voice(stored)
    same = v.spk_emb is None and v.txt_smp == spec.clip_text and v.origin == clip_origin(Path(spec.clip))
    return stored if same else None


# ------------------------------------------------------------------------------------------- saved voices

def save_voice(name: str, spec: VoiceSpec, force: bool = False) -> Path:
    """Keep `spec` as a saved voice NAME (voices_dir()/NAME.voice): a seed as `seed:N`, a voice string as is, a
    recording copied beside it (NAME.clip<suffix> and its transcript) so the voice outlives the original
    file; its `speed` (the voice's own pace) on a second line.  VoiceError for a bad name or speed, or an existing
    one without `force`.  Returns the .voice file."""
    if spec.speed is not None and not 0 <= spec.speed <= 9:
        raise VoiceError(f"--speed {spec.speed}: must be 0..9 (ChatTTS's [speed_N])")

    if not NAME_RE.match(name):
        raise VoiceError(f"voice name {name!r}: use up to 40 ASCII letters, digits, '-' and '_', starting with "
                         "a letter")
    dest = saved_voice_file(name)
    if dest.exists() and not force:
        raise VoiceError(f"{dest}: a saved voice named {name!r} exists (--force replaces it)")
    folder = voices_dir()
    folder.mkdir(parents=True, exist_ok=True)
    old_clips = set(folder.glob(f"{name}{CLIP_FILE_INFIX}*"))
    if spec.clip is not None:
        clip = folder / f"{name}{CLIP_FILE_INFIX}{Path(spec.clip).suffix.lower()}"
        write_bytes(clip, Path(spec.clip).read_bytes())
        write_bytes(clip.with_name(clip.name + ".txt"), (spec.clip_text or "").encode("utf-8") + b"\n")
        old_clips -= {clip, clip.with_name(clip.name + ".txt")}
        text = f"clip:{clip.name}"
    else:
        text = f"seed:{spec.seed}" if spec.seed is not None else spec.spk_emb or ""
    if spec.speed is not None:
        text += f"\n{SPEED_KEY}={spec.speed}"
    write_bytes(dest, text.encode("utf-8") + b"\n")
    for p in old_clips:                                  # a replaced clip voice's recording
        p.unlink(missing_ok=True)
    return dest


def saved_voices() -> list[dict]:
    """Every saved voice, by name: {name, spec (what --voice NAME stands for, shortened), kind, problem}.
    A saved voice that no longer parses (its recording gone) is listed with the problem."""

    out = []
    for f in sorted(voices_dir().glob(f"*{VOICE_SUFFIX}")):
        name = f.name[:-len(VOICE_SUFFIX)]
        if not NAME_RE.match(name):
            continue
        entry = {"name": name, "spec": "", "kind": "", "problem": ""}
        try:
            spec = parse_voice_spec(name)
        except VoiceError as e:
            entry.update(kind="unusable", problem=str(e))
        else:
            if spec.speed is not None:
                entry["speed"] = str(spec.speed)
            if spec.seed is not None:
                entry.update(kind="seed", spec=f"seed:{spec.seed}")
            elif spec.clip is not None:
                entry.update(kind="clip", spec=f"clip:{Path(spec.clip).name} “{spec.clip_text}”")
            else:
                kind = "sample" if decode_voice(spec.spk_emb or "").spk_smp else "spk_emb"
                entry.update(kind=kind, spec=f"voice {voice_id(spec.spk_emb or '')}")
        out.append(entry)
    return out


def format_saved(entries: list[dict]) -> str:
    """`chattts-render voices list`: one line per saved voice."""

    if not entries:
        return f"no saved voices in {voices_dir()} (chattts-render voices save NAME --voice SPEC)"
    width = max(len(e["name"]) for e in entries)
    return "\n".join(f"{e['name']:<{width}}  {e['kind']:<8}  {e['problem'] or e['spec']}"
                     f"{'  speed ' + e['speed'] if e.get('speed') else ''}" for e in entries)
