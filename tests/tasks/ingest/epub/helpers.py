"""Builders for EPUB tests: a ZIP from entries, a whole EPUB from XHTML bodies, loading bytes as a book."""
from __future__ import annotations

import io
import itertools
import warnings
import zipfile
from pathlib import Path

from tasks.book import Book
from tasks.ingest import load_book

XHTML = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>{title}</title><style>p {{ color: red }}</style></head>
<body>{body}</body></html>"""


def zip_bytes(entries: list[tuple[str, bytes | str]], *, mimetype: bool = True,
              compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP with entries in this order (duplicates allowed: zipfile only warns)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(buf, "w") as zf:
            if mimetype:
                zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
            for name, data in entries:
                zf.writestr(name, data, compress_type=compression)
    return buf.getvalue()


def make_epub(docs: list[tuple[str, str]], *, toc: list[tuple[str, str]] | list | None = None, ncx: bool = False,
              nav: bool = True, linear: dict[str, str] | None = None, meta: str = "", manifest_extra: str = "",
              extra: list[tuple[str, bytes | str]] | None = None, opf_head: str = "",
              raw_docs: dict[str, str] | None = None, guide: str = "") -> bytes:
    """docs: (file name, body XHTML) in spine order.  toc: (href, title) entries, or nested lists
    [(href, title, [children...])]; None = one entry per doc titled from the file name.  guide: an EPUB 2 <guide>'s
    <reference> elements."""
    toc = [(n, n.rsplit(".", 1)[0]) for n, _ in docs] if toc is None else toc
    linear = linear or {}
    raw_docs = raw_docs or {}
    files: list[tuple[str, bytes | str]] = [("META-INF/container.xml", """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>""")]
    items, refs = [], []
    for i, (name, body) in enumerate(docs):
        items.append(f'<item id="d{i}" href="{name}" media-type="application/xhtml+xml"/>')
        lin = f' linear="{linear[name]}"' if name in linear else ""
        refs.append(f'<itemref idref="d{i}"{lin}/>')
        files.append((f"OEBPS/{name}", raw_docs.get(name) or XHTML.format(title=name, body=body)))

    def nav_ol(entries) -> str:
        lis = []
        for e in entries:
            kids = f"<ol>{nav_ol(e[2])}</ol>" if len(e) > 2 and e[2] else ""
            lis.append(f'<li><a href="{e[0]}">{e[1]}</a>{kids}</li>')
        return "".join(lis)

    play_order = itertools.count(1)                      # one count over the whole tree, in document order

    def ncx_points(entries) -> str:
        pts = []
        for e in entries:
            n = next(play_order)
            kids = ncx_points(e[2]) if len(e) > 2 and e[2] else ""
            pts.append(f'<navPoint id="n{n}" playOrder="{n}"><navLabel><text>{e[1]}</text>'
                       f'</navLabel><content src="{e[0]}"/>{kids}</navPoint>')
        return "".join(pts)

    spine_toc = ""
    if nav:
        items.append('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>')
        files.append(("OEBPS/nav.xhtml", XHTML.format(title="nav", body=f'<nav epub:type="toc"><ol>{nav_ol(toc)}'
                                                                         f'</ol></nav>')))
    if ncx:
        items.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
        spine_toc = ' toc="ncx"'
        files.append(("OEBPS/toc.ncx", '<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/'
                                       'z3986/2005/ncx/" version="2005-1"><head/><docTitle><text>T</text>'
                                       f'</docTitle><navMap>{ncx_points(toc)}</navMap></ncx>'))
    opf = f"""<?xml version="1.0" encoding="utf-8"?>{opf_head}
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>
{meta or '<dc:title>測試書</dc:title><dc:creator>作者甲</dc:creator><dc:language>zh-CN</dc:language>'}</metadata>
<manifest>{''.join(items)}{manifest_extra}</manifest><spine{spine_toc}>{''.join(refs)}</spine>
{f"<guide>{guide}</guide>" if guide else ""}</package>"""
    files.insert(1, ("OEBPS/content.opf", opf))
    return zip_bytes(files + (extra or []))


def load_bytes(tmp_path: Path, data: bytes, name: str = "book.epub", **kw) -> Book:
    p = tmp_path / name
    p.write_bytes(data)
    return load_book(p, **kw)


def all_text(book: Book) -> str:
    return "\n".join(p for c in book.chapters for p in c.paragraphs)
