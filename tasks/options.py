"""RenderOptions: the one place a render's settings and their defaults live (CLI, flow and tests share it)."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from engine.api import EngineOptions

DEFAULT_OUT = Path("output")          # relative to the working directory
DEFAULT_VOICE = "seed:2222"           # a book without a stored voice gets this one
FORMATS = ("flac", "wav", "mp3", "opus", "m4a", "m4b")
SLUG_MAX_CHARS = 80


@dataclass(frozen=True)
class RenderOptions:
    book: Path
    out: Path = DEFAULT_OUT
    voice: str | None = None          # None: the voice stored in the manifest, else DEFAULT_VOICE
    formats: tuple[str, ...] = ("flac",)
    engine: EngineOptions = field(default_factory=EngineOptions)
    allow_gaps: bool = False          # assemble chapters even when some segments failed (silence instead)

    def validate(self) -> "RenderOptions":
        """Raise ValueError naming the conflict."""
        self.engine.validate()
        bad = [f for f in self.formats if f not in FORMATS]
        if bad:
            raise ValueError(f"unknown format {bad[0]!r}; choose from {', '.join(FORMATS)}")
        if not self.formats:
            raise ValueError("--format needs at least one format")
        if self.voice is not None:
            check_voice_spec(self.voice)
        return self

    @property
    def book_dir(self) -> Path:
        return self.out / book_slug(self.book)


def book_slug(path: Path) -> str:
    """OUT/<slug>: the book file's stem, made safe (letters of any script, digits, '-', '_', '.')."""
    stem = unicodedata.normalize("NFC", Path(path).stem)
    slug = re.sub(r"[^\w.-]+", "-", stem, flags=re.UNICODE).strip("-.") or "book"
    return slug[:SLUG_MAX_CHARS]


def check_voice_spec(spec: str) -> None:
    """`seed:N`, a file holding a speaker-embedding string, or such a string itself (ValueError otherwise)."""
    if spec.startswith("seed:"):
        if not spec[5:].lstrip("-").isdigit():
            raise ValueError(f"--voice {spec!r}: the seed must be an integer")
    elif len(spec) < 64 and not Path(spec).is_file():
        raise ValueError(f"--voice {spec!r}: not seed:N, an existing file, or a speaker-embedding string")
