"""An XHTML content document as blocks (paragraphs and headings, with the ids that start at them and the notes
they reference) and notes (footnotes, endnotes, asides: collected apart, never read mid-sentence).

Skipped: scripts, styles, ruby annotations (the base text stays), images, page numbers, line numbers, note marks,
page breaks.  `<pre>` and `<br>` in running text make one paragraph per line.  Short stand-alone paragraphs styled
as headings are kind "hp".  Blocks inside an element whose epub:type or role names a matter kind (navigation,
index, bibliography, copyright page … : tasks/ingest/matter.py) carry that kind, the innermost one; so do
Gutenberg's header, credit line and footer ("pg-license"): read_epub decides what is set aside.  Gutenberg's
plain-text renderings (`*.txt.html`) have their hard-wrapped CJK lines joined again."""
from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urldefrag

from tasks.ingest.common import PG_END_RE, PG_START_RE, clean_title, collapse_ws
from tasks.ingest.epub.archive import join_href, local_name
from tasks.ingest.matter import kind_of

MAX_HEADING_CHARS = 40                   # characters; a "styled paragraph heading" is no longer than this

OPS_NS = "http://www.idpf.org/2007/ops"  # epub:type
SKIP_TAGS = {"script", "style", "head", "title", "rt", "rp", "img", "svg", "math", "audio", "video", "object",
             "embed", "iframe", "canvas", "noscript", "template", "button", "input", "select", "textarea",
             "map", "area", "meta", "link", "source", "track", "picture"}
BLOCK_TAGS = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "dl", "dt", "dd", "blockquote",
              "pre", "section", "article", "header", "footer", "main", "figure", "figcaption", "table", "tr",
              "td", "th", "caption", "tbody", "thead", "tfoot", "address", "hr", "body", "hgroup", "details",
              "summary", "center", "nav", "aside", "fieldset", "legend", "form"}
HEADING_TAGS = {"h1": 1, "h2": 2, "h3": 3}
NOTE_TYPES = {"footnote", "endnote", "rearnote", "note", "footnotes", "endnotes", "rearnotes", "doc-footnote",
              "doc-endnote", "doc-endnotes", "doc-footnotes"}
NOTEREF_TYPES = {"noteref", "doc-noteref"}
PAGEBREAK_TYPES = {"pagebreak", "doc-pagebreak"}
NOTE_CONTAINER_TYPES = {"footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"}
SKIP_CLASSES = {"lnum", "linenum", "line-number", "linenumber", "pagenum", "page-number", "pageno"}
HEADING_CLASSES = {"chapter", "chaptertitle", "chapter-title", "title", "heading", "h1", "h2", "h3"}

_OPS_TYPE = f"{{{OPS_NS}}}type"
_NOTE_MARK_RE = re.compile(r"^[\[(（［〔]?(?:[0-9０-９]{1,3}|[*＊†‡§]{1,3}|[a-z]|[ivx]{1,4}"
                           r"|注[0-9０-９一二三四五六七八九十]{0,3})[\])）］〕]?$")
_MARGIN_RE = re.compile(r"margin-top\s*:\s*([0-9.]+)\s*(em|rem|ex)", re.I)
_SENTENCE_PUNCT = set("。．，,！!？?；;：:、…")
_PG_END_LINE_RE = re.compile(r"^\s*End of (?:the )?Project Gutenberg", re.I)
_PG_TXT_DOC_RE = re.compile(r"\.txt\.x?html?$", re.I)  # Gutenberg Ebookmaker's rendering of a plain-text book
_PG_CREDIT_RE = re.compile(r"^(Produced by|E-text prepared by|Transcribed from)\b", re.I)


# ---------------------------------------------------------------------------------------------- blocks
@dataclass
class Block:
    text: str
    kind: str = "p"                          # "p", "h1".."h3" (heading), "hp" (styled paragraph heading)
    anchors: tuple[str, ...] = ()            # element ids that start at this block (TOC fragments land here)
    refs: tuple[str, ...] = ()               # note targets ("path#id") referenced from this block
    linky: bool = False                      # all of its text is inside <a href> (a table-of-contents line)
    matter: str = ""                         # its matter kind (tasks/ingest/matter.py), "" for the body
    how: str = ""                            # how the kind was recognized (inspect's reason)
    barrier: bool = False                    # set by read_epub: matter was set aside or brought back before it


@dataclass
class Note:
    doc: str                                 # the document the note is in
    ids: set[str]                            # its own id and the ids inside it
    paras: list[str]
    used: bool = False


class _Extractor:
    """Walks an XHTML body: paragraphs (blocks) with their anchors and note references; notes (footnotes,
    endnotes, asides) are collected apart so they are never read mid-sentence."""

    def __init__(self, doc: str):
        self.doc = doc
        self.blocks: list[Block] = []
        self.notes: list[Note] = []
        self.buf: list[str] = []
        self.link_chars = 0                  # characters of self.buf that are inside <a href>
        self.anchors: list[str] = []
        self.refs: list[str] = []
        self.kind = "p"
        self.in_link = 0
        self.matter: list[tuple[str, str]] = []   # (kind, how) of the matter elements around, innermost last

    def flush(self):
        text = collapse_ws("".join(self.buf)).strip()
        if text:
            linky = self.link_chars >= len(text) * 0.9
            matter, how = self.matter[-1] if self.matter else ("", "")
            self.blocks.append(Block(text, self.kind, tuple(self.anchors), tuple(self.refs), linky, matter, how))
            self.anchors, self.refs = [], []
        self.buf = []
        self.link_chars = 0
        self.kind = "p"

    def text(self, t: str | None):
        if t:
            self.buf.append(t)
            if self.in_link:
                self.link_chars += len(t.strip())

    def walk(self, el):
        tag = local_name(el.tag)
        if not tag or tag in SKIP_TAGS or _classes(el) & SKIP_CLASSES:
            return
        types = element_types(el)
        if types & NOTEREF_TYPES or _looks_like_noteref(el, tag):
            href = el.get("href") or ""
            if href:
                path, frag = urldefrag(href)
                target = join_href(posixpath.dirname(self.doc), path) if path else self.doc
                self.refs.append(f"{target}#{unquote(frag)}")
            return  # the note mark is not read mid-sentence
        if types & PAGEBREAK_TYPES:
            return
        kind = kind_of(types) if tag in BLOCK_TAGS else ""    # a landmark's <a epub:type="index"> is a link
        if tag == "nav" and not kind:
            kind = "toc"                              # navigation without a type: a table of contents
        if kind:
            self.flush()
            token = next((t for t in sorted(types) if kind_of([t]) == kind), "")   # the token that named it
            self.matter.append((kind, f'marked "{token}"' if token else "a <nav> element"))
            try:
                self._walk(el, tag, types)
            finally:
                self.flush()
                self.matter.pop()
            return
        self._walk(el, tag, types)

    def _walk(self, el, tag: str, types: set[str]):
        if types & NOTE_TYPES or tag == "aside":
            self._note(el, container=bool(types & NOTE_CONTAINER_TYPES))
            return
        if tag == "pre":  # preformatted verse/code: one paragraph per source line
            self.flush()
            if el.get("id"):
                self.anchors.append(el.get("id"))
            for line in "".join(visible_text(el)).split("\n"):
                self.buf.append(line)
                self.flush()
            return
        el_id = el.get("id") or (el.get("name") if tag == "a" else None)
        block = tag in BLOCK_TAGS
        if block:
            self.flush()
        if el_id:
            self.anchors.append(el_id)
        if block and tag in HEADING_TAGS:
            self.kind = tag
        elif block and tag in ("p", "div") and _styled_heading(el):
            self.kind = "hp"
        link = tag == "a" and bool(el.get("href"))
        self.in_link += link
        if tag == "br":
            if self.kind == "p":
                self.flush()          # a line break in running text: lines of verse are paragraphs
            else:
                self.buf.append(" ")  # a line break inside a heading
        else:
            self.text(el.text)
        kind_here = self.kind
        each_child(el, self.walk, self.text)
        self.in_link -= link
        if block:
            if kind_here != "p" and self.kind == "p" and self.buf:
                self.kind = kind_here
            self.flush()

    def _note(self, el, container: bool):
        """A note (or a notes section: its own text is one note, each note inside another)."""
        self.flush()
        sub = _Extractor(self.doc)
        if container:
            sub.walk_children(el)
        else:
            sub.note_mode(el)
        sub.flush()
        ids = {el.get("id")} if el.get("id") else set()
        ids |= {a for b in sub.blocks for a in b.anchors}
        if sub.blocks:
            self.notes.append(Note(self.doc, ids, [b.text for b in sub.blocks]))
        self.notes.extend(sub.notes)

    def note_mode(self, el):
        # Inside a single note nested notes are just text.
        def plain(c) -> None:
            tag = local_name(c.tag)
            if tag and tag not in SKIP_TAGS and not (element_types(c) & NOTEREF_TYPES):
                self._walk_plain(c)

        each_child(el, plain, self.text)
        if el.text:
            self.buf.insert(0, el.text)

    def _walk_plain(self, el):
        tag = local_name(el.tag)
        if not tag or tag in SKIP_TAGS or element_types(el) & (NOTEREF_TYPES | PAGEBREAK_TYPES):
            return
        block = tag in BLOCK_TAGS
        if block:
            self.flush()
        if el.get("id"):
            self.anchors.append(el.get("id"))
        if tag == "br":
            self.flush()
        else:
            self.text(el.text)
        each_child(el, self._walk_plain, self.text)
        if block:
            self.flush()

    def walk_children(self, el):
        self.text(el.text)
        each_child(el, self.walk, self.text)


def extract(root, doc: str) -> tuple[list[Block], list[Note], bool]:
    """The blocks and notes of content document `doc` (its parsed tree `root`), Gutenberg's header and footer
    dropped; the bool says the Gutenberg footer was seen (nothing after it is the book)."""
    body = next((e for e in root.iter() if local_name(e.tag) == "body"), root)
    ex = _Extractor(doc)
    ex.walk(body)
    ex.flush()
    blocks = []
    for b in ex.blocks:
        if b.kind == "hp" and (len(b.text) > MAX_HEADING_CHARS or any(ch in _SENTENCE_PUNCT for ch in b.text)):
            b = Block(b.text, "p", b.anchors, b.refs, b.linky)
        blocks.append(b)
    if _PG_TXT_DOC_RE.search(doc):
        blocks = _join_wrapped_paragraphs(blocks)
    ended = False
    if any(PG_START_RE.search(b.text) or _is_pg_end(b.text) for b in blocks):
        blocks, ended = _mark_pg_boilerplate(blocks)
    return blocks, ex.notes, ended


def _join_wrapped_paragraphs(blocks: list[Block]) -> list[Block]:
    """Gutenberg's txt-to-html conversions turn hard-wrapped CJK lines into separate <p>s (其名</p><p>曰類):
    a paragraph ending in an ideograph continues into a paragraph starting with one."""
    groups: list[list[Block]] = []
    for b in blocks:
        prev = groups[-1][-1] if groups else None
        if (prev is not None and prev.kind == "p" and b.kind == "p"
                and (_is_ideograph(prev.text[-1]) or prev.text[-1] in "，、；：") and _is_ideograph(b.text[0])):
            groups[-1].append(b)
        else:
            groups.append([b])
    return [g[0] if len(g) == 1 else
            Block("".join(b.text for b in g), "p", tuple(a for b in g for a in b.anchors),
                  tuple(r for b in g for r in b.refs), all(b.linky for b in g))
            for g in groups]


def _is_ideograph(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x3FFFF or ch in "【】□囗〇"


def is_toc_page(blocks: list[Block]) -> bool:
    """An in-book table of contents (a page of links): not read aloud."""
    body = [b for b in blocks if b.kind == "p"]
    return len(body) >= 3 and sum(b.linky for b in body) >= 0.6 * len(body)


def _is_pg_end(text: str) -> bool:
    return bool(PG_END_RE.search(text) or _PG_END_LINE_RE.match(text))


def _mark_pg_boilerplate(blocks: list[Block]) -> tuple[list[Block], bool]:
    """Mark the Project Gutenberg header (up to '*** START OF ...' and the "Produced by" credit) and footer (from
    '*** END OF ...' / 'End of the Project Gutenberg ...') as matter "pg-license".  Returns (blocks, the footer was
    seen)."""
    start = 0
    for i, b in enumerate(blocks):
        if PG_START_RE.search(b.text):
            start = i + 1
    end = next((i for i in range(start, len(blocks)) if _is_pg_end(blocks[i].text)), len(blocks))
    if start and start < end and _PG_CREDIT_RE.match(blocks[start].text):
        start += 1
    return [pg_license(b, "its header" if i < start else "its footer and licence")
            if i < start or i >= end else b for i, b in enumerate(blocks)], end < len(blocks)


def pg_license(b: Block, how: str) -> Block:
    """The block marked as Gutenberg's boilerplate."""
    return Block(b.text, b.kind, b.anchors, b.refs, b.linky, "pg-license", how)


def doc_title(root) -> str:
    """The <title> of a content document (a fallback chapter title)."""
    head = next((e for e in root.iter() if local_name(e.tag) == "head"), None)
    if head is None:
        return ""
    t = next((e for e in head.iter() if local_name(e.tag) == "title"), None)
    return clean_title("".join(t.itertext())) if t is not None else ""


# ---------------------------------------------------------------------------------------------- elements
def element_types(el) -> set[str]:
    """epub:type and role tokens of an element (namespaced or, in sloppy books, a literal "epub:type")."""
    vals = []
    for k, v in el.attrib.items():
        lk = k.lower() if isinstance(k, str) else ""
        if lk in (_OPS_TYPE, "epub:type", "role"):
            vals.append(v)
    return {t.lower() for v in vals for t in v.split()}


def visible_text(el) -> list[str]:
    """Text pieces of an element without ruby annotations, scripts, etc."""
    out: list[str] = []

    def text(t: str | None) -> None:
        if t:
            out.append(t)

    def rec(e):
        if local_name(e.tag) not in SKIP_TAGS:
            text(e.text)
            each_child(e, rec, text)

    rec(el)
    return out


def each_child(el, visit: Callable, text: Callable[[str | None], None]) -> None:
    """The EPUB walkers' step: visit(child) for every element child of `el` in document order, text(its tail)
    after each (a comment's or processing instruction's tail too)."""
    for c in el:
        if isinstance(c.tag, str):
            visit(c)
        text(c.tail)


def _looks_like_noteref(el, tag: str) -> bool:
    """EPUB2-style note marks without epub:type: <sup><a href="#fn1">1</a></sup>, <a href="#n2"><sup>[2]</sup></a>,
    <a class="footnote" href="notes.html#n3">*</a>.  A short mark that links to a fragment."""
    if tag == "sup":
        kids = [c for c in el if isinstance(c.tag, str)]
        if len(kids) != 1 or local_name(kids[0].tag) != "a" or (el.text or "").strip():
            return False
        el = kids[0]
    elif tag != "a":
        return False
    href = el.get("href") or ""
    if "#" not in href or re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):
        return False
    text = "".join(visible_text(el)).strip()
    if not _NOTE_MARK_RE.match(text):
        return False
    inner_sup = any(local_name(c.tag) == "sup" for c in el.iter() if isinstance(c.tag, str))
    parent = el.getparent() if hasattr(el, "getparent") else None
    in_sup = tag == "sup" or (parent is not None and local_name(parent.tag) == "sup")
    noteish = bool(re.search(r"note|fn|ref", " ".join(filter(None, [el.get("class"), el.get("id"), href])), re.I))
    return in_sup or inner_sup or noteish


def _classes(el) -> set[str]:
    return set((el.get("class") or "").lower().split())


def _styled_heading(el) -> bool:
    """A paragraph with a big top margin (Gutenberg txt-to-html section titles) or a heading-like class."""
    m = _MARGIN_RE.search(el.get("style") or "")
    return bool(m and float(m.group(1)) >= 2.0) or bool(_classes(el) & HEADING_CLASSES)
