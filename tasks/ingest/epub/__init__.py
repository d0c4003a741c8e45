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
    content.py   an XHTML document -> blocks and notes (matter and Gutenberg's boilerplate marked)
    chapters.py  blocks -> chapters, notes at the end of the chapter that cites them
    read_epub    (here) walks the spine, sets matter aside (tasks/ingest/matter.py) and puts the rest together"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

from tasks.book import Book, BookMeta, SetAside
from tasks.errors import BookError
from tasks.ingest.common import clean_title, is_pg_boilerplate_title
from tasks.ingest.epub.archive import Archive, parse_xhtml
from tasks.ingest.epub.chapters import Draft, attach_notes, finish, place
from tasks.ingest.epub.content import Block, Note, doc_title, extract, is_toc_page, pg_license
from tasks.ingest.epub.opf import XHTML_TYPES, TocEntry, matter_documents, read_cover, read_package, read_toc
from tasks.ingest.matter import PG_TITLES, MatterOptions, Numbering, reason
from tasks.ingest.txt import read_txt

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


@dataclass
class _Run:
    """Blocks of one matter kind set aside, where they were: after block `after` of the chapters' drafts."""
    number: int
    kind: str
    how: str
    title: str
    blocks: list[Block]
    draft: int                     # the draft whose text precedes it (-1: none)


def read_epub(data: bytes, path: str, *, notes: str = "end", matter: MatterOptions = MatterOptions()) -> Book:
    z = Archive(data, path)
    if not z.entries:
        raise BookError(path, "not an EPUB (empty ZIP archive)")
    texts = [n for n in z.entries if n.lower().endswith(".txt") and not n.startswith(("__MACOSX/", "META-INF/"))]
    if len(texts) == 1 and not any(n.lower().endswith(".opf") for n in z.entries):

        return read_txt(z.read(texts[0]), path, matter=matter)
    pkg = read_package(z)
    doc_kinds = matter_documents(z, pkg)
    numbering = Numbering(matter)
    runs: list[_Run] = []
    last_matter: str | None = None          # the matter kind of the last block seen ("" body), for the breaks
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
        if not linear or name is None or name in seen:
            continue
        seen.add(name)
        if item.media_type not in XHTML_TYPES and not name.lower().endswith((".html", ".xhtml", ".htm", ".xml")):
            continue  # images or other non-text items in the spine
        root = parse_xhtml(z, name)
        if root is None:
            continue
        blocks, doc_notes, ended = extract(root, name)
        if pg_over:                          # nothing after Gutenberg's footer is the book
            blocks, doc_notes = [pg_license(b, "after its footer") for b in blocks], []
        pg_over = pg_over or ended
        all_notes.extend(doc_notes)
        if name in doc_kinds:
            kind, how = doc_kinds[name]
            blocks = [b if b.matter else replace(b, matter=kind, how=how) for b in blocks]
        body = [i for i, b in enumerate(blocks) if not b.matter]
        if body and is_toc_page([blocks[i] for i in body]):
            blocks = [replace(b, matter="toc", how="a page of links") if i in set(body) else b
                      for i, b in enumerate(blocks)]
        fallback_title = doc_title(root)
        if not fallback_title or is_pg_boilerplate_title(fallback_title) or fallback_title == posixpath.basename(name):
            fallback_title = book_title
        kept, doc_runs, last_matter = _set_aside(blocks, numbering, last_matter, fallback_title)
        if not kept:
            for r in doc_runs:
                r.draft = len(chapters) - 1
            runs += doc_runs
            doc_end_chapter[name] = len(chapters) - 1
            continue
        if not doc_lang:
            doc_lang = (root.get(XML_LANG) or root.get("lang") or "").strip()
        n_before = len(chapters)
        went = place(chapters, [b for _, b in kept], toc_by_path.get(name, []), split_at_headings, fallback_title)
        for r in doc_runs:                   # each run sits in the chapter of the last kept block before it
            before = [w for (k, _), w in zip(kept, went, strict=True) if k < r.draft]
            r.draft = before[-1] if before else (went[0] if went[0] < n_before else went[0] - 1)
        runs += doc_runs
        doc_end_chapter[name] = len(chapters) - 1

    if notes == "end":
        attach_notes(chapters, all_notes, doc_end_chapter)
    out = finish(chapters)
    if not out:
        kinds = ", ".join(sorted({r.kind for r in runs}))
        raise BookError(path, "no readable text" + (f" (all of it set aside: {kinds}; --include brings it back)"
                                                    if runs else ""))
    numbering.check(path)
    filled = [bool([p for p in d.paras if p]) for d in chapters]
    set_aside = tuple(SetAside(r.number, r.kind, r.title, tuple(b.text for b in r.blocks),
                               sum(filled[:r.draft + 1]), reason(r.kind, r.how)) for r in runs)
    cover, cover_mime = read_cover(z, pkg)
    meta = BookMeta(title=book_title,
                    author=clean_title(pkg.meta.get("creator", "")),
                    language=clean_title(pkg.meta.get("language", "") or doc_lang)[:35] or "und",
                    source_path=str(path), source_format="epub", encoding="utf-8", cover=cover,
                    cover_mime=cover_mime)
    return Book(meta=meta, chapters=tuple(out), set_aside=set_aside)


def _set_aside(blocks: list[Block], numbering: Numbering, last: str | None,
               doc_title_: str) -> tuple[list[tuple[int, Block]], list[_Run], str | None]:
    """A document's blocks split into those read ((position, block), a block after a change of matter kind marked
    as a barrier) and the runs of one kind the options set aside (numbered; `draft` holds the position of the
    run's first block until read_epub places it).  `last`: the matter kind of the block before this document."""
    kept: list[tuple[int, Block]] = []
    runs: list[_Run] = []
    aside: bool | None = None                # the current run of a kind set aside: None none, False brought back
    for i, b in enumerate(blocks):
        change = last is not None and b.matter != last
        last = b.matter
        if b.matter and numbering.opts.sets_aside(b.matter):
            if change or aside is None:      # a new run
                number, aside = numbering.next()
                if aside:
                    runs.append(_Run(number, b.matter, b.how, b.text if b.kind != "p" else "", [], i))
            if aside:
                runs[-1].blocks.append(b)
                continue
        else:
            aside = None
        kept.append((i, replace(b, barrier=change) if change else b))
    for r in runs:                           # a run without a heading: its document's title
        r.title = r.title or (PG_TITLES[r.how != "its header"] if r.kind == "pg-license" else "") or (
            doc_title_ if len(r.blocks) == len(blocks) else f"{r.kind} in {doc_title_}")
    return kept, runs, last


def _stem(path: str) -> str:
    return posixpath.basename(path.replace("\\", "/")).rsplit(".", 1)[0]
