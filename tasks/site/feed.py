"""The output root's podcast feed, `OUT/feed.xml`: RSS 2.0 with the iTunes namespace tags that podcast apps and
Audiobookshelf read.  One item per finished book (library.DONE with its file present): the M4B, or the first
chapter file of the first format, as the enclosure (its exact size in bytes and its media type), the cover as
the item's image, pubDate when its packaging finished, and a link to its player page.  Deterministic: the same
books give the same bytes (lastBuildDate is the newest book's pubDate, not the clock)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime

from tasks.audio.encode import MEDIA_TYPES
from tasks.site.html import GENERATOR
from tasks.site.library import DONE, BookEntry

ITUNES = "http://www.itunes.com/dtds/podcast-1.0.dtd"
ATOM = "http://www.w3.org/2005/Atom"
CATEGORY = ("Arts", "Books")           # Apple's podcast category and subcategory for audiobooks
FEED_NAME = "feed.xml"


@dataclass(frozen=True)
class Episode:
    """A finished book as the feed lists it: its entry, with the enclosure and the time it finished that every
    listed book has."""
    book: BookEntry
    enclosure: str
    enclosure_format: str
    finished: datetime


def feed_items(entries: list[BookEntry]) -> list[Episode]:
    """The finished books the feed lists, newest first (then by folder)."""
    done = [Episode(e, e.enclosure, e.enclosure_format, e.finished) for e in entries
            if e.status == DONE and e.enclosure and e.enclosure_format is not None and e.finished]
    return sorted(done, key=lambda d: (-d.finished.timestamp(), d.book.folder))


def feed_xml(entries: list[BookEntry], title: str, link, language: str = "zh") -> bytes:
    """The feed document; `link(folder, name)` makes a file's URL (absolute with a base URL, else relative)."""
    ET.register_namespace("itunes", ITUNES)
    ET.register_namespace("atom", ATOM)
    items = feed_items(entries)
    rss = ET.Element("rss", {"version": "2.0"})
    ch = ET.SubElement(rss, "channel")
    _text(ch, "title", title)
    _text(ch, "link", link(None, "index.html"))
    if "://" in link(None, FEED_NAME):
        ET.SubElement(ch, f"{{{ATOM}}}link", {"href": link(None, FEED_NAME), "rel": "self",
                                              "type": "application/rss+xml"})
    description = f"{len(items)} audiobooks rendered with ChatTTS by {GENERATOR}."
    _text(ch, "description", description)
    _text(ch, "language", language)
    _text(ch, "generator", GENERATOR)
    if items:
        _text(ch, "lastBuildDate", format_datetime(items[0].finished, usegmt=True))
    _text(ch, f"{{{ITUNES}}}author", GENERATOR)
    _text(ch, f"{{{ITUNES}}}summary", description)
    _text(ch, f"{{{ITUNES}}}type", "episodic")
    _text(ch, f"{{{ITUNES}}}explicit", "false")
    ET.SubElement(ET.SubElement(ch, f"{{{ITUNES}}}category", {"text": CATEGORY[0]}), f"{{{ITUNES}}}category",
                  {"text": CATEGORY[1]})
    cover = next((d.book for d in items if d.book.cover), None)
    if cover is not None:
        ET.SubElement(ch, f"{{{ITUNES}}}image", {"href": link(cover.folder, cover.cover)})
        image = ET.SubElement(ch, "image")
        for tag, value in (("url", link(cover.folder, cover.cover)), ("title", title),
                           ("link", link(None, "index.html"))):
            _text(image, tag, value)
    for d in items:
        e = d.book
        it = ET.SubElement(ch, "item")
        _text(it, "title", e.title)
        page = link(e.folder, e.player) if e.player else link(None, "index.html")
        _text(it, "link", page)
        _text(it, "description", f"{e.title}{' — ' + e.author if e.author else ''}: {e.chapters} chapters. "
                                 f"Listen and read along: {page}")
        _text(it, "guid", f"{GENERATOR}:{e.folder}:{e.report_sha256[:16]}", isPermaLink="false")
        _text(it, "pubDate", format_datetime(d.finished, usegmt=True))
        ET.SubElement(it, "enclosure", {"url": link(e.folder, d.enclosure), "length": str(e.enclosure_bytes),
                                        "type": MEDIA_TYPES[d.enclosure_format]})
        _text(it, f"{{{ITUNES}}}title", e.title)
        _text(it, f"{{{ITUNES}}}author", e.author or GENERATOR)
        _text(it, f"{{{ITUNES}}}duration", str(round(e.seconds)))
        if e.cover:
            ET.SubElement(it, f"{{{ITUNES}}}image", {"href": link(e.folder, e.cover)})
        _text(it, f"{{{ITUNES}}}episodeType", "full")
        _text(it, f"{{{ITUNES}}}explicit", "false")
    ET.indent(rss, space=" ")
    return ET.tostring(rss, encoding="utf-8", xml_declaration=True) + b"\n"


def _text(parent: ET.Element, tag: str, text: str, **attrs) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    el.text = text
    return el
