"""`--format epub`: a read-along EPUB 3 — the chapters' original text with Media Overlays (SMIL) that play the
chapter audio and highlight each segment while it is spoken.

The package loop (tasks.audio.package) calls `encode_chapter` for every chapter, in reading order, into a work
folder, then `write_epub`.  The ZIP's bytes depend only on the inputs (fixed dates, attributes and identifier).
Its files and durations: docs/modules.md, "The read-along EPUB's files".
"""
from __future__ import annotations

import re
import shutil
import uuid
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from engine.atomic import atomic_path
from tasks.audio.encode import chapter_tags, cover_kind
from tasks.audio.readalong import ReadAlong
from tasks.audio.verify import FileReport, encode_verified
from tasks.book import BookMeta

if TYPE_CHECKING:
    from tasks.audio.options import PackageOptions, PreparedChapter

AUDIO_FORMAT = "m4a"                  # AAC in MP4: an EPUB core media type
AUDIO_MIME = "audio/mp4"
ACTIVE_CLASS = "-epub-media-overlay-active"   # media:active-class, styled in style.css
ZIP_DATE = (1980, 1, 1, 0, 0, 0)      # every ZIP entry's timestamp (the ZIP epoch)
MODIFIED = "1980-01-01T00:00:00Z"     # dcterms:modified: fixed, so the bytes depend only on the inputs
ID_NAMESPACE = uuid.UUID("6f1d3f0a-5b2e-4c57-9a4e-2f0c2b7f6e11")   # dc:identifier = uuid5(this, title+author)
ROOT = "EPUB"                         # the folder inside the ZIP that holds the publication
STREAM_BYTES = 1 << 20                # bytes per read when copying chapter audio into the ZIP

STYLE = f"""body {{ margin: 0 5%; line-height: 1.8; }}
h1 {{ font-size: 1.4em; text-align: center; margin: 1.5em 0 1em; }}
p {{ text-indent: 2em; margin: 0 0 0.6em; }}
.cover {{ text-align: center; margin: 0; }}
.cover img {{ max-width: 100%; max-height: 95vh; }}
.{ACTIVE_CLASS} {{ background-color: #fde68a; color: #000; border-radius: 0.2em; }}
"""
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_LANG_TAG = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")


@dataclass(frozen=True)
class EpubChapter:
    index: int                     # the book's chapter index (0-based)
    title: str
    text: ReadAlong
    audio: Path                    # the chapter audio, encoded (work folder)

    @property
    def stem(self) -> str:
        return f"c{self.index + 1:03d}"


def encode_chapter(work: Path, epub_name: str, index: int, n_chapters: int, title: str,
                   prepared: PreparedChapter, text: ReadAlong, meta: BookMeta, opts: PackageOptions,
                   ) -> tuple[EpubChapter, FileReport]:
    """The chapter's prepared (normalized) audio as work/cNNN.m4a, encoded and measured (no cover inside:
    the EPUB has its own); its report row names the file inside the EPUB."""
    ch = EpubChapter(index, title, text, Path(work) / f"c{index + 1:03d}.{AUDIO_FORMAT}")
    rep = encode_verified(ch.audio, AUDIO_FORMAT, prepared.audio, prepared.sample_rate,
                          chapter_tags(index, n_chapters, title, meta), replace(meta, cover=None), opts, index)
    return ch, replace(rep, file=f"{epub_name}/{ROOT}/audio/{ch.audio.name}", format="epub")


def write_epub(path: Path, meta: BookMeta, chapters: Sequence[EpubChapter],
               before_replace: Callable[[], None] | None = None) -> None:
    """The EPUB at `path`, atomically (engine.atomic): documents from `chapters` (reading order), the chapter
    audio copied in from their files."""

    lang = language_tag(meta.language)
    kind = cover_kind(meta)
    cover = f"images/cover.{'jpg' if kind == 'jpeg' else 'png'}" if kind else None
    docs = [("nav.xhtml", nav_xhtml(meta, chapters, lang)), ("style.css", STYLE)]
    if cover:
        docs.append(("cover.xhtml", cover_xhtml(meta, cover, lang)))
    for ch in chapters:
        docs += [(f"text/{ch.stem}.xhtml", chapter_xhtml(ch, lang)), (f"smil/{ch.stem}.smil", chapter_smil(ch))]
    docs.insert(0, ("package.opf", package_opf(meta, chapters, lang, cover)))
    with atomic_path(path, before_replace=before_replace) as tmp:
        with zipfile.ZipFile(tmp, "w") as z:
            z.writestr(_entry("mimetype", zipfile.ZIP_STORED), b"application/epub+zip")
            z.writestr(_entry("META-INF/container.xml"), CONTAINER.encode("utf-8"))
            for name, text in docs:
                z.writestr(_entry(f"{ROOT}/{name}"), text.encode("utf-8"))
            if cover and meta.cover is not None:
                z.writestr(_entry(f"{ROOT}/{cover}", zipfile.ZIP_STORED), meta.cover)
            for ch in chapters:
                _copy_in(z, ch.audio, f"{ROOT}/audio/{ch.audio.name}")


def _entry(name: str, compress: int = zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, ZIP_DATE)
    info.compress_type = compress
    info.create_system = 3                           # unix
    info.external_attr = 0o100644 << 16              # a regular file, rw-r--r--
    return info


def _copy_in(z: zipfile.ZipFile, src: Path, name: str) -> None:
    info = _entry(name, zipfile.ZIP_STORED)          # compressed audio: stored
    info.file_size = src.stat().st_size              # lets zipfile choose ZIP64 for a > 2 GiB file
    with open(src, "rb") as f, z.open(info, "w") as out:
        shutil.copyfileobj(f, out, STREAM_BYTES)


# ----------------------------------------------------------------------------------------------------------
# Documents

CONTAINER = f"""<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="{ROOT}/package.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""


def xml_text(text: str) -> str:
    """`text` escaped for XML content or a double-quoted attribute (characters XML cannot hold dropped)."""
    return escape(_XML_INVALID.sub("", text), quote=True)


def language_tag(language: str) -> str:
    """A well-formed BCP 47 tag from BookMeta.language ("zh_CN" -> "zh-CN"), "und" when there is none."""
    tag = language.strip().replace("_", "-")
    return tag if _LANG_TAG.match(tag) else "und"


def clock(ms: int) -> str:
    """A SMIL full clock value, h:mm:ss.fff."""
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h}:{m:02d}:{s:02d}.{ms:03d}"


def overlay_ms(ch: EpubChapter) -> int:
    """A media overlay's duration: the sum of its clips, in ms."""
    return sum(c.end_ms - c.start_ms for c in ch.text.cues)


def _xhtml(lang: str, title: str, body: str, css: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
            f'xml:lang="{lang}" lang="{lang}">\n<head>\n<meta charset="UTF-8"/>\n<title>{xml_text(title)}</title>\n'
            f'<link rel="stylesheet" type="text/css" href="{css}"/>\n</head>\n<body>\n{body}</body>\n</html>\n')


def chapter_title(ch: EpubChapter) -> str:
    return ch.title.strip() or str(ch.index + 1)


def chapter_xhtml(ch: EpubChapter, lang: str) -> str:
    """The chapter's original text: a block per paragraph (h1 for the title), each segment's runs in a span
    whose id the overlay's <text> points at."""
    lines = []
    for block in ch.text.blocks():
        parts = []
        for run in block.runs:
            text = "<br/>".join(xml_text(x) for x in run.text.split("\n"))
            parts.append(text if run.segment is None else f'<span id="s{run.segment}">{text}</span>')
        tag = "h1" if block.title else "p"
        lines.append(f"<{tag}>{''.join(parts)}</{tag}>\n")
    body = f'<section epub:type="chapter" id="chapter">\n{"".join(lines)}</section>\n'
    return _xhtml(lang, chapter_title(ch), body, "../style.css")


def chapter_smil(ch: EpubChapter) -> str:
    """One <par> per segment, in reading order: the segment's span and its clip of the chapter audio."""
    text, audio = f"../text/{ch.stem}.xhtml", f"../audio/{ch.audio.name}"
    pars = "".join(f'<par id="p{i}"><text src="{text}#s{i}"/><audio src="{audio}" clipBegin="{clock(c.start_ms)}" '
                   f'clipEnd="{clock(c.end_ms)}"/></par>\n' for i, c in enumerate(ch.text.cues))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<smil xmlns="http://www.w3.org/ns/SMIL" '
            'xmlns:epub="http://www.idpf.org/2007/ops" version="3.0">\n<body>\n'
            f'<seq id="seq" epub:textref="{text}#chapter" epub:type="chapter">\n{pars}</seq>\n</body>\n</smil>\n')


def nav_xhtml(meta: BookMeta, chapters: Sequence[EpubChapter], lang: str) -> str:
    items = "".join(f'<li><a href="text/{ch.stem}.xhtml">{xml_text(chapter_title(ch))}</a></li>\n'
                    for ch in chapters)
    title = xml_text(meta.title or "book")
    body = f'<nav epub:type="toc" id="toc">\n<h1>{title}</h1>\n<ol>\n{items}</ol>\n</nav>\n'
    return _xhtml(lang, meta.title or "book", body, "style.css")


def cover_xhtml(meta: BookMeta, cover: str, lang: str) -> str:
    body = (f'<section epub:type="cover" class="cover">\n<img src="{cover}" alt="{xml_text(meta.title)}"/>\n'
            '</section>\n')
    return _xhtml(lang, meta.title or "book", body, "style.css")


def book_id(meta: BookMeta) -> str:
    return "urn:uuid:" + str(uuid.uuid5(ID_NAMESPACE, meta.title + "\x1f" + meta.author))


def package_opf(meta: BookMeta, chapters: Sequence[EpubChapter], lang: str, cover: str | None) -> str:
    """The package document: metadata (durations per overlay and their sum), manifest, spine."""
    durations = [overlay_ms(ch) for ch in chapters]
    meta_lines = [f'<dc:identifier id="uid">{book_id(meta)}</dc:identifier>',
                  f"<dc:title>{xml_text(meta.title or 'book')}</dc:title>",
                  f"<dc:language>{lang}</dc:language>",
                  f'<meta property="dcterms:modified">{MODIFIED}</meta>']
    if meta.author:
        meta_lines.insert(2, f"<dc:creator>{xml_text(meta.author)}</dc:creator>")
    meta_lines += [f'<meta property="media:duration" refines="#mo-{ch.stem}">{clock(ms)}</meta>'
                   for ch, ms in zip(chapters, durations)]
    meta_lines += [f'<meta property="media:duration">{clock(sum(durations))}</meta>',
                   f'<meta property="media:active-class">{ACTIVE_CLASS}</meta>']
    items = ['<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
             '<item id="css" href="style.css" media-type="text/css"/>']
    spine = []
    if cover:
        mime = "image/jpeg" if cover.endswith(".jpg") else "image/png"
        items += [f'<item id="cover-image" href="{cover}" media-type="{mime}" properties="cover-image"/>',
                  '<item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>']
        meta_lines.append('<meta name="cover" content="cover-image"/>')
        spine.append('<itemref idref="cover"/>')
    for ch in chapters:
        items += [f'<item id="{ch.stem}" href="text/{ch.stem}.xhtml" media-type="application/xhtml+xml" '
                  f'media-overlay="mo-{ch.stem}"/>',
                  f'<item id="mo-{ch.stem}" href="smil/{ch.stem}.smil" media-type="application/smil+xml"/>',
                  f'<item id="a-{ch.stem}" href="audio/{ch.audio.name}" media-type="{AUDIO_MIME}"/>']
        spine.append(f'<itemref idref="{ch.stem}"/>')
    nl = "\n    "
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid" xml:lang="{lang}">\n'
            f'  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">\n    {nl.join(meta_lines)}\n  </metadata>\n'
            f'  <manifest>\n    {nl.join(items)}\n  </manifest>\n'
            f'  <spine>\n    {nl.join(spine)}\n  </spine>\n</package>\n')
