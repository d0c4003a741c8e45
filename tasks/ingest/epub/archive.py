"""The EPUB's ZIP read in memory with bounds, and its XML parsed safely; nothing is ever extracted to disk.

ZIP: entry names are normalized inside the archive (`../x` and `/x` never resolve), the first of duplicate names
wins, entries are bounded in count, size (declared and real), compression ratio and total decompressed size.
XML: container/OPF/NCX go through defusedxml (entity declarations and external references refused, never
expanded); XHTML through lxml without DTD loading, network access or entity resolution, after entity bombs are
refused and HTML named entities rewritten as character references."""
from __future__ import annotations

import io
import posixpath
import re
import zipfile
from html.entities import name2codepoint
from urllib.parse import unquote, urldefrag
from xml.etree.ElementTree import ParseError

from tasks.errors import BookError

MAX_ENTRIES = 10_000                     # ZIP entries; more is not a book
MAX_ENTRY_BYTES = 64 * 1024 * 1024       # bytes, decompressed size of one entry we read
MAX_TOTAL_BYTES = 512 * 1024 * 1024      # bytes, decompressed size of all entries we read, together
MAX_RATIO = 200                          # decompressed/compressed size of one entry (zip bombs reach 1000+)
RATIO_MIN_BYTES = 1 * 1024 * 1024        # bytes; entries smaller than this are not ratio-checked
MAX_ENTITY_DECLS = 64                    # entity declarations in one XHTML internal subset
ENTITY_SCAN_BYTES = 1024 * 1024          # bytes at the start of an XHTML file searched for entity declarations

_ENTITY_DECL_RE = re.compile(rb"<!ENTITY\s+(%\s+)?([^\s>]+)\s+(SYSTEM|PUBLIC|\"[^\"]*\"|'[^']*')", re.I)
_HTML_ENTITY_RE = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")
_NAMED_REF_RE = re.compile(rb"&[A-Za-z_:][\w.:-]*;")
_XML_ENTITIES = {b"amp", b"lt", b"gt", b"quot", b"apos"}


# ---------------------------------------------------------------------------------------------- ZIP
class Archive:
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
        self.total = 0                       # bytes decompressed so far, all entries together

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
        self._check_ratio(info.file_size, info, key)
        self._check_total(info.file_size)
        try:
            with self.zf.open(info) as f:
                # Declared sizes can lie: read at most limit+1 bytes and check the real size and ratio.
                out = f.read(limit + 1)
        except Exception as e:  # noqa: BLE001 — zipfile, zlib, bz2 and lzma errors of a damaged entry
            raise BookError(self.path, f"truncated or corrupt ZIP archive ({_short(e)}): {key}") from None
        if len(out) > limit:
            raise BookError(self.path, f"ZIP entry too large (over {limit} bytes): {key}")
        self._check_ratio(len(out), info, key)
        self._check_total(len(out))
        self.total += len(out)
        return out

    def _check_ratio(self, size: int, info: zipfile.ZipInfo, key: str) -> None:
        if size >= RATIO_MIN_BYTES and size > MAX_RATIO * max(1, info.compress_size):
            raise BookError(self.path, f"ZIP entry compression ratio too high (zip bomb?): {key}")

    def _check_total(self, more: int) -> None:
        if self.total + more > MAX_TOTAL_BYTES:
            raise BookError(self.path, f"book too large when decompressed (limit {MAX_TOTAL_BYTES} bytes)")


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


def join_href(base: str, href: str) -> str:
    """An href (URL-quoted, maybe with a fragment) relative to the folder `base`, as a path in the archive
    ("" for a bare fragment).  Paths that climb out are caught later by Archive.resolve."""
    path = unquote(urldefrag(href.strip())[0])
    if not path:
        return ""
    return posixpath.normpath(posixpath.join(base, path)) if base else posixpath.normpath(path)


def _short(e: BaseException) -> str:
    s = " ".join(str(e).split()) or type(e).__name__
    return s[:100]


# ---------------------------------------------------------------------------------------------- XML
def parse_meta_xml(z: Archive, name: str):
    """container.xml / OPF / NCX / encryption.xml through defusedxml: entity declarations and external
    references are refused (BookError), never expanded."""
    import defusedxml.ElementTree as DET
    from defusedxml import DefusedXmlException

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


def local_name(tag) -> str:
    """An element's tag without namespace or prefix, lower-cased ("" for comments and the like)."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def children(el, name: str) -> list:
    """The direct children of `el` with this local name."""
    return [c for c in el if local_name(c.tag) == name]


def find_all(el, name: str) -> list:
    """`el` and every element inside it with this local name, in document order."""
    return [c for c in el.iter() if local_name(c.tag) == name]


def _check_entities(data: bytes, z: Archive, name: str) -> None:
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

    def rep(m: re.Match) -> bytes:
        n = m.group(1)
        if n in _XML_ENTITIES:
            return m.group()
        cp = name2codepoint.get(n.decode("ascii", "replace"))
        return b"&#%d;" % cp if cp is not None else m.group()

    return _HTML_ENTITY_RE.sub(rep, data)


def parse_xhtml(z: Archive, name: str):
    """An XHTML content document as an lxml tree (XML parser in recover mode, else the HTML parser); None when
    neither parser makes anything of it."""
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
    if root is None or (local_name(root.tag) != "html" and not find_all(root, "body")):
        try:
            hparser = lhtml.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)
            root = lhtml.document_fromstring(data, parser=hparser)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError):
            return None
    return root
