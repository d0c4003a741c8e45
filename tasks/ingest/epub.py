"""EPUB 2/3 books read straight from the ZIP in memory (zipfile + lxml; never extracted to disk).

Reading order is the spine (linear items only); chapter titles come from the TOC (EPUB3 nav, else NCX).
A spine item without a TOC entry starts a chapter at its first h1-h3, or else continues the previous chapter.
When the TOC is useless (Gutenberg's 山海經: one entry, the licence), chapters are split at headings found in
the XHTML (h1-h3, or short stand-alone paragraphs styled as headings).

Safety: XML is parsed without DTD loading, network access or entity resolution (lxml for XHTML, defusedxml for
container/OPF/NCX); entity bombs are refused; ZIP entries are bounded in size and compression ratio; DRM
(encryption.xml covering content documents) is refused, font obfuscation is not DRM."""
from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from urllib.parse import unquote, urldefrag

from tasks.book import Book, BookMeta, Chapter
from tasks.errors import BookError
from tasks.ingest.common import PG_END_RE, PG_START_RE, clean_title, collapse_ws, is_pg_boilerplate_title

MAX_ENTRIES = 10_000                     # ZIP entries; more is not a book
MAX_ENTRY_BYTES = 64 * 1024 * 1024       # bytes, decompressed size of one entry we read
MAX_TOTAL_BYTES = 512 * 1024 * 1024      # bytes, decompressed size of all entries we read, together
MAX_RATIO = 200                          # decompressed/compressed size of one entry (zip bombs reach 1000+)
RATIO_MIN_BYTES = 1 * 1024 * 1024        # bytes; entries smaller than this are not ratio-checked
MAX_COVER_BYTES = 16 * 1024 * 1024       # bytes; a larger cover image is left out
MAX_ENTITY_DECLS = 64                    # entity declarations in one XHTML internal subset
ENTITY_SCAN_BYTES = 1024 * 1024          # bytes at the start of an XHTML file searched for entity declarations
MAX_TOC_ENTRIES = 20_000                 # TOC entries read
MAX_HEADING_CHARS = 40                   # characters; a "styled paragraph heading" is no longer than this
MAX_TOC_DEPTH = 2                        # TOC levels below a document's shallowest entry that start chapters

OPS_NS = "http://www.idpf.org/2007/ops"  # epub:type
FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
XHTML_TYPES = {"application/xhtml+xml", "text/html", "application/xml", "text/xml", "application/x-dtbook+xml"}

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
NAV_SKIP_TYPES = {"toc", "page-list", "landmarks", "doc-toc", "doc-pagelist"}
PAGEBREAK_TYPES = {"pagebreak", "doc-pagebreak"}
NOTE_CONTAINER_TYPES = {"footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"}
SKIP_CLASSES = {"lnum", "linenum", "line-number", "linenumber", "pagenum", "page-number", "pageno"}
HEADING_CLASSES = {"chapter", "chaptertitle", "chapter-title", "title", "heading", "h1", "h2", "h3"}

_ENTITY_DECL_RE = re.compile(rb"<!ENTITY\s+(%\s+)?([^\s>]+)\s+(SYSTEM|PUBLIC|\"[^\"]*\"|'[^']*')", re.I)
_HTML_ENTITY_RE = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")
_NAMED_REF_RE = re.compile(rb"&[A-Za-z_:][\w.:-]*;")
_XML_ENTITIES = {b"amp", b"lt", b"gt", b"quot", b"apos"}
_NOTE_MARK_RE = re.compile(r"^[\[(（［〔]?(?:[0-9０-９]{1,3}|[*＊†‡§]{1,3}|[a-z]|[ivx]{1,4}|注[0-9０-９一二三四五六七八九十]{0,3})"
                           r"[\])）］〕]?$")
_MARGIN_RE = re.compile(r"margin-top\s*:\s*([0-9.]+)\s*(em|rem|ex)", re.I)
_SENTENCE_PUNCT = set("。．，,！!？?；;：:、…")
_PG_END_LINE_RE = re.compile(r"^\s*End of (?:the )?Project Gutenberg", re.I)
_PG_TXT_DOC_RE = re.compile(r"\.txt\.x?html?$", re.I)  # Gutenberg Ebookmaker's rendering of a plain-text book
_PG_CREDIT_RE = re.compile(r"^(Produced by|E-text prepared by|Transcribed from)\b", re.I)


# ---------------------------------------------------------------------------------------------- ZIP
class _Zip:
    """Bounded, read-only access to the archive: names normalized, first entry of a duplicate name wins,
    no path ever touches the file system."""

    def __init__(self, data: bytes, path: str):
        self.path = path
        try:
            self.zf = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zf.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError, OSError):
            raise BookError(path, "truncated or corrupt ZIP archive") from None
        if len(infos) > MAX_ENTRIES:
            raise BookError(path, f"ZIP archive has too many entries ({len(infos)})")
        self.entries: dict[str, zipfile.ZipInfo] = {}
        self.lower: dict[str, str] = {}
        for info in infos:
            name = _norm_name(info.filename)
            if name is None or info.is_dir():
                continue
            self.entries.setdefault(name, info)  # duplicates: the first one wins, deterministically
            self.lower.setdefault(name.lower(), name)
        self.total = 0

    def resolve(self, name: str) -> str | None:
        n = _norm_name(name)
        if n is None:
            return None
        if n in self.entries:
            return n
        return self.lower.get(n.lower())  # case-insensitive fallback (books made on Windows)

    def has(self, name: str) -> bool:
        return self.resolve(name) is not None

    def read(self, name: str, limit: int | None = None) -> bytes:
        limit = MAX_ENTRY_BYTES if limit is None else limit
        key = self.resolve(name)
        if key is None:
            raise KeyError(name)
        info = self.entries[key]
        if info.flag_bits & 0x1:
            raise BookError(self.path, f"ZIP entry is password-encrypted: {key}")
        if info.file_size > limit:
            raise BookError(self.path, f"ZIP entry too large ({info.file_size} bytes, limit {limit}): {key}")
        if info.file_size >= RATIO_MIN_BYTES and info.file_size > MAX_RATIO * max(1, info.compress_size):
            raise BookError(self.path, f"ZIP entry compression ratio too high (zip bomb?): {key}")
        if self.total + info.file_size > MAX_TOTAL_BYTES:
            raise BookError(self.path, f"book too large when decompressed (limit {MAX_TOTAL_BYTES} bytes)")
        try:
            with self.zf.open(info) as f:
                # Declared sizes can lie: read at most limit+1 bytes and check the real size and ratio.
                out = f.read(limit + 1)
        except BookError:
            raise
        except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, OSError, RuntimeError) as e:
            raise BookError(self.path, f"truncated or corrupt ZIP archive ({_short(e)}): {key}") from None
        except Exception as e:  # zlib.error, bz2/lzma errors
            raise BookError(self.path, f"truncated or corrupt ZIP archive ({_short(e)}): {key}") from None
        if len(out) > limit:
            raise BookError(self.path, f"ZIP entry too large (over {limit} bytes): {key}")
        if len(out) >= RATIO_MIN_BYTES and len(out) > MAX_RATIO * max(1, info.compress_size):
            raise BookError(self.path, f"ZIP entry compression ratio too high (zip bomb?): {key}")
        self.total += len(out)
        if self.total > MAX_TOTAL_BYTES:
            raise BookError(self.path, f"book too large when decompressed (limit {MAX_TOTAL_BYTES} bytes)")
        return out


def _norm_name(name: str) -> str | None:
    """A ZIP entry name as a relative POSIX path inside the archive, or None if it would leave it."""
    name = name.replace("\\", "/")
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts) if parts else None


def _short(e: BaseException) -> str:
    s = " ".join(str(e).split()) or type(e).__name__
    return s[:100]


# ---------------------------------------------------------------------------------------------- XML
def _parse_meta_xml(z: _Zip, name: str):
    """container.xml / OPF / NCX / encryption.xml through defusedxml: entity declarations and external
    references are refused (BookError), never expanded."""
    import defusedxml.ElementTree as DET
    from defusedxml import DefusedXmlException
    from xml.etree.ElementTree import ParseError

    data = z.read(name)
    try:
        return DET.fromstring(data)
    except DefusedXmlException:
        raise BookError(z.path, f"XML entity declarations refused (possible entity bomb or external entity): "
                                f"{name}") from None
    except ParseError:
        # Broken XML: let lxml recover what it can, still without entities or network.
        from lxml import etree

        parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, load_dtd=False,
                                 huge_tree=False)
        try:
            root = etree.fromstring(data, parser) if data.strip() else None
        except etree.XMLSyntaxError:  # nothing recoverable ("Document is empty")
            root = None
        if root is None:
            raise BookError(z.path, f"unreadable XML: {name}") from None
        return _LxmlAsET(root)


class _LxmlAsET:
    """Minimal ElementTree-like view over an lxml element (iter/find/get/text), for recovered documents."""

    def __init__(self, el):
        self.el = el

    def iter(self, tag=None):
        for e in self.el.iter():
            if isinstance(e.tag, str) and (tag is None or e.tag == tag):
                yield _LxmlAsET(e)

    def get(self, key, default=None):
        return self.el.get(key, default)

    @property
    def tag(self):
        return self.el.tag

    @property
    def text(self):
        return self.el.text

    def itertext(self):
        return self.el.itertext()

    def __iter__(self):
        for e in self.el:
            if isinstance(e.tag, str):
                yield _LxmlAsET(e)


def _local(tag) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _children(el, name: str):
    return [c for c in el if _local(c.tag) == name]


def _all(el, name: str):
    return [c for c in el.iter() if _local(c.tag) == name]


def _text_of(el) -> str:
    return collapse_ws("".join(el.itertext())).strip()


def _check_entities(data: bytes, z: _Zip, name: str) -> None:
    """Refuse entity bombs: entity declarations whose values reference other entities, or too many of them.
    External entities are harmless here (never resolved) and are left in place unexpanded."""
    head = data[:ENTITY_SCAN_BYTES]
    if b"<!ENTITY" not in head and b"<!entity" not in head.lower():
        return
    decls = _ENTITY_DECL_RE.findall(head)
    if len(decls) > MAX_ENTITY_DECLS:
        raise BookError(z.path, f"XML entity expansion refused (entity bomb): {name}")
    for pct, _name, val in decls:
        if pct:
            raise BookError(z.path, f"XML parameter entities refused: {name}")
        if val[:1] in (b'"', b"'") and _NAMED_REF_RE.search(val):
            # An entity defined through other entities is how expansion bombs grow; character references
            # (<!ENTITY nbsp "&#160;">) are fine.
            raise BookError(z.path, f"XML entity expansion refused (entity bomb): {name}")


def _fix_html_entities(data: bytes) -> bytes:
    """XHTML without a DTD cannot use &nbsp; and friends: turn HTML named entities into numeric references
    (XML's five stay).  Unknown names are left as they are (the parser drops them)."""
    if b"&" not in data:
        return data
    from html.entities import name2codepoint

    def rep(m: re.Match) -> bytes:
        n = m.group(1)
        if n in _XML_ENTITIES:
            return m.group()
        cp = name2codepoint.get(n.decode("ascii", "replace"))
        return b"&#%d;" % cp if cp is not None else m.group()

    return _HTML_ENTITY_RE.sub(rep, data)


def _parse_xhtml(z: _Zip, name: str):
    """An XHTML content document as an lxml tree (XML parser in recover mode, else the HTML parser)."""
    from lxml import etree, html as lhtml

    data = z.read(name)
    _check_entities(data, z, name)
    data = _fix_html_entities(data)
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False, remove_comments=True, remove_pis=True)
    root = None
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        root = None
    if root is None or _local(root.tag) != "html" and not _all(root, "body"):
        try:
            hparser = lhtml.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)
            root = lhtml.document_fromstring(data, parser=hparser)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError):
            return None
    return root


# ---------------------------------------------------------------------------------------------- package
@dataclass
class _Item:
    id: str
    href: str            # resolved path inside the ZIP
    media_type: str
    properties: str = ""


@dataclass
class _Package:
    opf_path: str
    items: dict[str, _Item]
    spine: list[tuple[_Item, bool]]      # (item, linear)
    toc_id: str
    meta: dict[str, str]
    cover_id: str = ""


def _find_opf(z: _Zip) -> str:
    if z.has("META-INF/container.xml"):
        try:
            root = _parse_meta_xml(z, "META-INF/container.xml")
            for rf in _all(root, "rootfile"):
                fp = rf.get("full-path") or ""
                mt = (rf.get("media-type") or "").lower()
                if fp and (not mt or "oebps-package" in mt) and z.has(unquote(fp)):
                    return z.resolve(unquote(fp)) or ""
        except BookError as e:
            if "entity" in e.problem:
                raise
    opfs = sorted(n for n in z.entries if n.lower().endswith(".opf"))
    if opfs:
        return opfs[0]
    if z.has("[Content_Types].xml"):
        raise BookError(z.path, "not an EPUB (an Office Open XML document, e.g. .docx)")
    raise BookError(z.path, "not an EPUB (no package document found)")


def _read_package(z: _Zip, opf_path: str) -> _Package:
    root = _parse_meta_xml(z, opf_path)
    base = posixpath.dirname(opf_path)
    items: dict[str, _Item] = {}
    for it in _all(root, "item"):
        iid, href = it.get("id") or "", it.get("href") or ""
        if not iid or not href or iid in items:
            continue
        items[iid] = _Item(iid, _join_href(base, href), (it.get("media-type") or "").lower().strip(),
                           it.get("properties") or "")
    spine_el = next(iter(_all(root, "spine")), None)
    spine: list[tuple[_Item, bool]] = []
    toc_id = ""
    if spine_el is not None:
        toc_id = spine_el.get("toc") or ""
        for ref in _children(spine_el, "itemref"):
            it = items.get(ref.get("idref") or "")
            if it is not None:
                spine.append((it, (ref.get("linear") or "yes").strip().lower() != "no"))
    meta: dict[str, str] = {}
    cover_id = ""
    md = next(iter(_all(root, "metadata")), None)
    if md is not None:
        for el in md.iter():
            ln = _local(el.tag)
            if ln in ("title", "creator", "language") and ln not in meta:
                txt = collapse_ws("".join(el.itertext())).strip()
                if txt:
                    meta[ln] = txt
            elif ln == "meta" and (el.get("name") or "").lower() == "cover":
                cover_id = el.get("content") or ""
    return _Package(opf_path, items, spine, toc_id, meta, cover_id)


def _join_href(base: str, href: str) -> str:
    path = unquote(urldefrag(href.strip())[0])
    if not path:
        return ""
    return posixpath.normpath(posixpath.join(base, path)) if base else posixpath.normpath(path)


def _check_drm(z: _Zip, pkg: _Package) -> None:
    """encryption.xml covering a content document (not only obfuscated fonts) means DRM."""
    if not z.has("META-INF/encryption.xml"):
        return
    try:
        root = _parse_meta_xml(z, "META-INF/encryption.xml")
    except BookError as e:
        if "entit" in e.problem:
            raise
        return  # unreadable: nothing is known to be encrypted; encrypted content would read as no text
    content = {it.href for it, _ in pkg.spine}
    content |= {it.href for it in pkg.items.values() if it.media_type in XHTML_TYPES}
    for ed in _all(root, "encrypteddata"):
        algo = ""
        for em in _all(ed, "encryptionmethod"):
            algo = (em.get("Algorithm") or em.get("algorithm") or "").strip()
        uris = [cr.get("URI") or cr.get("uri") or "" for cr in _all(ed, "cipherreference")]
        if algo in FONT_OBFUSCATION:
            continue
        for uri in uris:
            target = z.resolve(_join_href("", uri))
            if target is not None and (target in content or not _is_font_or_media(target)):
                raise BookError(z.path, "EPUB is DRM-encrypted, cannot be read")


def _is_font_or_media(name: str) -> bool:
    return name.lower().rsplit(".", 1)[-1] in {"ttf", "otf", "woff", "woff2", "jpg", "jpeg", "png", "gif",
                                                "svg", "mp3", "mp4", "m4a", "webp", "css"}


# ---------------------------------------------------------------------------------------------- TOC
@dataclass
class _TocEntry:
    path: str
    frag: str
    title: str
    depth: int = 0       # nesting level in the TOC (0 = top)


def _read_toc(z: _Zip, pkg: _Package) -> list[_TocEntry]:
    """EPUB3 nav (epub:type="toc"), else the NCX; flattened depth-first (document order)."""
    nav = next((it for it in pkg.items.values() if "nav" in it.properties.split()), None)
    entries: list[_TocEntry] = []
    if nav is not None and z.has(nav.href):
        entries = _read_nav(z, nav.href)
    if not entries:
        ncx = pkg.items.get(pkg.toc_id) or next(
            (it for it in pkg.items.values() if it.media_type == "application/x-dtbncx+xml"), None)
        if ncx is not None and z.has(ncx.href):
            entries = _read_ncx(z, ncx.href)
    return entries[:MAX_TOC_ENTRIES]


def _read_nav(z: _Zip, name: str) -> list[_TocEntry]:
    root = _parse_xhtml(z, name)
    if root is None:
        return []
    navs = [n for n in root.iter() if _local(n.tag) == "nav"]
    toc = next((n for n in navs if "toc" in _types(n)), None)
    if toc is None:
        toc = navs[0] if len(navs) == 1 else None
    if toc is None:
        return []
    base = posixpath.dirname(name)
    out: list[_TocEntry] = []

    def rec(el, depth: int):
        for c in el:
            if not isinstance(c.tag, str):
                continue
            tag = _local(c.tag)
            if tag == "a" and c.get("href"):
                path, frag = urldefrag(c.get("href"))
                if not re.match(r"^[a-z][a-z0-9+.-]*:", path, re.I):  # external links are not chapters
                    title = clean_title("".join(_visible_text(c)))
                    out.append(_TocEntry(_join_href(base, path) if path else name, unquote(frag), title, depth))
            elif len(out) < MAX_TOC_ENTRIES:
                rec(c, depth + (tag == "ol" or tag == "ul"))

    rec(toc, -1)
    return out


def _read_ncx(z: _Zip, name: str) -> list[_TocEntry]:
    root = _parse_meta_xml(z, name)
    base = posixpath.dirname(name)
    out: list[_TocEntry] = []
    navmap = next(iter(_all(root, "navmap")), None)

    def rec(el, depth: int):
        for np_ in el:
            if _local(np_.tag) != "navpoint" or len(out) >= MAX_TOC_ENTRIES:
                continue
            label = next(iter(_children(np_, "navlabel")), None)
            content = next(iter(_children(np_, "content")), None)
            if content is not None and content.get("src"):
                path, frag = urldefrag(content.get("src"))
                title = clean_title(_text_of(label)) if label is not None else ""
                out.append(_TocEntry(_join_href(base, path), unquote(frag), title, depth))
            rec(np_, depth + 1)

    if navmap is not None:
        rec(navmap, 0)
    return out


def _types(el) -> set[str]:
    """epub:type and role tokens of an element (namespaced or, in sloppy books, a literal "epub:type")."""
    vals = []
    for k, v in el.attrib.items():
        lk = k.lower() if isinstance(k, str) else ""
        if lk in (_OPS_TYPE, "epub:type", "role"):
            vals.append(v)
    return {t.lower() for v in vals for t in v.split()}


_OPS_TYPE = "{%s}type" % OPS_NS


def _visible_text(el) -> list[str]:
    """Text pieces of an element without ruby annotations, scripts, etc."""
    out: list[str] = []

    def rec(e):
        if _local(e.tag) in SKIP_TAGS:
            return
        if e.text:
            out.append(e.text)
        for c in e:
            if isinstance(c.tag, str):
                rec(c)
            if c.tail:
                out.append(c.tail)

    rec(el)
    return out


# ---------------------------------------------------------------------------------------------- content
@dataclass
class _Block:
    text: str
    kind: str = "p"                          # "p", "h1".."h3" (heading), "hp" (styled paragraph heading)
    anchors: tuple[str, ...] = ()            # element ids that start at this block (TOC fragments land here)
    refs: tuple[str, ...] = ()               # note targets ("path#id") referenced from this block
    linky: bool = False                      # all of its text is inside <a href> (a table-of-contents line)


@dataclass
class _Note:
    doc: str                                 # the document the note is in
    ids: set[str]                            # its own id and the ids inside it
    paras: list[str]
    used: bool = False


class _Extractor:
    """Walks an XHTML body: paragraphs (blocks) with their anchors and note references; notes (footnotes,
    endnotes, asides) are collected apart so they are never read mid-sentence."""

    def __init__(self, doc: str):
        self.doc = doc
        self.blocks: list[_Block] = []
        self.notes: list[_Note] = []
        self.buf: list[str] = []
        self.link_chars = 0                  # characters of self.buf that are inside <a href>
        self.anchors: list[str] = []
        self.refs: list[str] = []
        self.kind = "p"
        self.in_link = 0

    def flush(self):
        text = collapse_ws("".join(self.buf)).strip()
        if text:
            linky = self.link_chars >= len(text) * 0.9
            self.blocks.append(_Block(text, self.kind, tuple(self.anchors), tuple(self.refs), linky))
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
        tag = _local(el.tag)
        if not tag or tag in SKIP_TAGS or _classes(el) & SKIP_CLASSES:
            return
        types = _types(el)
        if types & NOTEREF_TYPES or _looks_like_noteref(el, tag):
            href = el.get("href") or ""
            if href:
                path, frag = urldefrag(href)
                target = _join_href(posixpath.dirname(self.doc), path) if path else self.doc
                self.refs.append(f"{target}#{unquote(frag)}")
            return  # the note mark is not read mid-sentence
        if types & PAGEBREAK_TYPES:
            return
        if tag == "nav" and (types & NAV_SKIP_TYPES or not types):
            return
        if types & NOTE_TYPES or tag == "aside":
            self._note(el, container=bool(types & NOTE_CONTAINER_TYPES))
            return
        if tag == "pre":  # preformatted verse/code: one paragraph per source line
            self.flush()
            if el.get("id"):
                self.anchors.append(el.get("id"))
            for line in "".join(_visible_text(el)).split("\n"):
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
        for c in el:
            if isinstance(c.tag, str):
                self.walk(c)
            self.text(c.tail)
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
            self.notes.append(_Note(self.doc, ids, [b.text for b in sub.blocks]))
        self.notes.extend(sub.notes)

    def note_mode(self, el):
        # Inside a single note nested notes are just text.
        for c in el:
            if isinstance(c.tag, str):
                tag = _local(c.tag)
                if tag and tag not in SKIP_TAGS and not (_types(c) & NOTEREF_TYPES):
                    self._walk_plain(c)
            self.text(c.tail)
        if el.text:
            self.buf.insert(0, el.text)

    def _walk_plain(self, el):
        tag = _local(el.tag)
        if not tag or tag in SKIP_TAGS or _types(el) & (NOTEREF_TYPES | PAGEBREAK_TYPES):
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
        for c in el:
            if isinstance(c.tag, str):
                self._walk_plain(c)
            self.text(c.tail)
        if block:
            self.flush()

    def walk_children(self, el):
        self.text(el.text)
        for c in el:
            if isinstance(c.tag, str):
                self.walk(c)
            self.text(c.tail)


def _looks_like_noteref(el, tag: str) -> bool:
    """EPUB2-style note marks without epub:type: <sup><a href="#fn1">1</a></sup>, <a href="#n2"><sup>[2]</sup></a>,
    <a class="footnote" href="notes.html#n3">*</a>.  A short mark that links to a fragment."""
    if tag == "sup":
        kids = [c for c in el if isinstance(c.tag, str)]
        if len(kids) != 1 or _local(kids[0].tag) != "a" or (el.text or "").strip():
            return False
        el = kids[0]
    elif tag != "a":
        return False
    href = el.get("href") or ""
    if "#" not in href or re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):
        return False
    text = "".join(_visible_text(el)).strip()
    if not _NOTE_MARK_RE.match(text):
        return False
    inner_sup = any(_local(c.tag) == "sup" for c in el.iter() if isinstance(c.tag, str))
    parent = el.getparent() if hasattr(el, "getparent") else None
    in_sup = tag == "sup" or (parent is not None and _local(parent.tag) == "sup")
    noteish = bool(re.search(r"note|fn|ref", " ".join(filter(None, [el.get("class"), el.get("id"), href])), re.I))
    return in_sup or inner_sup or noteish


def _classes(el) -> set[str]:
    return set((el.get("class") or "").lower().split())


def _styled_heading(el) -> bool:
    """A paragraph with a big top margin (Gutenberg txt-to-html section titles) or a heading-like class."""
    m = _MARGIN_RE.search(el.get("style") or "")
    return bool(m and float(m.group(1)) >= 2.0) or bool(_classes(el) & HEADING_CLASSES)


def _extract(root, doc: str) -> tuple[list[_Block], list[_Note]]:
    body = next((e for e in root.iter() if _local(e.tag) == "body"), root)
    ex = _Extractor(doc)
    ex.walk(body)
    ex.flush()
    blocks = []
    for b in ex.blocks:
        if b.kind == "hp" and (len(b.text) > MAX_HEADING_CHARS or any(ch in _SENTENCE_PUNCT for ch in b.text)):
            b = _Block(b.text, "p", b.anchors, b.refs, b.linky)
        blocks.append(b)
    return blocks, ex.notes


def _join_wrapped_paragraphs(blocks: list[_Block]) -> list[_Block]:
    """Gutenberg's txt-to-html conversions turn hard-wrapped CJK lines into separate <p>s (其名</p><p>曰類):
    a paragraph ending in an ideograph continues into a paragraph starting with one."""
    groups: list[list[_Block]] = []
    for b in blocks:
        prev = groups[-1][-1] if groups else None
        if (prev is not None and prev.kind == "p" and b.kind == "p"
                and (_is_ideograph(prev.text[-1]) or prev.text[-1] in "，、；：") and _is_ideograph(b.text[0])):
            groups[-1].append(b)
        else:
            groups.append([b])
    return [g[0] if len(g) == 1 else
            _Block("".join(b.text for b in g), "p", tuple(a for b in g for a in b.anchors),
                   tuple(r for b in g for r in b.refs),
                   all(b.linky for b in g))
            for g in groups]


def _is_ideograph(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x3FFFF or ch in "【】□囗〇"


def _is_toc_page(blocks: list[_Block]) -> bool:
    """An in-book table of contents (a page of links): not read aloud."""
    body = [b for b in blocks if b.kind == "p"]
    return len(body) >= 3 and sum(b.linky for b in body) >= 0.6 * len(body)


def _is_pg_end(text: str) -> bool:
    return bool(PG_END_RE.search(text) or _PG_END_LINE_RE.match(text))


def _drop_pg_boilerplate(blocks: list[_Block]) -> tuple[list[_Block], bool]:
    """Drop the Project Gutenberg header (up to '*** START OF ...' and the "Produced by" credit) and footer
    (from '*** END OF ...' / 'End of the Project Gutenberg ...').  Returns (blocks, the footer was seen)."""
    start = 0
    for i, b in enumerate(blocks):
        if PG_START_RE.search(b.text):
            start = i + 1
    out = blocks[start:]
    ended = False
    for i, b in enumerate(out):
        if _is_pg_end(b.text):
            out, ended = out[:i], True
            break
    if start and out and _PG_CREDIT_RE.match(out[0].text):
        out = out[1:]
    return out, ended


# ---------------------------------------------------------------------------------------------- book
@dataclass
class _Chap:
    title: str
    paras: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)


def read_epub(data: bytes, path: str, *, notes: str = "end") -> Book:
    z = _Zip(data, path)
    if not z.entries:
        raise BookError(path, "not an EPUB (empty ZIP archive)")
    texts = [n for n in z.entries if n.lower().endswith(".txt") and not n.startswith(("__MACOSX/", "META-INF/"))]
    if len(texts) == 1 and not any(n.lower().endswith(".opf") for n in z.entries):
        from tasks.ingest.txt import read_txt  # a zipped TXT novel, as they are often distributed

        return read_txt(z.read(texts[0]), path)
    opf = _find_opf(z)
    pkg = _read_package(z, opf)
    _check_drm(z, pkg)
    if not pkg.spine:
        raise BookError(path, "not an EPUB (package has no spine)")
    try:
        toc = [e for e in _read_toc(z, pkg) if e.path]
    except BookError as e:
        if "entit" in e.problem or "too large" in e.problem or "ratio" in e.problem:
            raise
        toc = []  # a broken nav/NCX only costs the titles: chapters come from the headings
    toc_by_path: dict[str, list[_TocEntry]] = {}
    for e in toc:
        p = z.resolve(e.path)
        if p and e.title and not is_pg_boilerplate_title(e.title):
            toc_by_path.setdefault(p, []).append(e)
    # A TOC that names at most one document is no guide to chapters: split at the XHTML headings instead.
    split_at_headings = len(toc_by_path) <= 1

    book_title = clean_title(pkg.meta.get("title", "")) or _stem(path)
    doc_lang = ""  # the first content document's xml:lang: the language when the OPF names none
    chapters: list[_Chap] = []
    all_notes: list[_Note] = []
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
        root = _parse_xhtml(z, name)
        if root is None:
            continue
        blocks, doc_notes = _extract(root, name)
        if _PG_TXT_DOC_RE.search(name):
            blocks = _join_wrapped_paragraphs(blocks)
        if any(PG_START_RE.search(b.text) or _is_pg_end(b.text) for b in blocks):
            blocks, pg_over = _drop_pg_boilerplate(blocks)
        all_notes.extend(doc_notes)
        if not blocks or _is_toc_page(blocks):
            doc_end_chapter[name] = len(chapters) - 1
            continue
        if not doc_lang:
            doc_lang = (root.get("{http://www.w3.org/XML/1998/namespace}lang") or root.get("lang") or "").strip()
        doc_title = _doc_title(root)
        if not doc_title or is_pg_boilerplate_title(doc_title) or doc_title == posixpath.basename(name):
            doc_title = book_title
        _place(chapters, blocks, toc_by_path.get(name, []), split_at_headings, doc_title)
        doc_end_chapter[name] = len(chapters) - 1

    if notes == "end":
        _attach_notes(chapters, all_notes, doc_end_chapter)
    out = []
    for ch in chapters:
        paras = [p for p in ch.paras if p]
        if paras:
            out.append(Chapter(index=len(out), title=clean_title(ch.title) or str(len(out) + 1),
                               paragraphs=tuple(paras)))
    if not out:
        raise BookError(path, "no readable text")
    cover, cover_mime = _cover(z, pkg)
    meta = BookMeta(title=book_title,
                    author=clean_title(pkg.meta.get("creator", "")),
                    language=clean_title(pkg.meta.get("language", "") or doc_lang)[:35] or "und",
                    source_path=str(path), source_format="epub", encoding="utf-8", cover=cover,
                    cover_mime=cover_mime)
    return Book(meta=meta, chapters=tuple(out))


def _doc_title(root) -> str:
    """The <title> of a content document (a fallback chapter title)."""
    head = next((e for e in root.iter() if _local(e.tag) == "head"), None)
    if head is None:
        return ""
    t = next((e for e in head.iter() if _local(e.tag) == "title"), None)
    return clean_title("".join(t.itertext())) if t is not None else ""


def _place(chapters: list[_Chap], blocks: list[_Block], entries: list[_TocEntry], split: bool,
           fallback_title: str) -> None:
    """Add one spine document's blocks to the chapters.  Its TOC entries (the shallowest ones) start chapters
    at their fragments; without entries the first heading starts one, else the text continues the previous
    chapter (a Gutenberg "Split on p" chunk)."""
    starts: dict[int, str] = {}
    if entries:
        top = min(e.depth for e in entries)
        where: dict[str, int] = {}
        for i, b in enumerate(blocks):
            for a in b.anchors:
                where.setdefault(a, i)
        for e in (e for e in entries if e.depth <= top + MAX_TOC_DEPTH):
            idx = 0
            if e.frag:
                idx = where.get(e.frag, -1)
                if idx < 0 and len(entries) == 1:
                    idx = 0
            if idx >= 0 and idx not in starts:
                starts[idx] = e.title
    elif split:
        level = _top_heading_level(blocks)
        starts = {i: b.text for i, b in enumerate(blocks) if b.kind == level}
    else:
        first = next((i for i, b in enumerate(blocks) if b.kind in HEADING_TAGS), None)
        if first is not None and (not chapters or first <= 2):
            starts[first] = blocks[first].text
    if not chapters and 0 not in starts:
        lead = blocks[: min(starts) if starts else len(blocks)]
        starts[0] = next((b.text for b in lead if b.kind != "p"), "") or fallback_title
    cut = sorted(starts)
    if not cut or cut[0] > 0:  # text before the first start continues the previous chapter
        head = blocks[: cut[0]] if cut else blocks
        chapters[-1].paras.extend(b.text for b in head)
        chapters[-1].refs.extend(r for b in head for r in b.refs)
    for k, i in enumerate(cut):
        seg = blocks[i: cut[k + 1] if k + 1 < len(cut) else len(blocks)]
        title = starts[i]
        seg = _drop_title_blocks(seg, title)
        chapters.append(_Chap(title, [b.text for b in seg], [r for b in seg for r in b.refs]))


def _drop_title_blocks(seg: list[_Block], title: str) -> list[_Block]:
    """Leading blocks that spell the chapter title (a heading equal to the TOC label, or CHAPTER I. / START IN
    LIFE split over two headings) are not read again as paragraphs."""
    key = _squash(title)
    if not key:
        return seg
    acc, drop = "", 0
    for n, b in enumerate(seg[:3], 1):
        acc += _squash(b.text)
        if acc == key:
            return seg[n:]
        if b.kind == "p" or not key.startswith(acc):
            break
        drop = n  # headings that are a shorter form of the title (第一回 for "第一回 始")
    return seg[drop:]


def _squash(s: str) -> str:
    return re.sub(r"[\W_]+", "", s).lower()


def _attach_notes(chapters: list[_Chap], all_notes: list[_Note], doc_end_chapter: dict[str, int]) -> None:
    """notes="end": each note is read at the end of the chapter that first references it; a note nobody
    references is read at the end of the chapter its own document ends in."""
    by_id: dict[str, _Note] = {}
    for n in all_notes:
        for i in n.ids:
            by_id.setdefault(f"{n.doc}#{i}", n)
    for ch in chapters:
        for ref in ch.refs:
            n = by_id.get(ref)
            if n is not None and not n.used:
                ch.paras.extend(n.paras)
                n.used = True
    for n in all_notes:
        if not n.used and chapters:
            k = doc_end_chapter.get(n.doc, len(chapters) - 1)
            chapters[max(0, k)].paras.extend(n.paras)
            n.used = True


def _top_heading_level(blocks: list[_Block]) -> str:
    kinds = {b.kind for b in blocks}
    return next((k for k in ("h1", "h2", "h3", "hp") if k in kinds), "none")


def _cover(z: _Zip, pkg: _Package) -> tuple[bytes | None, str]:
    item = next((it for it in pkg.items.values() if "cover-image" in it.properties.split()), None)
    if item is None and pkg.cover_id:
        item = pkg.items.get(pkg.cover_id)
    if item is None or not item.media_type.startswith("image/") or not z.has(item.href):
        return None, ""
    try:
        return z.read(item.href, limit=MAX_COVER_BYTES), item.media_type
    except (BookError, KeyError):
        return None, ""


def _stem(path: str) -> str:
    return posixpath.basename(path.replace("\\", "/")).rsplit(".", 1)[0]
