"""EPUB 2/3 books read straight from the ZIP in memory (zipfile + lxml; never extracted to disk).

Reading order is the spine (linear items only); chapter titles come from the TOC (EPUB3 nav, else NCX).
A spine item without a TOC entry starts a chapter at its first h1-h3, or else continues the previous chapter.
When the TOC is useless (Gutenberg's 山海經: one entry, the licence), chapters are split at headings found in
the XHTML (h1-h3, or short stand-alone paragraphs styled as headings).

Safety: XML is parsed without DTD loading, network access or entity resolution (lxml for XHTML, defusedxml for
container/OPF/NCX); entity bombs are refused; ZIP entries are bounded in size and compression ratio; DRM
(encryption.xml covering content documents) is refused, font obfuscation is not DRM.

    archive.py   the bounded ZIP reader and safe XML/XHTML parsing
    opf.py       the package document (manifest, spine, metadata), DRM check, cover, TOC from nav/NCX
    content.py   an XHTML document -> blocks and notes (Gutenberg boilerplate dropped)
    chapters.py  blocks -> chapters, notes at the end of the chapter that cites them
    read_epub    (here) walks the spine and puts them together"""
from __future__ import annotations

import posixpath

from tasks.book import Book, BookMeta
from tasks.errors import BookError
from tasks.ingest.common import clean_title, is_pg_boilerplate_title
from tasks.ingest.epub.archive import Archive, parse_xhtml
from tasks.ingest.epub.chapters import Draft, attach_notes, finish, place
from tasks.ingest.epub.content import Note, doc_title, extract, is_toc_page
from tasks.ingest.epub.opf import XHTML_TYPES, TocEntry, read_cover, read_package, read_toc
from tasks.ingest.txt import read_txt

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def read_epub(data: bytes, path: str, *, notes: str = "end") -> Book:
    z = Archive(data, path)
    if not z.entries:
        raise BookError(path, "not an EPUB (empty ZIP archive)")
    texts = [n for n in z.entries if n.lower().endswith(".txt") and not n.startswith(("__MACOSX/", "META-INF/"))]
    if len(texts) == 1 and not any(n.lower().endswith(".opf") for n in z.entries):

        return read_txt(z.read(texts[0]), path)
    pkg = read_package(z)
    toc_by_path: dict[str, list[TocEntry]] = {}
    for e in read_toc(z, pkg):
        p = z.resolve(e.path)
        if p and e.title and not is_pg_boilerplate_title(e.title):
            toc_by_path.setdefault(p, []).append(e)
    # A TOC that names at most one document is no guide to chapters: split at the XHTML headings instead.
    split_at_headings = len(toc_by_path) <= 1

    book_title = clean_title(pkg.meta.get("title", "")) or _stem(path)
    doc_lang = ""  # the first content document's xml:lang: the language when the OPF names none
    chapters: list[Draft] = []
    all_notes: list[Note] = []
    doc_end_chapter: dict[str, int] = {}
    seen: set[str] = set()
    pg_over = False
    for item, linear in pkg.spine:
        name = z.resolve(item.href) if item.href else None
        if not linear or name is None or name in seen or pg_over:
            continue
        seen.add(name)
        if item.media_type not in XHTML_TYPES and not name.lower().endswith((".html", ".xhtml", ".htm", ".xml")):
            continue  # images or other non-text items in the spine
        root = parse_xhtml(z, name)
        if root is None:
            continue
        blocks, doc_notes, pg_over = extract(root, name)
        all_notes.extend(doc_notes)
        if not blocks or is_toc_page(blocks):
            doc_end_chapter[name] = len(chapters) - 1
            continue
        if not doc_lang:
            doc_lang = (root.get(XML_LANG) or root.get("lang") or "").strip()
        fallback_title = doc_title(root)
        if not fallback_title or is_pg_boilerplate_title(fallback_title) or fallback_title == posixpath.basename(name):
            fallback_title = book_title
        place(chapters, blocks, toc_by_path.get(name, []), split_at_headings, fallback_title)
        doc_end_chapter[name] = len(chapters) - 1

    if notes == "end":
        attach_notes(chapters, all_notes, doc_end_chapter)
    out = finish(chapters)
    if not out:
        raise BookError(path, "no readable text")
    cover, cover_mime = read_cover(z, pkg)
    meta = BookMeta(title=book_title,
                    author=clean_title(pkg.meta.get("creator", "")),
                    language=clean_title(pkg.meta.get("language", "") or doc_lang)[:35] or "und",
                    source_path=str(path), source_format="epub", encoding="utf-8", cover=cover,
                    cover_mime=cover_mime)
    return Book(meta=meta, chapters=tuple(out))


def _stem(path: str) -> str:
    return posixpath.basename(path.replace("\\", "/")).rsplit(".", 1)[0]
