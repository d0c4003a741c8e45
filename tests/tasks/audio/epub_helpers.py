"""Reading back what tasks.audio.epub3 wrote, independently of it: the OPF, each chapter's SMIL clips and
XHTML text (lxml on the ZIP's bytes)."""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

NS = {"opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/",
      "smil": "http://www.w3.org/ns/SMIL", "x": "http://www.w3.org/1999/xhtml"}
_CLOCK = re.compile(r"^(\d+):(\d\d):(\d\d)\.(\d{3})$")


def clock_ms(value: str) -> int:
    """h:mm:ss.fff -> ms (the only form we write)."""
    h, m, s, ms = map(int, _CLOCK.match(value).groups())
    return ((h * 60 + m) * 60 + s) * 1000 + ms


@dataclass
class Chapter:
    href: str                       # the XHTML, inside the ZIP
    overlay: str                    # the SMIL, inside the ZIP
    clips: list[tuple[int, int, str, str]]   # (clipBegin ms, clipEnd ms, text fragment id, audio path)
    text: str                       # the XHTML body's text
    spans: dict[str, str]           # id -> text of every element with an id in the body
    duration_ms: int                # the overlay's media:duration


class Epub:
    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path)
        self.names = self.zip.namelist()
        container = etree.fromstring(self.zip.read("META-INF/container.xml"))
        self.opf_path = container.find(".//{*}rootfile").get("full-path")
        self.root = self.opf_path.rsplit("/", 1)[0] + "/"
        self.opf = etree.fromstring(self.zip.read(self.opf_path))

    def meta(self, prop: str, refines: str | None = None) -> list[str]:
        return [m.text for m in self.opf.iterfind("opf:metadata/opf:meta", NS)
                if m.get("property") == prop and m.get("refines") == refines]

    def dc(self, name: str) -> list[str]:
        return [e.text for e in self.opf.iterfind(f"opf:metadata/dc:{name}", NS)]

    def items(self) -> dict[str, etree._Element]:
        return {i.get("id"): i for i in self.opf.iterfind("opf:manifest/opf:item", NS)}

    def read(self, href: str) -> bytes:
        return self.zip.read(self.root + href)

    def chapters(self) -> list[Chapter]:
        """The spine's documents that have a media overlay, in reading order."""
        items = self.items()
        out = []
        for ref in self.opf.iterfind("opf:spine/opf:itemref", NS):
            item = items[ref.get("idref")]
            if not item.get("media-overlay"):
                continue
            mo = items[item.get("media-overlay")]
            smil = etree.fromstring(self.read(mo.get("href")))
            clips = []
            for par in smil.iterfind(".//smil:par", NS):
                t, a = par.find("smil:text", NS), par.find("smil:audio", NS)
                clips.append((clock_ms(a.get("clipBegin")), clock_ms(a.get("clipEnd")), t.get("src").split("#")[1],
                              a.get("src")))
            doc = etree.fromstring(self.read(item.get("href")))
            body = doc.find("x:body", NS)
            spans = {e.get("id"): "".join(e.itertext()) for e in body.iter() if e.get("id")}
            out.append(Chapter(item.get("href"), mo.get("href"), clips, "".join(body.itertext()), spans,
                               clock_ms(self.meta("media:duration", "#" + mo.get("id"))[0])))
        return out


def squash(text: str) -> str:
    """Text without whitespace (the XHTML's line breaks and indentation are layout)."""
    return re.sub(r"\s+", "", text)


def chapter_index(ch: Chapter) -> int:
    """The book's chapter index from the XHTML's name (text/cNNN.xhtml, NNN 1-based)."""
    return int(re.search(r"c(\d+)\.xhtml$", ch.href).group(1)) - 1


def assert_read_along(epub_path: Path, book_dir: Path, units: dict[int, list[str]]) -> Epub:
    """The acceptance checks on one EPUB: epubcheck 0 fatals / 0 errors / 0 warnings; every chapter's SMIL
    clips are its SRT cues (the same milliseconds, ±1 ms), each clip's span holds that cue's text; the XHTML's
    text is the chapter's original text (`units`: title and paragraphs) whitespace aside; each overlay's
    media:duration is the sum of its clips and the book's the sum of the overlays'."""
    from tests.epubcheck import epubcheck
    from tests.tasks.audio.test_package_ffmpeg import parse_srt

    result = epubcheck(epub_path)
    assert (result.fatals, result.errors, result.warnings) == (0, 0, 0), result.output
    epub = Epub(epub_path)
    chapters = epub.chapters()
    assert sorted(chapter_index(c) for c in chapters) == sorted(units), [c.href for c in chapters]
    for ch in chapters:
        i = chapter_index(ch)
        (srt,) = Path(book_dir).glob(f"{i + 1:03d} - *.srt")
        cues = parse_srt(srt.read_text(encoding="utf-8"))
        assert len(ch.clips) == len(cues), (ch.overlay, len(ch.clips), srt.name, len(cues))
        for (begin, end, frag, _), (start, stop, text) in zip(ch.clips, cues):
            assert abs(begin - start) <= 1 and abs(end - stop) <= 1, (srt.name, frag)
            assert squash(ch.spans[frag]) == squash(text), (ch.href, frag, ch.spans[frag], text)
        assert squash(ch.text) == squash("".join(units[i])), (ch.href, ch.text[:200], units[i][:3])
        assert ch.duration_ms == sum(e - b for b, e, _, _ in ch.clips), (ch.overlay, ch.duration_ms)
    total = clock_ms(epub.meta("media:duration")[0])
    assert total == sum(c.duration_ms for c in chapters), total
    return epub
