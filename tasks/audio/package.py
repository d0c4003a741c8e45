"""Packaging: chapter audio -> chapter files (flac/wav/mp3/opus/m4a), one M4B, subtitles and report.json.

Every output is written through a temp file in the same directory and `os.replace`d into place, and the bytes
depend only on the inputs (ffmpeg runs bit-exact with no varying metadata), so a killed-and-resumed render
packages byte-identical files.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Union

import numpy as np

from engine.units import SAMPLE_RATE
from tasks.audio.assemble import AssembleOptions, ChapterAudio, Piece, assemble_chapter
from tasks.book import BookMeta
from tasks.errors import OutputError
from manifests.crashpoints import crashpoint
from tasks.audio.loudness import TARGET_LUFS, TRUE_PEAK_DBTP
from tasks.audio.subtitles import SUBTITLE_FORMATS

FORMATS = ("flac", "wav", "mp3", "opus", "m4a")   # chapter-file formats; "m4b" is the whole book
MAX_NAME_BYTES = 200          # UTF-8 bytes per file name, prefix and extension included
FLAC_SUBTYPE = "PCM_24"       # FLAC/WAV sample format
BITRATES_KBPS = {"mp3": 64, "opus": 48, "m4a": 64, "m4b": 64}   # kbit/s, mono speech
MP3_RATES = frozenset([16_000, 22_050, 24_000, 32_000, 44_100, 48_000])   # Hz that MPEG audio stores
OPUS_RATES = frozenset([8_000, 12_000, 16_000, 24_000, 48_000])          # Hz libopus accepts; else 48 kHz
PRE_LIMIT_MARGIN_DB = 0.3     # dB below the ceiling the limiter aims for, before encoding
LOSSY_SAFETY_DB = 0.2         # dB below the ceiling a corrected lossy file aims for
LOSSY_LOUDNESS_TOLERANCE_LU = 0.5   # LU a lossy file may drift from the target before it is re-encoded
SHAPE_CONTEXT = 4096          # samples of context around each chunk the streaming limiter sees
VERIFY_ROUNDS = 4             # encode -> decode -> measure -> correct rounds at most
REPORT_NAME = "report.json"
TEMP_PREFIX = ".tmp-"         # every temp file this module makes in an output directory starts with it
STALE_TEMP_S = 3600           # s, a temp file untouched this long was left by a killed run: removed
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
    normalize: bool = True                 # loudness-normalize each chapter and limit its true peak
    target_lufs: float = TARGET_LUFS       # LUFS, integrated loudness of every final file
    true_peak_dbtp: float = TRUE_PEAK_DBTP  # dBTP, ceiling of every final file
    subtitles: tuple[str, ...] = SUBTITLE_FORMATS   # per chapter, and book-wide with the M4B
    subtitle_sentences: bool = False       # split each segment's cue into sentences (times estimated inside)
    bitrates_kbps: Mapping[str, int] = field(default_factory=lambda: dict(BITRATES_KBPS))

    def validate(self) -> "PackageOptions":
        """Raise ValueError naming the conflict."""
        bad = [f for f in self.formats if f not in FORMATS + ("m4b",)]
        if bad:
            raise ValueError(f"unknown format(s) {bad}; choose from {', '.join(FORMATS + ('m4b',))}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"format listed twice in {list(self.formats)}")
        bad = [f for f in self.subtitles if f not in SUBTITLE_FORMATS]
        if bad:
            raise ValueError(f"unknown subtitle format(s) {bad}; choose from {', '.join(SUBTITLE_FORMATS)}")
        if not 8_000 <= self.sample_rate <= 192_000:
            raise ValueError(f"sample_rate {self.sample_rate} Hz is outside 8000..192000")
        if "mp3" in self.formats and self.sample_rate not in MP3_RATES:
            raise ValueError(f"mp3 cannot store {self.sample_rate} Hz; use one of {sorted(MP3_RATES)}")
        if not -70.0 < self.target_lufs < 0.0:
            raise ValueError(f"target_lufs {self.target_lufs} is outside (-70, 0)")
        if self.true_peak_dbtp > 0.0:
            raise ValueError(f"true_peak_dbtp {self.true_peak_dbtp} is above 0 dBTP")
        if self.normalize and self.target_lufs > self.true_peak_dbtp:
            raise ValueError(f"target_lufs {self.target_lufs} is above the true-peak ceiling {self.true_peak_dbtp}")
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


def safe_name(text: str, max_bytes: int = MAX_NAME_BYTES, reserved: bool = True) -> str:
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
    if reserved and base.rstrip().upper() in WINDOWS_RESERVED:      # CON, con.txt, "COM1 " -> CON_, con_.txt, COM1_
        s = _cut_utf8(base.rstrip() + "_" + dot + rest, max_bytes).rstrip(" .")
    return s


def chapter_stem(chapter_index: int, n_chapters: int, title: str, ext: str = "flac") -> str:
    """`NNN - <safe title>` (1-based, zero-padded to the chapter count), within MAX_NAME_BYTES with `.ext`."""
    width = max(3, len(str(n_chapters)))
    prefix = f"{chapter_index + 1:0{width}d}"
    budget = MAX_NAME_BYTES - len(prefix) - len(" - ") - len(ext) - 1
    t = safe_name(title, budget, reserved=False)       # "NNN - CON" is not a reserved name
    return f"{prefix} - {t}" if t else prefix


def inside(book_dir: Path, name: str) -> Path:
    """book_dir/name, asserting it resolves to a direct child of book_dir."""
    root = Path(book_dir).resolve()
    path = (root / name).resolve()
    if path.parent != root or name in ("", ".", ".."):
        raise OutputError(str(book_dir), f"output name {name!r} would leave the book directory")
    return path


# ----------------------------------------------------------------------------------------------------------
# Atomic writes

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temp path beside `final`; on success it replaces `final`, on error it is removed."""
    final = Path(final)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=TEMP_PREFIX, suffix=final.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        crashpoint("package-file")
        if os.path.exists(tmp):                          # the body may discard its attempt
            os.chmod(tmp, 0o666 & ~_umask())             # mkstemp makes 0600; outputs get the usual mode
            os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_temp(path: Path) -> None:
    """Remove one leftover temp file, or a temp folder (ffmpeg's side inputs) with what is in it."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_temps(directory: Path, older_than_s: float = STALE_TEMP_S) -> list[str]:
    """Delete temp files (and ffmpeg's temp folders) a killed run left in `directory` (ours, untouched for
    older_than_s); their names."""
    import time

    removed = []
    now = time.time()
    for entry in os.scandir(directory):
        if not entry.name.startswith(TEMP_PREFIX) or entry.is_symlink():
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > older_than_s:
                remove_temp(Path(entry.path))
                removed.append(entry.name)
        except FileNotFoundError:
            pass
    return sorted(removed)


def atomic_write_bytes(final: Path, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)


# ----------------------------------------------------------------------------------------------------------
# Encoding

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
    f = FLAC(str(path))
    for k, v in tags.items():
        if v:
            f[k] = v
    if meta.cover:
        f.add_picture(_picture(meta))
    f.save()


def _write_wav(path: Path, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta) -> None:
    import soundfile as sf

    with sf.SoundFile(str(path), "w", sr, 1, format="WAV", subtype=FLAC_SUBTYPE) as f:
        for key, attr in (("TITLE", "title"), ("ALBUM", "album"), ("ARTIST", "artist"),
                          ("TRACKNUMBER", "tracknumber")):
            if tags.get(key):
                setattr(f, attr, tags[key])
        f.write(audio)


def _tag_opus(path: Path, tags: dict[str, str], meta: BookMeta) -> None:
    import base64

    from mutagen.oggopus import OggOpus

    f = OggOpus(str(path))
    f.clear()
    for k, v in tags.items():
        if v:
            f[k] = v
    if meta.cover:
        f["METADATA_BLOCK_PICTURE"] = base64.b64encode(_picture(meta).write()).decode("ascii")
    f.save()


def _encode_ffmpeg(path: Path, fmt: str, pcm: Iterable[np.ndarray], sr: int, tags: dict[str, str],
                   meta: BookMeta, kbps: int, chapters: Sequence[tuple[int, int, str]] = ()) -> None:
    """mp3 / opus / m4a / m4b through ffmpeg, bit-exact, fed float32 PCM on stdin.

    chapters (m4b): (start_sample, end_sample, title) at `sr`, written through an FFMETADATA1 input.
    """
    import tempfile as _tf

    from tasks.audio.ffmpeg import BITEXACT, ffmetadata_escape, pcm_input, run_ffmpeg

    # ffmpeg's side inputs live beside the output, so a killed run's leftovers are cleaned by the next run
    with _tf.TemporaryDirectory(prefix=TEMP_PREFIX + "ffmpeg-", dir=path.parent) as td:
        args = [*pcm_input(sr)]
        n_inputs = 1
        meta_input = cover_input = None
        if fmt == "m4b":
            lines = [";FFMETADATA1"]
            for key, value in (("title", tags["TITLE"]), ("album", tags["ALBUM"]), ("artist", tags["ARTIST"]),
                               ("album_artist", tags["ARTIST"]), ("genre", "Audiobook")):
                if value:
                    lines.append(f"{key}={ffmetadata_escape(value)}")
            for start, end, title in chapters:
                lines += ["[CHAPTER]", f"TIMEBASE=1/{sr}", f"START={start}", f"END={end}",
                          f"title={ffmetadata_escape(tag_text(title))}"]
            mf = Path(td) / "meta.txt"
            mf.write_text("\n".join(lines) + "\n", encoding="utf-8")
            args += ["-f", "ffmetadata", "-i", str(mf)]
            meta_input, n_inputs = n_inputs, n_inputs + 1
        kind = cover_kind(meta)
        if kind and fmt in ("mp3", "m4a", "m4b"):
            cf = Path(td) / f"cover.{'jpg' if kind == 'jpeg' else 'png'}"
            cf.write_bytes(meta.cover or b"")
            args += ["-i", str(cf)]
            cover_input, n_inputs = n_inputs, n_inputs + 1
        args += ["-map", "0:a"]
        if cover_input is not None:
            args += ["-map", f"{cover_input}:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
        if meta_input is not None:
            args += ["-map_metadata", str(meta_input), "-map_chapters", str(meta_input)]
        else:
            args += ["-map_metadata", "-1", "-map_chapters", "-1"]
        args += ["-threads", "1"]
        if fmt == "mp3":
            args += ["-c:a", "libmp3lame", "-b:a", f"{kbps}k", "-id3v2_version", "3", "-write_id3v1", "0"]
        elif fmt == "opus":
            args += ["-c:a", "libopus", "-b:a", f"{kbps}k", "-application", "audio"]
        else:
            args += ["-c:a", "aac", "-b:a", f"{kbps}k", "-movflags", "+faststart",
                     "-brand", "M4B " if fmt == "m4b" else "M4A ",
                     "-metadata:s:a:0", f"language={iso639_2(meta.language)}"]
        if fmt != "m4b":                                  # m4b's metadata came from the FFMETADATA input
            track = f"{tags['TRACKNUMBER']}/{tags['TRACKTOTAL']}"
            for key, value in (("title", tags["TITLE"]), ("album", tags["ALBUM"]), ("artist", tags["ARTIST"]),
                               ("track", track)):
                if value and fmt != "opus":
                    args += ["-metadata", f"{key}={value}"]
            if fmt == "mp3" and meta.language:
                args += ["-metadata", f"language={iso639_2(meta.language)}"]
        args += [*BITEXACT, "-f", {"mp3": "mp3", "opus": "ogg", "m4a": "mp4", "m4b": "mp4"}[fmt], str(path)]
        run_ffmpeg(args, pcm)
    if fmt == "opus":
        _tag_opus(path, tags, meta)


# ----------------------------------------------------------------------------------------------------------
# Measuring final files

@dataclass(frozen=True)
class FileReport:
    file: str                      # name inside book_dir
    format: str
    chapter: int | None            # chapter index, None for the M4B and book-wide files
    seconds: float | None          # decoded duration
    integrated_lufs: float | None  # measured on the decoded final file (None: silent / no audio)
    true_peak_dbtp: float | None
    correction_db: float = 0.0     # extra gain applied after encoding + measuring (lossy loudness drift)
    limiter_dbtp: float | None = None  # tightened limiter ceiling after a lossy overshoot (None: not needed)

    def as_json(self) -> dict:
        def r(v):
            return None if v is None or not math.isfinite(v) else round(v, 3)
        return {"file": self.file, "format": self.format, "chapter": self.chapter, "seconds": r(self.seconds),
                "integrated_lufs": r(self.integrated_lufs), "true_peak_dbtp": r(self.true_peak_dbtp),
                "correction_db": round(self.correction_db, 3),
                "limiter_dbtp": None if self.limiter_dbtp is None else round(self.limiter_dbtp, 3)}


def measure_file(path: Path, sample_rate: int | None = None) -> tuple[float, float, float]:
    """(integrated LUFS, true peak dBTP, seconds) of a final file, decoded (soundfile or ffmpeg)."""
    from tasks.audio.loudness import Meter

    if path.suffix in (".flac", ".wav"):
        import soundfile as sf

        with sf.SoundFile(str(path)) as f:
            m = Meter(f.samplerate)
            for block in f.blocks(blocksize=1 << 20, dtype="float32", always_2d=True):
                m.feed(block.mean(axis=1) if block.shape[1] > 1 else block[:, 0])
    else:
        from tasks.audio.ffmpeg import decode

        sr, it = decode(path, sample_rate)
        m = Meter(sr)
        for c in it:
            m.feed(c)
    return m.integrated_lufs(), m.true_peak_dbtp(), m.samples / m.sr


def shaped_chunks(audio: np.ndarray, sr: int, gain_db: float = 0.0,
                  ceiling_dbtp: float | None = None) -> Iterator[np.ndarray]:
    """`audio` (array or memmap) chunk by chunk, times gain_db and true-peak limited to ceiling_dbtp
    (None: unchanged).  Each chunk is limited with SHAPE_CONTEXT samples of context on both sides."""
    from tasks.audio.ffmpeg import CHUNK_SAMPLES, chunks
    from tasks.audio.loudness import db_to_gain, limit

    if ceiling_dbtp is None:
        yield from chunks(audio, db_to_gain(gain_db))
        return
    g = np.float32(db_to_gain(gain_db))
    n = len(audio)
    for i in range(0, n, CHUNK_SAMPLES):
        lo, hi = max(0, i - SHAPE_CONTEXT), min(n, i + CHUNK_SAMPLES + SHAPE_CONTEXT)
        y = limit(np.asarray(audio[lo:hi], dtype=np.float32) * g, sr, ceiling_dbtp)
        yield y[i - lo:i - lo + min(CHUNK_SAMPLES, n - i)]


def _encode_verified(path: Path, fmt: str, audio: np.ndarray, sr: int, tags: dict[str, str], meta: BookMeta,
                     opts: PackageOptions, chapter: int | None,
                     chapters: Sequence[tuple[int, int, str]] = ()) -> FileReport:
    """Encode `audio` to `path` atomically, decode and measure it.  For a lossy format whose codec pushed the
    true peak over the ceiling (or moved the loudness more than 0.5 LU), tighten the limiter by the overshoot
    and encode again: first the limiter's ceiling is lowered by 1.5x the overshoot; if the codec still
    overshoots, the level is lowered by the overshoot; a loudness drift under the ceiling is followed by
    the gain.  At most VERIFY_ROUNDS encodes; the report carries what the final file measures."""
    gain_db, ceiling = 0.0, None
    lossless = fmt in ("flac", "wav")
    for round_ in range(VERIFY_ROUNDS):
        with atomic_path(path) as tmp:
            if lossless:
                (_write_flac if fmt == "flac" else _write_wav)(tmp, audio, sr, tags, meta)
            else:
                _encode_ffmpeg(tmp, fmt, shaped_chunks(audio, sr, gain_db, ceiling), sr, tags, meta,
                               int(opts.bitrates_kbps.get(fmt, BITRATES_KBPS[fmt])), chapters)
            lufs, tp, secs = measure_file(tmp, 48_000 if fmt == "opus" else sr)
            if lossless or not opts.normalize or not math.isfinite(tp) or round_ == VERIFY_ROUNDS - 1:
                break
            over = tp - (opts.true_peak_dbtp - LOSSY_SAFETY_DB / 2)
            off = (opts.target_lufs - lufs) if math.isfinite(lufs) else 0.0
            if over <= 0 and abs(off) <= LOSSY_LOUDNESS_TOLERANCE_LU:
                break
            excess = tp - (opts.true_peak_dbtp - LOSSY_SAFETY_DB)
            if over > 0 and round_ == 0:                  # first, limit the peaks harder before encoding
                ceiling = opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB - 1.5 * excess
            elif over > 0:                                # codec noise, not peaks: lower the level itself
                gain_db -= excess
            else:                                         # under the ceiling, loudness drifted: follow it
                gain_db += off
                if ceiling is None and off > 0:
                    ceiling = opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB
            tmp.unlink()                                  # discard this attempt (atomic_path tolerates it)
    return FileReport(path.name, fmt, chapter, secs, lufs, tp, gain_db, ceiling)


# ----------------------------------------------------------------------------------------------------------
# Chapters and the book

@dataclass(frozen=True)
class PreparedChapter:
    audio: np.ndarray              # (samples,) float32 at opts.sample_rate, normalized and limited
    sample_rate: int
    gain_db: float                 # loudness gain applied (0 when not normalizing or silent)
    cues: list                     # the assembly's cues (times at the assembly's rate)
    source_rate: int               # the assembly's sample rate


def prepare_chapter(chapter: ChapterAudio, opts: PackageOptions) -> PreparedChapter:
    """Resample to opts.sample_rate, then normalize this chapter to the target and limit its true peak.

    Normalization is per chapter: the gain is computed on the final chapter audio (never per segment), so
    every chapter file lands on the target; a book is one voice, so chapter gains stay close together.
    """
    from tasks.audio.loudness import normalize

    y = resample(chapter.audio, chapter.sample_rate, opts.sample_rate)
    gain = 0.0
    if opts.normalize and len(y):
        n = normalize(y, opts.sample_rate, opts.target_lufs, opts.true_peak_dbtp - PRE_LIMIT_MARGIN_DB)
        y, gain = n.audio, n.gain_db
    return PreparedChapter(y, opts.sample_rate, gain, list(chapter.cues), chapter.sample_rate)


def _write_subtitles(book_dir: Path, stem: str, items, opts: PackageOptions, title: str,
                     meta: BookMeta) -> list[Path]:
    from tasks.audio.subtitles import by_sentence, render

    if opts.subtitle_sentences:
        items = by_sentence(items)
    out = []
    for fmt in opts.subtitles:
        path = inside(book_dir, f"{stem}.{fmt}")
        atomic_write_bytes(path, render(fmt, items, title, meta.author, meta.title).encode("utf-8"))
        out.append(path)
    return out


def _check_tools(opts: PackageOptions) -> None:
    """Fail before writing anything when a requested format needs ffmpeg/ffprobe and they are missing."""
    if any(f not in ("flac", "wav") for f in opts.formats):
        from tasks.audio.ffmpeg import find_tool

        find_tool("ffmpeg")
        find_tool("ffprobe")


def _chapter_outputs(book_dir: Path, chapter_index: int, n_chapters: int, title: str,
                     prepared: PreparedChapter, meta: BookMeta, opts: PackageOptions
                     ) -> tuple[list[Path], list[FileReport]]:
    from tasks.audio.subtitles import timed

    tags = chapter_tags(chapter_index, n_chapters, title, meta)
    paths: list[Path] = []
    reports: list[FileReport] = []
    for fmt in opts.formats:
        if fmt == "m4b":
            continue
        path = inside(book_dir, f"{chapter_stem(chapter_index, n_chapters, title, fmt)}.{fmt}")
        audio, sr = prepared.audio, prepared.sample_rate
        if fmt == "opus" and sr not in OPUS_RATES:
            audio, sr = resample(audio, sr, 48_000), 48_000
        reports.append(_encode_verified(path, fmt, audio, sr, tags, meta, opts, chapter_index))
        paths.append(path)
    if opts.subtitles and prepared.cues:
        stem = chapter_stem(chapter_index, n_chapters, title, "srt")
        paths += _write_subtitles(book_dir, stem, timed(prepared.cues, prepared.source_rate), opts, title, meta)
    return paths, reports


def write_chapter_files(book_dir: Path, chapter_index: int, n_chapters: int, title: str,
                        chapter: ChapterAudio, meta: BookMeta,
                        opts: PackageOptions = PackageOptions()) -> list[Path]:
    """Write `book_dir/NNN - <safe title>.<ext>` for every chapter format in opts.formats (not m4b), plus
    the chapter's subtitles; their paths.  Each file is normalized, tagged, written atomically."""
    opts.validate()
    _check_tools(opts)
    book_dir = Path(book_dir)
    book_dir.mkdir(parents=True, exist_ok=True)
    paths, _ = _chapter_outputs(book_dir, chapter_index, n_chapters, title, prepare_chapter(chapter, opts),
                                meta, opts)
    return paths


ChapterInput = Union[ChapterAudio, Callable[[], ChapterAudio]]


@dataclass(frozen=True)
class Report:
    book_dir: Path
    files: list[Path]              # every file written, report.json last
    loudness: list[FileReport]     # one per audio file
    data: dict                     # what report.json holds

    @property
    def path(self) -> Path:
        return self.book_dir / REPORT_NAME


def book_stem(meta: BookMeta) -> str:
    return safe_name(meta.title, MAX_NAME_BYTES - len(".m4b")) or "book"


def package_book(book_dir: Path, chapters: Sequence[tuple[int, str, ChapterInput]], meta: BookMeta,
                 opts: PackageOptions = PackageOptions(), *, skip: Collection[int] = (),
                 previous: Mapping | None = None, extra: Mapping | None = None) -> Report:
    """Chapter files, `<book>.m4b` (chapters at the exact chapter starts, title/author/cover), subtitles and
    report.json in book_dir, all written atomically and deterministically.

    `chapters` is (chapter index, title, ChapterAudio or a zero-argument function returning it), in reading
    order; with functions only one chapter is in memory at a time (the M4B's audio goes through a temp file).
    No engine import: this works from stored segment audio alone.

    Incremental (tasks.stages.package decides): chapters in `skip` already have current output files; their
    report rows come from `previous` (the last report.json) and their files are not written again.  Their
    audio is still loaded when an M4B is wanted.  `extra` adds top-level keys to report.json.
    """
    opts.validate()
    _check_tools(opts)
    book_dir = Path(book_dir)
    book_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(book_dir)
    skip = frozenset(skip) if previous else frozenset()
    n = len(chapters)
    if len({i for i, _, _ in chapters}) != n:
        raise ValueError("chapter indices must be unique")
    n_total = max([i + 1 for i, _, _ in chapters] + [n])
    want_m4b = "m4b" in opts.formats
    files: list[Path] = []
    reports: list[FileReport] = []
    chapter_rows: list[dict] = []
    marks: list[tuple[int, int, str]] = []               # (start, end, title) at opts.sample_rate
    book_items = []
    pos = 0
    raw_fd, raw_path = tempfile.mkstemp(dir=book_dir, prefix=TEMP_PREFIX + "m4b-", suffix=".f32") if want_m4b \
        else (os.open(os.devnull, os.O_WRONLY), os.devnull)
    try:
        with os.fdopen(raw_fd, "wb") as raw:
            for index, title, item in chapters:
                if index in skip:                         # outputs current: carry the report rows over
                    chapter_rows += [r for r in previous["chapters"] if r["index"] == index]
                    reports += [FileReport(**r) for r in previous["files"] if r["chapter"] == index]
                    files += [p for p in _existing_chapter_files(book_dir, index, n_total, title, opts)]
                    if not want_m4b:
                        continue
                ch = item() if callable(item) else item
                prepared = prepare_chapter(ch, opts)
                del ch
                if index not in skip:
                    paths, reps = _chapter_outputs(book_dir, index, n_total, title, prepared, meta, opts)
                    files += paths
                    reports += reps
                    chapter_rows.append({"index": index, "title": title,
                                         "seconds": round(len(prepared.audio) / prepared.sample_rate, 3),
                                         "gain_db": round(prepared.gain_db, 3)})
                if want_m4b:
                    from tasks.audio.subtitles import timed

                    raw.write(np.ascontiguousarray(prepared.audio, dtype="<f4").tobytes())
                    marks.append((pos, pos + len(prepared.audio), title))
                    book_items += timed(prepared.cues, prepared.source_rate,
                                        Fraction(pos, prepared.sample_rate))
                    pos += len(prepared.audio)
        if want_m4b and pos > 0:
            stem = book_stem(meta)
            m4b = inside(book_dir, f"{stem}.m4b")
            audio = np.memmap(raw_path, dtype="<f4", mode="r")
            tags = chapter_tags(0, 1, meta.title, meta)
            reports.append(_encode_verified(m4b, "m4b", audio, opts.sample_rate, tags, meta, opts, None, marks))
            del audio
            files.append(m4b)
            if opts.subtitles and book_items:
                taken = {p.name for p in files}
                sub_stem = stem if not any(f"{stem}.{f}" in taken for f in opts.subtitles) else f"{stem} (book)"
                files += _write_subtitles(book_dir, sub_stem, book_items, opts, meta.title, meta)
    finally:
        if want_m4b:
            try:
                os.unlink(raw_path)
            except FileNotFoundError:
                pass
    names = [p.name for p in files]
    if len({x.casefold() for x in names}) != len(names):
        raise AssertionError(f"two outputs share a name in {book_dir}")
    data = {
        "book": meta.title,
        "author": meta.author,
        "sample_rate": opts.sample_rate,
        "formats": list(opts.formats),
        "loudness": {"standard": "ITU-R BS.1770-4 / EBU R128 (pyloudnorm K-weighting, gated)",
                     "normalization": "per chapter" if opts.normalize else "off",
                     "target_lufs": opts.target_lufs, "true_peak_ceiling_dbtp": opts.true_peak_dbtp,
                     "true_peak": "4x oversampled", "measured_on": "decoded final files"},
        "chapters": chapter_rows,
        "files": [r.as_json() for r in reports],
        **(extra or {}),
    }
    report_path = inside(book_dir, REPORT_NAME)
    atomic_write_bytes(report_path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return Report(book_dir, files + [report_path], reports, data)


def _existing_chapter_files(book_dir: Path, index: int, n_total: int, title: str,
                            opts: PackageOptions) -> list[Path]:
    names = [f"{chapter_stem(index, n_total, title, f)}.{f}" for f in opts.formats if f != "m4b"]
    names += [f"{chapter_stem(index, n_total, title, 'srt')}.{f}" for f in opts.subtitles]
    return [p for p in (inside(book_dir, n) for n in names) if p.exists()]


def package_pieces(book_dir: Path, chapters: Sequence[tuple[int, str, Sequence[Piece]]], meta: BookMeta,
                   opts: PackageOptions = PackageOptions(),
                   assemble_opts: AssembleOptions = AssembleOptions()) -> Report:
    """Re-package from stored segment audio alone: assemble each chapter's pieces (one chapter in memory at a
    time) and package_book them.  `chapters` is (chapter index, title, pieces in reading order)."""
    from functools import partial

    return package_book(book_dir, [(i, t, partial(assemble_chapter, list(p), assemble_opts))
                                   for i, t, p in chapters], meta, opts)
