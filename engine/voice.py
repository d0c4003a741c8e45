"""Voices: a user's voice spec, parsed, then resolved into a *voice string* (engine/voicestring.py: a spk_emb
string or a prompt voice, what a book stores and a Request carries) and checked against the model.

A user's voice goes through two steps, the one parser of the project:

    spec = parse_voice_spec("seed:1234")        # at the edge (CLI, flow parameters): form only, no model
    voice = resolve_voice(spec, model)          # once the model is loaded: sample, encode, or check the size

Specs: `seed:N`; `clip:PATH` (a 3-30 s recording and its transcript, engine/clip.py); a saved voice's NAME
(`~/.config/chattts-render/voices/NAME.voice`, or $CHATTTS_RENDER_VOICES: its first line the voice, then optionally
`speed=N`, the voice's own pace); a file holding a voice string; a voice string itself.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.clip import clip_voice, read_clip
from engine.voicestring import Voice, VoiceError, decode_prompt, decode_spk_emb, decode_voice, encode_spk_emb

SEED_PREFIX = "seed:"                     # case-insensitive: "seed:7", "SEED: 7"
MAX_SEED = 2**63 - 1
# A spec that names a file: it holds a path separator, starts with "~" or ends in a file suffix.  A spk_emb
# string is base16384 text (CJK-range characters), so it never looks like this.
_PATH_LIKE = re.compile(r"[/\\]|^~|\.[A-Za-z0-9]{1,8}$")
CLIP_PREFIX = "clip:"                     # case-insensitive: "clip:reading.m4a"
# A saved voice's name: ASCII, no dot or separator, so it is never a path, a seed or a spk_emb string.
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
VOICES_ENV = "CHATTTS_RENDER_VOICES"
VOICES_DIR = Path("~/.config/chattts-render/voices")   # saved voices: NAME.voice (+ a clip and its transcript)
VOICE_SUFFIX = ".voice"
SPEED_KEY = "speed"                       # a saved voice's optional second line: speed=N


@dataclass(frozen=True)
class VoiceSpec:
    """A user's voice, checked for form: a seed to sample a voice with, a voice string (typed, or read from a
    file), or a recording with its transcript.  `source` is what the user wrote, for messages; `name` the saved
    voice it came from."""
    source: str
    seed: int | None = None
    spk_emb: str | None = None        # a voice string: a spk_emb string or a prompt voice (Voice.to_string)
    clip: str | None = None           # a recording (any format ffmpeg decodes), checked (engine/clip.py)
    clip_text: str | None = None      # the recording's transcript
    name: str | None = None
    speed: int | None = None          # the voice's own pace, ChatTTS's [speed_N] (a saved voice's, a cast part's)


def voices_dir() -> Path:
    """Where saved voices live: $CHATTTS_RENDER_VOICES, else ~/.config/chattts-render/voices."""
    return Path(os.environ.get(VOICES_ENV) or VOICES_DIR).expanduser()


def parse_voice_spec(spec: str, clip_text: str | None = None) -> VoiceSpec:
    """The one parser of voice specs (no model needed):

    - "seed:1234"           a voice sampled with sample_voice(model, 1234); the seed is in 0..2**63-1
    - "clip:PATH"           a 3-30 s recording in any format ffmpeg decodes; its transcript is `clip_text` or
                            the file PATH.txt; decoded and checked here (engine/clip.py), encoded by resolve_voice
    - "NAME"                a saved voice (voices_dir()/NAME.voice; ASCII letters, digits, "-", "_")
    - "{...}"               a prompt voice string (as a book's manifest stores a clip or anchored voice)
    - "path/to/voice.txt"   a UTF-8 text file holding one voice string (surrounding whitespace ignored);
                            any spec with a path separator, a leading "~" or a file suffix is a path
    - anything else         a spk_emb string itself

    A spk_emb string must decode to finite float16 values.  Raises VoiceError with one line otherwise."""
    out = _parse(spec, clip_text, saved=None)
    if clip_text is not None and out.clip is None:
        raise VoiceError(f"voice {out.source[:40]!r}: a transcript is for a clip voice (clip:PATH) only")
    return out


def _parse(spec: str, clip_text: str | None, saved: Path | None) -> VoiceSpec:
    """parse_voice_spec; `saved`: the folder of the saved voice whose file holds `spec` (relative clip paths
    are in it, and a saved voice cannot name another)."""
    s = (spec or "").strip()
    if not s:
        raise VoiceError("empty voice: use seed:<n>, clip:<recording>, a saved voice's name, a spk_emb string, "
                         "or a file holding one")
    if s.lower().startswith(CLIP_PREFIX):
        return _parse_clip(s, clip_text, saved)
    if s.startswith("{"):
        decode_voice(s, where=f"voice {s[:40]!r}")
        return VoiceSpec(s, spk_emb=s)
    if NAME_RE.match(s):
        if saved is not None:
            raise VoiceError(f"{saved}: a saved voice must hold a voice, not the name {s!r}")
        return _parse_saved(s, clip_text)
    if s.lower().startswith(SEED_PREFIX):
        num = s[len(SEED_PREFIX):].strip()
        try:
            seed = int(num)
        except ValueError:
            raise VoiceError(f"voice {s!r}: the seed must be an integer") from None
        if not 0 <= seed <= MAX_SEED:
            raise VoiceError(f"voice {s!r}: the seed must be in 0..2**63-1")
        return VoiceSpec(s, seed=seed)
    if _PATH_LIKE.search(s):
        p = Path(s).expanduser()
        try:
            text = p.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise VoiceError(f"{p}: no such voice file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise VoiceError(f"{p}: cannot read voice file ({type(e).__name__})") from None
        if not text:
            raise VoiceError(f"{p}: voice file is empty")
        decode_voice(text, where=str(p))
        return VoiceSpec(s, spk_emb=text)
    decode_spk_emb(s)
    return VoiceSpec(s, spk_emb=s)


def _parse_clip(s: str, clip_text: str | None, saved: Path | None) -> VoiceSpec:
    raw = s[len(CLIP_PREFIX):].strip()
    if not raw:
        raise VoiceError(f"voice {s!r}: clip: needs a recording's path")
    path = (saved or Path()) / Path(raw).expanduser()
    if not path.is_file():
        raise VoiceError(f"{path}: no such recording" if not path.exists() else f"{path}: not a file")
    text = clip_text
    if text is None:
        side = path.with_name(path.name + ".txt")
        try:
            text = side.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise VoiceError(f"{path}: no transcript (put it in {side.name} beside the recording, "
                             "or pass --clip-text)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise VoiceError(f"{side}: cannot read the transcript ({type(e).__name__})") from None
    text = " ".join(text.split())
    if not text:
        raise VoiceError(f"{path}: the transcript is empty")
    read_clip(path)                                      # VoiceError: unreadable, silent, too short or long
    return VoiceSpec(s, clip=str(path), clip_text=text)


def saved_voice_file(name: str) -> Path:
    return voices_dir() / f"{name}{VOICE_SUFFIX}"


def _parse_saved(name: str, clip_text: str | None) -> VoiceSpec:
    f = saved_voice_file(name)
    try:
        text = f.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise VoiceError(f"no saved voice named {name!r} in {voices_dir()} (`chattts-render voices list` "
                         "shows them)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise VoiceError(f"{f}: cannot read the saved voice ({type(e).__name__})") from None
    voice, *settings = text.splitlines() or [""]
    speed = None
    for n, line in enumerate(settings, 2):
        key, eq, value = line.strip().partition("=")
        if not line.strip():
            continue
        if key.strip() != SPEED_KEY or not eq or not value.strip().isdigit() or int(value) > 9:
            raise VoiceError(f"{f}: line {n}: expected {SPEED_KEY}=0..9 (the voice's own pace), not {line.strip()!r}")
        speed = int(value)
    return replace(_parse(voice.strip(), clip_text, saved=f.parent), source=name, name=name, speed=speed)


def resolve_voice(spec: VoiceSpec, model: Any) -> str:
    """The voice string of a parsed spec for this model: sampled from the seed, a recording encoded with the
    model's DVAE (engine/clip.py), or the given string once its sizes fit the model (VoiceError otherwise).
    `model`: a LoadedModel or a loaded Chat."""
    if spec.seed is not None:
        return sample_voice(model, spec.seed)
    if spec.clip is not None:
        return clip_voice(model, Path(spec.clip), spec.clip_text or "")
    text = spec.spk_emb or ""
    check_voice(decode_voice(text, where=spec.source[:40]), model, where=spec.source[:40])
    return text


def check_voice(voice: Voice, model: Any, where: str = "voice") -> None:
    """VoiceError when a decoded voice does not fit the model: the speaker vector's size, the sample's
    codebooks and code range."""
    if voice.spk_emb is not None:
        speaker_vector(voice.spk_emb, model, where=where)
    if voice.spk_smp is not None:
        codes = decode_prompt(voice.spk_smp, where=where)
        gpt = model.config.gpt
        if codes.shape[0] != gpt.num_vq or int(codes.max()) >= gpt.num_audio_tokens - 1:
            raise VoiceError(f"{where}: the sample prompt's codes ({codes.shape[0]} codebooks, max "
                             f"{int(codes.max())}) do not fit this model ({gpt.num_vq} codebooks of "
                             f"{gpt.num_audio_tokens - 1} codes)")


def speaker_vector(spk_emb: str, model: Any, where: str = "voice"):
    """The float16 speaker vector of a spk_emb string (numpy, (hidden,)), checked against the model's hidden size
    (VoiceError otherwise)."""
    dim = int(_speaker(model).dim)
    vec = decode_spk_emb(spk_emb, where=where)
    if vec.shape != (dim,):
        raise VoiceError(f"{where}: speaker embedding has {vec.size} values, this model needs {dim}")
    return vec


def _speaker(model: Any):
    """The ChatTTS Speaker of a LoadedModel or a loaded ChatTTS.Chat."""
    spk = getattr(model, "speaker", None)
    if spk is None:
        raise TypeError("expected a loaded ChatTTS Chat or engine.loader.LoadedModel")
    return spk


def sample_voice(model: Any, seed: int) -> str:
    """A spk_emb string drawn from the model's speaker statistics: mean + std * N(0, 1) with a local CPU
    torch.Generator seeded by `seed`.  The same seed gives the same string on CPU and GPU; the global RNG is
    untouched.  `model`: a LoadedModel or a loaded ChatTTS.Chat."""
    import torch

    spk = _speaker(model)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    z = torch.randn(int(spk.dim), generator=gen, dtype=torch.float32)            # (hidden,)
    vec = z * spk.std.detach().float().cpu() + spk.mean.detach().float().cpu()   # (hidden,)
    return encode_spk_emb(vec)
