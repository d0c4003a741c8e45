"""A cast (`--cast FILE`): a voice for the narrator, one for quoted speech, one per named character.

    narrator = "seed:2222"          # optional: else --voice, the book's stored voice, seed:2222
    dialogue = "seed:4099"          # optional: quoted speech whose speaker has no voice here (default: the
                                    # narrator's voice)
    [characters]                    # optional: the names as the book writes them, Traditional or Simplified
    "寶玉" = "seed:1234"             # (宝玉 matches 寶玉), quoted (TOML keys outside A-Z 0-9 _ - are);
    "黛玉" = "voices/daiyu.txt"      # any voice spec engine/voice.parse_voice_spec takes
    "王熙鳳" = { voice = "seed:77", speed = 7 }   # a part's own pace: ChatTTS's [speed_N], 0..9

A part's `speed` (or its saved voice's) is the pace of its segments, whatever --speed says (a direction file's
line overrides it: tasks/plan/direction.py).

With a cast, quoted speech becomes its own segments with role "dialogue" and the speaker the text names
(tasks/text/quotes.py); each segment is rendered in its role's or character's voice.  The voices are checked
for form when the file is read (parse_voice_spec, no model) and resolved with the model when the book is
planned (resolve_voice).  `chattts-render inspect BOOK --cast FILE` shows the cast: per role and character the
voice, segments, characters and share, and the speaker names the text gives, so a cast file can be written.
"""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.voice import VoiceError, VoiceSpec, parse_voice_spec
from tasks.book import ROLE_DIALOGUE, ROLE_NARRATOR
from tasks.errors import BookError
from tasks.text.quotes import fold, speaker_counts

CAST_KEYS = ("narrator", "dialogue", "characters")
MAX_NAME_CHARS = 16                  # characters in a character's name


@dataclass(frozen=True)
class Cast:
    """A cast file, its voices checked for form.  `characters`: (name as written in the file, voice)."""
    path: str
    narrator: VoiceSpec | None = None
    dialogue: VoiceSpec | None = None
    characters: tuple[tuple[str, VoiceSpec], ...] = ()

    def __post_init__(self) -> None:
        """Raise ValueError naming the problem: every instance is valid, so no stage validates again."""
        seen: dict[str, str] = {}
        for name, _ in self.characters:
            if not name.strip() or len(name) > MAX_NAME_CHARS:
                raise ValueError(f"{self.path}: character name {name!r} must be 1-{MAX_NAME_CHARS} characters")
            if fold(name) in seen:
                raise ValueError(f"{self.path}: characters {seen[fold(name)]!r} and {name!r} are the same name")
            seen[fold(name)] = name

    def character(self, speaker: str) -> str | None:
        """The cast's name for a speaker the text names (Traditional and Simplified alike), or None."""
        key = fold(speaker)
        return next((name for name, _ in self.characters if speaker and fold(name) == key), None)

    def spec(self, part: str) -> VoiceSpec | None:
        """The voice the cast gives a part ("narrator", "dialogue", a character's name), None when it gives none."""
        if part == ROLE_NARRATOR:
            return self.narrator
        if part == ROLE_DIALOGUE:
            return self.dialogue
        return next((v for name, v in self.characters if name == part), None)

    def part(self, role: str, speaker: str) -> str:
        """Who voices a segment: "narrator", "dialogue", or a character's name from the cast."""
        if role == ROLE_NARRATOR:
            return ROLE_NARRATOR
        return self.character(speaker) or ROLE_DIALOGUE


def load_cast(path: str | Path) -> Cast:
    """Read a cast file; BookError naming the file and the problem (nothing is created)."""
    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BookError(str(p), "no such cast file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BookError(str(p), f"cannot read the cast file ({type(e).__name__})") from None
    except tomllib.TOMLDecodeError as e:
        raise BookError(str(p), f"not a TOML cast file ({e}; a name is quoted: \"寶玉\" = \"seed:1\")") from None
    unknown = sorted(set(data) - set(CAST_KEYS))
    if unknown:
        raise BookError(str(p), f"unknown key {unknown[0]!r} (a cast has {', '.join(CAST_KEYS)})")
    chars = data.get("characters", {})
    if not isinstance(chars, dict):
        raise BookError(str(p), "characters must be a table: [characters] name = \"voice\"")

    def spec(key: str, value: Any) -> VoiceSpec:
        speed = None
        if isinstance(value, dict):                   # { voice = "seed:1", speed = 6 }
            extra = sorted(set(value) - {"voice", "speed"})
            if extra or "voice" not in value:
                raise BookError(str(p), f"{key}: a part's table holds voice = \"...\" and an optional speed = 0..9"
                                        f"{f' (not {extra[0]!r})' if extra else ''}")
            value, speed = value["voice"], value.get("speed")
            if not (isinstance(speed, int) and not isinstance(speed, bool) and 0 <= speed <= 9) and speed is not None:
                raise BookError(str(p), f"{key}: speed {speed!r} must be 0..9 (ChatTTS's [speed_N])")
        if not isinstance(value, str):
            raise BookError(str(p), f"{key}: the voice must be a string such as \"seed:2222\"")
        try:
            out = parse_voice_spec(value)
        except VoiceError as e:
            raise BookError(str(p), f"{key}: {e}") from None
        return out if speed is None else replace(out, speed=speed)

    try:
        return Cast(str(p), narrator=spec("narrator", data["narrator"]) if "narrator" in data else None,
                    dialogue=spec("dialogue", data["dialogue"]) if "dialogue" in data else None,
                    characters=tuple((str(k), spec(f"characters.{k}", v)) for k, v in chars.items()))
    except ValueError as e:
        raise BookError(str(p), str(e).removeprefix(f"{p}: ")) from None


@dataclass(frozen=True)
class CastVoices:
    """The spk_emb string of every part of a cast, for one model."""
    cast: Cast
    narrator: str
    dialogue: str
    characters: dict[str, str]          # the cast's name -> spk_emb

    def voice_of(self, role: str, speaker: str) -> str:
        part = self.cast.part(role, speaker)
        return {ROLE_NARRATOR: self.narrator, ROLE_DIALOGUE: self.dialogue}.get(part) or self.characters[part]


def resolve_cast(cast: Cast, narrator: str, resolve_voice: Callable[[VoiceSpec], str]) -> CastVoices:
    """Each part's voice for this model (`resolve_voice`: the engine's); `narrator` is the narrator's spk_emb
    (the cast's own narrator, resolved by the caller like any book voice).  A part without a voice speaks
    in the narrator's."""

    def resolve(spec: VoiceSpec | None) -> str:
        return narrator if spec is None else resolve_voice(spec)

    return CastVoices(cast, narrator, resolve(cast.dialogue), {name: resolve(s) for name, s in cast.characters})


def cast_report(cast: Cast, parts: Sequence[dict], quotes: dict[int, list]) -> dict:
    """The cast of a book for `inspect --cast`: per part (narrator, dialogue, each character) its voice,
    segments, characters and share of the book; the speaker names found with their quote counts and the
    part that voices them; every quote {chapter, text, speaker}.  `parts`: tasks.text.inspect's per
    (role, speaker) tallies."""

    rows = {ROLE_NARRATOR: _part_row(ROLE_NARRATOR, cast.narrator), ROLE_DIALOGUE: _part_row(ROLE_DIALOGUE,
                                                                                             cast.dialogue)}
    for name, spec in cast.characters:
        rows[name] = _part_row(name, spec)
    for t in parts:
        row = rows[cast.part(t["role"], t["speaker"])]
        row["segments"] += t["segments"]
        row["characters"] += t["characters"]
    total = sum(r["characters"] for r in rows.values()) or 1
    for r in rows.values():
        r["share"] = round(r["characters"] / total, 4)
    return {"file": cast.path, "parts": list(rows.values()),
            "speakers": [{"name": n, "quotes": k, "part": cast.part(ROLE_DIALOGUE, n)}
                         for n, k in speaker_counts(quotes)],
            "quotes": [{"chapter": q.chapter, "text": q.text, "speaker": q.speaker or None}
                       for qs in quotes.values() for q in qs]}


def _part_row(part: str, spec: VoiceSpec | None) -> dict:
    voice = spec.source if spec else ("the book's voice" if part == ROLE_NARRATOR else "the narrator's")
    if spec is not None and spec.speed is not None:
        voice += f" (speed {spec.speed})"
    return {"part": part, "voice": voice, "segments": 0, "characters": 0}
