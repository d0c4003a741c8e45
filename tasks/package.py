"""Packaging: chapter audio -> chapter files (flac/wav/mp3/opus/m4a), one M4B, subtitles and report.json.

Every output is written through a temp file in the same directory and `os.replace`d into place, and the bytes
depend only on the inputs (ffmpeg runs bit-exact with no varying metadata), so a killed-and-resumed render
packages byte-identical files.
"""
from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from engine.units import SAMPLE_RATE
from tasks.assemble import ChapterAudio
from tasks.book import BookError, BookMeta

FORMATS = ("flac", "wav", "mp3", "opus", "m4a")   # chapter-file formats; "m4b" is the whole book
MAX_NAME_BYTES = 200          # UTF-8 bytes per file name, prefix and extension included
FLAC_SUBTYPE = "PCM_24"       # FLAC/WAV sample format
WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"COM{i}" for i in range(1, 10)] + [f"LPT{i}" for i in range(1, 10)]
    + ["COM¹", "COM²", "COM³", "LPT¹", "LPT²", "LPT³"])
_FORBIDDEN = re.compile(r'[/\\:*?"<>|]')
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


@dataclass(frozen=True)
class PackageOptions:
    formats: tuple[str, ...] = ("flac",)   # chapter formats and/or "m4b"
    sample_rate: int = SAMPLE_RATE         # output rate; resampled with torchaudio when not 24 kHz

    def validate(self) -> "PackageOptions":
        """Raise ValueError naming the conflict."""
        bad = [f for f in self.formats if f not in FORMATS + ("m4b",)]
        if bad:
            raise ValueError(f"unknown format(s) {bad}; choose from {', '.join(FORMATS + ('m4b',))}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"format listed twice in {list(self.formats)}")
        if self.sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        return self


# ----------------------------------------------------------------------------------------------------------
# File names

def _cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within max_bytes of UTF-8, never ending in a joiner or combining mark."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    cut = text.encode("utf-8")[:max(0, max_bytes)].decode("utf-8", errors="ignore")
    while cut and (unicodedata.combining(cut[-1]) or cut[-1] in "\u200d\ufe0e\ufe0f"
                   or unicodedata.category(cut[-1]) == "Mn"):
        cut = cut[:-1]
    return cut


def safe_name(text: str, max_bytes: int = MAX_NAME_BYTES) -> str:
    """`text` made into a file-name stem valid on every common filesystem (may be empty).

    NFC; no control/bidi characters; `/ \\ : * ? " < > |` -> `_`; runs of dots -> `…` (no `..`);
    whitespace collapsed; no leading/trailing dots or spaces; Windows reserved names get a `_` suffix;
    at most max_bytes of UTF-8.
    """
    s = unicodedata.normalize("NFC", text)
    s = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in "\t\r\n" else c
                for c in s if c not in _BIDI)
    s = "".join(c for c in s if unicodedata.category(c) not in ("Cs", "Co", "Cn"))
    s = _FORBIDDEN.sub("_", s)
    s = re.sub(r"\.{2,}", "…", s)
    s = re.sub(r"\s+", " ", s).strip(" .")
    s = _cut_utf8(s, max_bytes).rstrip(" .")
    base, dot, rest = s.partition(".")
    if base.rstrip().upper() in WINDOWS_RESERVED:      # CON, con.txt, "COM1 " -> CON_, con_.txt, COM1_
        s = _cut_utf8(base.rstrip() + "_" + dot + rest, max_bytes).rstrip(" .")
    return s


def chapter_stem(chapter_index: int, n_chapters: int, title: str, ext: str = "flac") -> str:
    """`NNN - <safe title>` (1-based, zero-padded to the chapter count), within MAX_NAME_BYTES with `.ext`."""
    width = max(3, len(str(n_chapters)))
    prefix = f"{chapter_index + 1:0{width}d}"
    budget = MAX_NAME_BYTES - len(prefix) - len(" - ") - len(ext) - 1
    t = safe_name(title, budget)
    return f"{prefix} - {t}" if t else prefix


def inside(book_dir: Path, name: str) -> Path:
    """book_dir/name, asserting it resolves to a direct child of book_dir."""
    root = Path(book_dir).resolve()
    path = (root / name).resolve()
    if path.parent != root or name in ("", ".", ".."):
        raise BookError(str(book_dir), f"output name {name!r} would leave the book directory")
    return path


# ----------------------------------------------------------------------------------------------------------
# Atomic writes

@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temp path beside `final`; on success it replaces `final`, on error it is removed."""
    final = Path(final)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-", suffix=final.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_bytes(final: Path, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)


# ----------------------------------------------------------------------------------------------------------
# Chapter files

def _write_flac(path: Path, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta) -> None:
    import soundfile as sf
    from mutagen.flac import FLAC, Picture

    sf.write(str(path), audio, sr, format="FLAC", subtype=FLAC_SUBTYPE)
    f = FLAC(str(path))
    for k, v in tags.items():
        if v:
            f[k] = v
    if meta.cover:
        pic = Picture()
        pic.type = 3                                     # front cover
        pic.mime = meta.cover_mime or "image/jpeg"
        pic.desc = "Cover"
        pic.data = meta.cover
        f.add_picture(pic)
    f.save()


def _write_wav(path: Path, audio: np.ndarray, sr: int, tags: dict[str, str]) -> None:
    import soundfile as sf

    with sf.SoundFile(str(path), "w", sr, 1, format="WAV", subtype=FLAC_SUBTYPE) as f:
        for key, attr in (("TITLE", "title"), ("ALBUM", "album"), ("ARTIST", "artist"),
                          ("TRACKNUMBER", "tracknumber")):
            if tags.get(key):
                setattr(f, attr, tags[key])
        f.write(audio)


def chapter_tags(chapter_index: int, n_chapters: int, title: str, meta: BookMeta) -> dict[str, str]:
    return {
        "TITLE": title,
        "ALBUM": meta.title,
        "ARTIST": meta.author,
        "TRACKNUMBER": str(chapter_index + 1),
        "TRACKTOTAL": str(n_chapters),
        "LANGUAGE": meta.language,
    }


def write_chapter_files(book_dir: Path, chapter_index: int, n_chapters: int, title: str,
                        chapter: ChapterAudio, meta: BookMeta,
                        opts: PackageOptions = PackageOptions()) -> list[Path]:
    """Write `book_dir/NNN - <safe title>.<ext>` for every chapter format in opts.formats; their paths."""
    opts.validate()
    book_dir = Path(book_dir)
    book_dir.mkdir(parents=True, exist_ok=True)
    audio = np.asarray(chapter.audio, dtype=np.float32)
    sr = chapter.sample_rate
    tags = chapter_tags(chapter_index, n_chapters, title, meta)
    written: list[Path] = []
    for fmt in opts.formats:
        if fmt == "m4b":
            continue
        path = inside(book_dir, f"{chapter_stem(chapter_index, n_chapters, title, fmt)}.{fmt}")
        with atomic_path(path) as tmp:
            if fmt == "flac":
                _write_flac(tmp, audio, sr, tags, meta)
            elif fmt == "wav":
                _write_wav(tmp, audio, sr, tags)
            else:
                raise ValueError(f"format {fmt!r} is not implemented yet")
        written.append(path)
    return written
