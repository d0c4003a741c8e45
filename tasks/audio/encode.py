"""Encoders: audio -> one tagged file of one format.  FLAC/WAV through soundfile + mutagen; mp3/opus/m4a/m4b
through ffmpeg (bit-exact, float32 PCM on stdin, the cover and the M4B's FFMETADATA1 chapters as side inputs
beside the output).  The bytes depend only on the inputs.  Loudness decisions live in tasks.audio.verify."""
from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import scratch
from tasks.audio.ffmpeg import BITEXACT, ffmetadata_escape, pcm_input, run_ffmpeg
from tasks.book import BookMeta

LOSSLESS = ("flac", "wav")    # written by soundfile; every other format by ffmpeg
FLAC_SUBTYPE = "PCM_24"       # FLAC/WAV sample format
OPUS_RATES = frozenset([8_000, 12_000, 16_000, 24_000, 48_000])          # Hz libopus accepts; else 48 kHz
OPUS_FALLBACK_RATE = 48_000   # Hz, the rate opus audio is resampled to when its own is not in OPUS_RATES
CONTAINERS = {"mp3": "mp3", "opus": "ogg", "m4a": "mp4", "m4b": "mp4"}  # ffmpeg's -f per format
MEDIA_TYPES = {"flac": "audio/flac", "wav": "audio/wav", "mp3": "audio/mpeg", "opus": "audio/ogg",
               "m4a": "audio/mp4", "m4b": "audio/mp4"}   # each format's file as HTTP and RSS name it
ISO639_2 = {"zh": "chi", "en": "eng", "ja": "jpn", "ko": "kor", "fr": "fre", "de": "ger", "es": "spa",
            "ru": "rus", "it": "ita", "pt": "por"}


def iso639_2(language: str) -> str:
    return ISO639_2.get(language.split("-")[0].split("_")[0].lower(), "und")


def cover_kind(meta: BookMeta) -> str | None:
    """'jpeg' or 'png' when meta.cover is one of those images (by magic bytes), else None."""
    c = meta.cover or b""
    if c.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if c.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    return None


def resample(audio: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """torchaudio's band-limited sinc resampler (never ffmpeg's default); identity when the rates match."""
    if sr_in == sr_out:
        return np.asarray(audio, dtype=np.float32)
    import torch
    import torchaudio.functional as AF

    x = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))[None]     # (1, samples)
    y = AF.resample(x, sr_in, sr_out)                                            # (1, samples * out/in)
    return y[0].numpy().astype(np.float32, copy=False)


def tag_text(value: str) -> str:
    """A tag value every container and ffmpeg's argv accept: NFC, control characters dropped, one line."""
    v = unicodedata.normalize("NFC", value)
    v = "".join(" " if c in "\t\r\n\u2028\u2029" else c for c in v
                if not (unicodedata.category(c) in ("Cc", "Cs") and c not in "\t\r\n"))
    return re.sub(r" {2,}", " ", v).strip()


def chapter_tags(chapter_index: int, n_chapters: int, title: str, meta: BookMeta) -> dict[str, str]:
    return {
        "TITLE": tag_text(title),
        "ALBUM": tag_text(meta.title),
        "ARTIST": tag_text(meta.author),
        "TRACKNUMBER": str(chapter_index + 1),
        "TRACKTOTAL": str(n_chapters),
        "LANGUAGE": meta.language,
    }


# ----------------------------------------------------------------------------------------------------------
# Lossless: soundfile writes the samples, mutagen the tags

def _picture(meta: BookMeta):
    from mutagen.flac import Picture

    pic = Picture()
    pic.type = 3                                         # front cover
    pic.mime = meta.cover_mime or ("image/png" if cover_kind(meta) == "png" else "image/jpeg")
    pic.desc = "Cover"
    pic.data = meta.cover or b""
    return pic


def _write_flac(path: Path, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta) -> None:
    import soundfile as sf
    from mutagen.flac import FLAC

    sf.write(str(path), audio, sr, format="FLAC", subtype=FLAC_SUBTYPE)
    _vorbis_comments(FLAC(str(path)), tags, meta, lambda f, pic: f.add_picture(pic))


def _vorbis_comments(f, tags: dict[str, str], meta: BookMeta, add_cover: Callable[[Any, Any], None]) -> None:
    """A FLAC's or an Opus file's Vorbis comments (mutagen's file `f`): every tag with a value, the cover as the
    container carries it (`add_cover(f, picture)`); saved."""
    for k, v in tags.items():
        if v:
            f[k] = v
    if meta.cover:
        add_cover(f, _picture(meta))
    f.save()


def _write_wav(path: Path, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta) -> None:
    import soundfile as sf

    with sf.SoundFile(str(path), "w", sr, 1, format="WAV", subtype=FLAC_SUBTYPE) as f:
        for key, attr in (("TITLE", "title"), ("ALBUM", "album"), ("ARTIST", "artist"),
                          ("TRACKNUMBER", "tracknumber")):
            if tags.get(key):
                setattr(f, attr, tags[key])
        f.write(audio)


def write_lossless(path: Path, fmt: str, audio: np.ndarray, sr: int, tags: dict[str, str],
                   meta: BookMeta) -> None:
    """`audio` (samples,) as a tagged FLAC (with the cover) or WAV (INFO tags) at `path`."""
    (_write_flac if fmt == "flac" else _write_wav)(path, audio, sr, tags, meta)


# ----------------------------------------------------------------------------------------------------------
# Lossy: ffmpeg

def ffmetadata(tags: dict[str, str], chapters: Sequence[tuple[int, int, str]], sr: int) -> str:
    """An FFMETADATA1 file: the book's tags and one [CHAPTER] per (start_sample, end_sample, title) at `sr`."""
    lines = [";FFMETADATA1"]
    for key, value in (("title", tags["TITLE"]), ("album", tags["ALBUM"]), ("artist", tags["ARTIST"]),
                       ("album_artist", tags["ARTIST"]), ("genre", "Audiobook")):
        if value:
            lines.append(f"{key}={ffmetadata_escape(value)}")
    for start, end, title in chapters:
        lines += ["[CHAPTER]", f"TIMEBASE=1/{sr}", f"START={start}", f"END={end}",
                  f"title={ffmetadata_escape(tag_text(title))}"]
    return "\n".join(lines) + "\n"


def codec_args(fmt: str, kbps: int, tags: dict[str, str], meta: BookMeta) -> list[str]:
    """ffmpeg output arguments for `fmt`: codec and bitrate, container flags and (but for m4b, whose tags come
    from the FFMETADATA input, and opus, tagged by mutagen afterwards) the tags."""
    if fmt == "mp3":
        args = ["-c:a", "libmp3lame", "-b:a", f"{kbps}k", "-id3v2_version", "3", "-write_id3v1", "0"]
    elif fmt == "opus":
        args = ["-c:a", "libopus", "-b:a", f"{kbps}k", "-application", "audio"]
    else:
        args = ["-c:a", "aac", "-b:a", f"{kbps}k", "-movflags", "+faststart",
                "-brand", "M4B " if fmt == "m4b" else "M4A ",
                "-metadata:s:a:0", f"language={iso639_2(meta.language)}"]
    if fmt in ("mp3", "m4a"):
        track = f"{tags['TRACKNUMBER']}/{tags['TRACKTOTAL']}"
        for key, value in (("title", tags["TITLE"]), ("album", tags["ALBUM"]), ("artist", tags["ARTIST"]),
                           ("track", track)):
            if value:
                args += ["-metadata", f"{key}={value}"]
    if fmt == "mp3" and meta.language:
        args += ["-metadata", f"language={iso639_2(meta.language)}"]
    return args


def encode_lossy(path: Path, fmt: str, pcm: Iterable[np.ndarray], sr: int, tags: dict[str, str],
                 meta: BookMeta, kbps: int, chapters: Sequence[tuple[int, int, str]] = ()) -> None:
    """mp3 / opus / m4a / m4b at `path` through ffmpeg, bit-exact, fed float32 PCM chunks on stdin.

    chapters (m4b): (start_sample, end_sample, title) at `sr`, written through an FFMETADATA1 input.
    """
    # ffmpeg's side inputs live beside the output, so a killed run's leftovers are found and removed
    with scratch(path.parent, directory=True) as side:
        inputs = [*pcm_input(sr)]
        maps = ["-map", "0:a"]
        n_inputs = 1
        if fmt == "m4b":
            mf = side / "meta.txt"
            mf.write_text(ffmetadata(tags, chapters, sr), encoding="utf-8")
            inputs += ["-f", "ffmetadata", "-i", str(mf)]
            metadata = ["-map_metadata", str(n_inputs), "-map_chapters", str(n_inputs)]
            n_inputs += 1
        else:
            metadata = ["-map_metadata", "-1", "-map_chapters", "-1"]
        kind = cover_kind(meta)
        if kind and fmt in ("mp3", "m4a", "m4b"):
            cf = side / f"cover.{'jpg' if kind == 'jpeg' else 'png'}"
            cf.write_bytes(meta.cover or b"")
            inputs += ["-i", str(cf)]
            maps += ["-map", f"{n_inputs}:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
        run_ffmpeg([*inputs, *maps, *metadata, "-threads", "1", *codec_args(fmt, kbps, tags, meta),
                    *BITEXACT, "-f", CONTAINERS[fmt], str(path)], pcm)
    if fmt == "opus":
        _tag_opus(path, tags, meta)


def _tag_opus(path: Path, tags: dict[str, str], meta: BookMeta) -> None:
    from mutagen.oggopus import OggOpus

    f = OggOpus(str(path))
    f.clear()

    def add_cover(f, pic) -> None:
        f["METADATA_BLOCK_PICTURE"] = base64.b64encode(pic.write()).decode("ascii")

    _vorbis_comments(f, tags, meta, add_cover)
