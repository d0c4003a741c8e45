"""A book's voice: parsed at the edge, resolved once the model is loaded, optionally anchored; saved voices.

    spec = parse_voice("clip:me.m4a", segment=opts.segment)     # engine.voice.parse_voice_spec + the clip's
                                                                # transcript normalized like the book's text
    voice = book_voice(spec, stored, engine, anchor=True)       # the voice string the manifest stores
    save_voice("narrator", spec); saved_voices()                # ~/.config/chattts-render/voices/

**Anchor** (`--voice-anchor`): the voice renders ANCHOR_TEXT once (through the quality guard, with the seed
plan.derive_seed gives that text in that voice), ChatTTS's DVAE encodes the rendering, and every segment is
conditioned on it (`spk_smp` + `txt_smp`, as upstream's split-text infer conditions a long text on its first
part).  The anchored voice is a prompt voice string: stored in the manifest, so a rerun renders nothing again.
A voice that already has a sample (a clip, an anchored voice) is left as it is.

**Reuse**: a spec the stored voice was made from keeps the stored string — the same recording (by its bytes'
sha256) and transcript, or the same voice anchored — so a rerun with the same options neither encodes nor
renders again, even where the DVAE's arithmetic would differ (another machine, another thread count).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.voice import VoiceError, VoiceSpec, decode_voice, parse_voice_spec, resolve_voice

ANCHOR_TEXT = "这是全书朗读所用的声音。从第一章到最后一章，语气、音色和节奏都保持一致。"   # ~8 s, normalized
ANCHOR_ORIGIN = "anchor"
CLIP_FILE_INFIX = ".clip"             # a saved clip voice's recording: NAME.clip<suffix>, transcript beside it


def parse_voice(spec: str, clip_text: str | None = None, segment=None) -> VoiceSpec:
    """engine.voice.parse_voice_spec, then a clip's transcript normalized as the book's text is (`segment`:
    SegmentOptions — t2s, lexicon, numbers read aloud), since it is spoken in the same prompt."""
    from tasks.text.normalize import normalize
    from tasks.text.segment import SegmentOptions

    out = parse_voice_spec(spec, clip_text=clip_text)
    if out.clip is None:
        return out
    seg = segment or SegmentOptions()
    text = normalize(out.clip_text or "", t2s=seg.t2s, lexicon=seg.lexicon, tn=seg.tn).strip()
    if not text.strip("，。、 "):
        raise VoiceError(f"{out.clip}: the transcript has nothing to speak")
    return replace(out, clip_text=text)


def book_voice(spec: VoiceSpec | None, stored: str | None, engine, anchor: bool = False, guard=None) -> str:
    """The book's voice string: an explicit spec wins, else the stored voice, else DEFAULT_VOICE; anchored when
    asked.  A spec the stored voice was made from keeps the stored string (see the module docstring)."""
    from tasks.options import DEFAULT_VOICE

    if spec is None and stored:
        voice = stored
    else:
        spec = spec or parse_voice_spec(DEFAULT_VOICE)
        voice = _made_from(spec, stored) or resolve_voice(spec, engine.loaded)
    return anchored(voice, stored, engine, guard) if anchor else voice


def _made_from(spec: VoiceSpec, stored: str | None) -> str | None:
    """`stored` when it was encoded from this clip spec (same recording bytes, same transcript), else None."""
    from engine.clip import clip_origin

    if spec.clip is None or not stored:
        return None
    v = decode_voice(stored)
    same = v.spk_emb is None and v.txt_smp == spec.clip_text and v.origin == clip_origin(Path(spec.clip))
    return stored if same else None


def anchored(voice: str, stored: str | None, engine, guard=None) -> str:
    """`voice` conditioned on its own rendering of ANCHOR_TEXT (see the module docstring); `stored` when it
    already is that; a voice with a sample as it is."""
    from tasks.guard import GuardOptions
    from tasks.plan import derive_seed, voice_id
    from tasks.synthesize import render_guarded

    if decode_voice(voice).spk_smp is not None:
        return voice
    if stored:
        s = decode_voice(stored)
        if s.origin == ANCHOR_ORIGIN and s.spk_emb == voice and s.txt_smp == ANCHOR_TEXT:
            return stored
    item = {"anchor": (ANCHOR_TEXT, voice, derive_seed(ANCHOR_TEXT, voice_id(voice)))}
    # the guard's accepted rendering, or its last attempt when every attempt failed (the anchor is one sample)
    _key, audio, _reason, _attempt = next(render_guarded(engine, item, guard or GuardOptions()))
    return engine.anchor_voice(voice, audio, ANCHOR_TEXT)


# ------------------------------------------------------------------------------------------- saved voices

def save_voice(name: str, spec: VoiceSpec, force: bool = False) -> Path:
    """Keep `spec` as a saved voice NAME (voices_dir()/NAME.voice): a seed as `seed:N`, a voice string as is, a
    recording copied beside it (NAME.clip<suffix> and its transcript) so the voice outlives the original
    file.  VoiceError for a bad name, or an existing one without `force`.  Returns the .voice file."""
    from engine.atomic import write_bytes
    from engine.voice import NAME_RE, saved_voice_file, voices_dir

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
    write_bytes(dest, text.encode("utf-8") + b"\n")
    for p in old_clips:                                  # a replaced clip voice's recording
        p.unlink(missing_ok=True)
    return dest


def saved_voices() -> list[dict]:
    """Every saved voice, by name: {name, spec (what --voice NAME stands for, shortened), kind, problem}.
    A saved voice that no longer parses (its recording gone) is listed with the problem."""
    from engine.voice import VOICE_SUFFIX, NAME_RE, voices_dir
    from tasks.plan import voice_id

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
    from engine.voice import voices_dir

    if not entries:
        return f"no saved voices in {voices_dir()} (chattts-render voices save NAME --voice SPEC)"
    width = max(len(e["name"]) for e in entries)
    return "\n".join(f"{e['name']:<{width}}  {e['kind']:<8}  {e['problem'] or e['spec']}" for e in entries)
