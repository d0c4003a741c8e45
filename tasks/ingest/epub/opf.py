"""The EPUB's package document (the OPF): its manifest, spine and metadata, the DRM check, the cover, and the
table of contents (EPUB3 nav, else the NCX) flattened in document order.

DRM: encryption.xml covering a content document (or anything that is not a font or media file) is refused;
font obfuscation (IDPF, Adobe) is not DRM."""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urldefrag

from tasks.errors import BookError
from tasks.ingest.common import clean_title, collapse_ws
from tasks.ingest.epub.archive import Archive, children, find_all, join_href, local_name, parse_meta_xml, parse_xhtml
from tasks.ingest.epub.content import element_types, visible_text
from tasks.ingest.matter import kind_of

MAX_COVER_BYTES = 16 * 1024 * 1024       # bytes; a larger cover image is left out
MAX_TOC_ENTRIES = 20_000                 # TOC entries read

FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
XHTML_TYPES = {"application/xhtml+xml", "text/html", "application/xml", "text/xml", "application/x-dtbook+xml"}


# ---------------------------------------------------------------------------------------------- package
@dataclass
class Item:
    id: str
    href: str            # resolved path inside the ZIP
    media_type: str
    properties: str = ""


@dataclass
class Package:
    opf_path: str
    items: dict[str, Item]
    spine: list[tuple[Item, bool]]      # (item, linear)
    toc_id: str
    meta: dict[str, str]
    cover_id: str = ""
    guide: list[tuple[str, str, str]] = field(default_factory=list)   # EPUB 2 <guide>: (type, path, fragment)


def read_package(z: Archive) -> Package:
    """The package document (found through container.xml, else the first .opf), DRM refused, a spine required."""
    pkg = _parse_opf(z, _find_opf(z))
    _check_drm(z, pkg)
    if not pkg.spine:
        raise BookError(z.path, "not an EPUB (package has no spine)")
    return pkg


def _find_opf(z: Archive) -> str:
    if z.has("META-INF/container.xml"):
        try:
            root = parse_meta_xml(z, "META-INF/container.xml")
            for rf in find_all(root, "rootfile"):
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


def _parse_opf(z: Archive, opf_path: str) -> Package:
    root = parse_meta_xml(z, opf_path)
    base = posixpath.dirname(opf_path)
    items: dict[str, Item] = {}
    for it in find_all(root, "item"):
        iid, href = it.get("id") or "", it.get("href") or ""
        if not iid or not href or iid in items:
            continue
        items[iid] = Item(iid, join_href(base, href), (it.get("media-type") or "").lower().strip(),
                          it.get("properties") or "")
    spine_el = next(iter(find_all(root, "spine")), None)
    spine: list[tuple[Item, bool]] = []
    toc_id = ""
    if spine_el is not None:
        toc_id = spine_el.get("toc") or ""
        for ref in children(spine_el, "itemref"):
            it = items.get(ref.get("idref") or "")
            if it is not None:
                spine.append((it, (ref.get("linear") or "yes").strip().lower() != "no"))
    meta: dict[str, str] = {}
    cover_id = ""
    md = next(iter(find_all(root, "metadata")), None)
    if md is not None:
        for el in md.iter():
            ln = local_name(el.tag)
            if ln in ("title", "creator", "language") and ln not in meta:
                txt = collapse_ws("".join(el.itertext())).strip()
                if txt:
                    meta[ln] = txt
            elif ln == "meta" and (el.get("name") or "").lower() == "cover":
                cover_id = el.get("content") or ""
    guide = [((ref.get("type") or "").strip().lower(), join_href(base, ref.get("href") or ""),
              urldefrag(ref.get("href") or "")[1])
             for g in find_all(root, "guide") for ref in children(g, "reference") if ref.get("href")]
    return Package(opf_path, items, spine, toc_id, meta, cover_id, guide)


def _check_drm(z: Archive, pkg: Package) -> None:
    """encryption.xml covering a content document (not only obfuscated fonts) means DRM."""
    if not z.has("META-INF/encryption.xml"):
        return
    try:
        root = parse_meta_xml(z, "META-INF/encryption.xml")
    except BookError as e:
        if "entit" in e.problem:
            raise
        return  # unreadable: nothing is known to be encrypted; encrypted content would read as no text
    content = {it.href for it, _ in pkg.spine}
    content |= {it.href for it in pkg.items.values() if it.media_type in XHTML_TYPES}
    for ed in find_all(root, "encrypteddata"):
        algo = ""
        for em in find_all(ed, "encryptionmethod"):
            algo = (em.get("Algorithm") or em.get("algorithm") or "").strip()
        uris = [cr.get("URI") or cr.get("uri") or "" for cr in find_all(ed, "cipherreference")]
        if algo in FONT_OBFUSCATION:
            continue
        for uri in uris:
            target = z.resolve(join_href("", uri))
            if target is not None and (target in content or not _is_font_or_media(target)):
                raise BookError(z.path, "EPUB is DRM-encrypted, cannot be read")


def _is_font_or_media(name: str) -> bool:
    return name.lower().rsplit(".", 1)[-1] in {"ttf", "otf", "woff", "woff2", "jpg", "jpeg", "png", "gif",
                                                "svg", "mp3", "mp4", "m4a", "webp", "css"}


# ---------------------------------------------------------------------------------------------- TOC
@dataclass
class TocEntry:
    path: str
    frag: str
    title: str
    depth: int = 0       # nesting level in the TOC (0 = top)


def read_toc(z: Archive, pkg: Package) -> list[TocEntry]:
    """EPUB3 nav (epub:type="toc"), else the NCX; flattened depth-first (document order), entries that point
    into a document only.  A broken nav/NCX only costs the titles ([]: chapters come from the headings); an entity
    bomb or a zip bomb in it is still refused."""
    try:
        return [e for e in _toc_entries(z, pkg) if e.path]
    except BookError as e:
        if "entit" in e.problem or "too large" in e.problem or "ratio" in e.problem:
            raise
        return []


def _toc_entries(z: Archive, pkg: Package) -> list[TocEntry]:
    nav = next((it for it in pkg.items.values() if "nav" in it.properties.split()), None)
    entries: list[TocEntry] = []
    if nav is not None and z.has(nav.href):
        entries = _read_nav(z, nav.href)
    if not entries:
        ncx = pkg.items.get(pkg.toc_id) or next(
            (it for it in pkg.items.values() if it.media_type == "application/x-dtbncx+xml"), None)
        if ncx is not None and z.has(ncx.href):
            entries = _read_ncx(z, ncx.href)
    return entries[:MAX_TOC_ENTRIES]


def _read_nav(z: Archive, name: str) -> list[TocEntry]:
    root = parse_xhtml(z, name)
    if root is None:
        return []
    navs = [n for n in root.iter() if local_name(n.tag) == "nav"]
    toc = next((n for n in navs if "toc" in element_types(n)), None)
    if toc is None:
        toc = navs[0] if len(navs) == 1 else None
    if toc is None:
        return []
    base = posixpath.dirname(name)
    out: list[TocEntry] = []

    def rec(el, depth: int):
        for c in el:
            if not isinstance(c.tag, str):
                continue
            tag = local_name(c.tag)
            if tag == "a" and c.get("href"):
                path, frag = urldefrag(c.get("href"))
                if not re.match(r"^[a-z][a-z0-9+.-]*:", path, re.I):  # external links are not chapters
                    title = clean_title("".join(visible_text(c)))
                    out.append(TocEntry(join_href(base, path) if path else name, unquote(frag), title, depth))
            elif len(out) < MAX_TOC_ENTRIES:
                rec(c, depth + (tag == "ol" or tag == "ul"))

    rec(toc, -1)
    return out


def _read_ncx(z: Archive, name: str) -> list[TocEntry]:
    root = parse_meta_xml(z, name)
    base = posixpath.dirname(name)
    out: list[TocEntry] = []
    navmap = next(iter(find_all(root, "navmap")), None)

    def rec(el, depth: int):
        for np_ in el:
            if local_name(np_.tag) != "navpoint" or len(out) >= MAX_TOC_ENTRIES:
                continue
            label = next(iter(children(np_, "navlabel")), None)
            content = next(iter(children(np_, "content")), None)
            if content is not None and content.get("src"):
                path, frag = urldefrag(content.get("src"))
                title = clean_title(_text_of(label)) if label is not None else ""
                out.append(TocEntry(join_href(base, path), unquote(frag), title, depth))
            rec(np_, depth + 1)

    if navmap is not None:
        rec(navmap, 0)
    return out


def _text_of(el) -> str:
    return collapse_ws("".join(el.itertext())).strip()


# ---------------------------------------------------------------------------------------------- matter
def matter_documents(z: Archive, pkg: Package) -> dict[str, tuple[str, str]]:
    """Whole documents that the EPUB 3 landmarks or the EPUB 2 guide name as matter (tasks/ingest/matter.py): path
    -> (kind, how).  Only entries without a fragment (one with a fragment may name a part of a document); the
    landmarks win over the guide.  A broken nav or guide names nothing."""
    out: dict[str, tuple[str, str]] = {}
    for kind_name, path, frag in pkg.guide:
        kind = kind_of([kind_name])
        if kind and path and not frag and (name := z.resolve(path)):
            out[name] = (kind, f'the guide\'s "{kind_name}"')
    nav = next((it for it in pkg.items.values() if "nav" in it.properties.split()), None)
    try:
        root = parse_xhtml(z, nav.href) if nav is not None and z.has(nav.href) else None
    except BookError as e:
        if "entit" in e.problem or "too large" in e.problem or "ratio" in e.problem:
            raise
        root = None
    if root is None:
        return out
    base = posixpath.dirname(nav.href) if nav is not None else ""
    for n in (n for n in root.iter() if local_name(n.tag) == "nav" and "landmarks" in element_types(n)):
        for a in (a for a in n.iter() if local_name(a.tag) == "a" and a.get("href")):
            path, frag = urldefrag(a.get("href"))
            kind = kind_of(element_types(a))
            if kind and path and not frag and not re.match(r"^[a-z][a-z0-9+.-]*:", path, re.I) \
                    and (name := z.resolve(join_href(base, path))):
                token = next(t for t in sorted(element_types(a)) if kind_of([t]) == kind)
                out[name] = (kind, f'the landmarks\' "{token}"')
    return out


# ---------------------------------------------------------------------------------------------- cover
def read_cover(z: Archive, pkg: Package) -> tuple[bytes | None, str]:
    """(image bytes, media type) of the EPUB3 cover-image item or the EPUB2 <meta name="cover">; (None, "") when
    there is none, or it is missing, not an image, too large or unreadable."""
    item = next((it for it in pkg.items.values() if "cover-image" in it.properties.split()), None)
    if item is None and pkg.cover_id:
        item = pkg.items.get(pkg.cover_id)
    if item is None or not item.media_type.startswith("image/") or not z.has(item.href):
        return None, ""
    try:
        return z.read(item.href, limit=MAX_COVER_BYTES), item.media_type
    except (BookError, KeyError):
        return None, ""
