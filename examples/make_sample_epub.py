"""Build examples/daodejing.epub (EPUB 3 with nav and NCX) from examples/daodejing/*.txt, byte-for-byte
reproducibly: `python examples/make_sample_epub.py`.  The first line of each .txt is the chapter title."""
from __future__ import annotations

import zipfile
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "daodejing"
DEST = HERE / "daodejing.epub"
TITLE, AUTHOR, BOOK_ID = "道德经（前三章）", "老子", "urn:uuid:7c1f0b6e-5d43-4f1e-9a51-chattts-sample"
FIXED_TIME = (2020, 1, 1, 0, 0, 0)
INK, PAPER = bytes((40, 40, 60)), bytes((236, 228, 210))   # RGB of the cover


def chapters() -> list[tuple[str, list[str]]]:
    out = []
    for p in sorted(SRC.glob("*.txt")):
        lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
        out.append((lines[0], lines[1:]))
    return out


def xhtml(title: str, paras: list[str]) -> str:
    body = "\n".join(f"<p>{escape(p)}</p>" for p in paras)
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
            f'xml:lang="zh-CN" lang="zh-CN">\n<head><title>{escape(title)}</title></head>\n'
            f'<body>\n<h1>{escape(title)}</h1>\n{body}\n</body>\n</html>\n')


def cover_png(width: int = 200, height: int = 300) -> bytes:
    """A plain cover image (ink-coloured bands on paper), made without any imaging library."""
    import struct
    import zlib

    rows = []
    for y in range(height):
        band = (y // 30) % 2 == 0 and 60 <= y < 240
        px = b"".join(INK if band and 30 <= x < width - 30 else PAPER for x in range(width))
        rows.append(b"\x00" + px)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
            + chunk(b"IEND", b""))


def build() -> bytes:
    chs = chapters()
    files = {"META-INF/container.xml": (
        '<?xml version="1.0"?>\n<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        '</rootfiles></container>\n')}
    manifest, spine, nav, ncx = [], [], [], []
    for i, (title, paras) in enumerate(chs, 1):
        name = f"ch{i:02d}.xhtml"
        files[f"OEBPS/{name}"] = xhtml(title, paras)
        manifest.append(f'<item id="ch{i}" href="{name}" media-type="application/xhtml+xml"/>')
        spine.append(f'<itemref idref="ch{i}"/>')
        nav.append(f'<li><a href="{name}">{escape(title)}</a></li>')
        ncx.append(f'<navPoint id="np{i}" playOrder="{i}"><navLabel><text>{escape(title)}</text></navLabel>'
                   f'<content src="{name}"/></navPoint>')
    files["OEBPS/nav.xhtml"] = (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" '
        'xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="zh-CN"><head><title>目录</title></head><body>'
        f'<nav epub:type="toc" id="toc"><h1>目录</h1><ol>{"".join(nav)}</ol></nav></body></html>\n')
    files["OEBPS/toc.ncx"] = (
        '<?xml version="1.0" encoding="utf-8"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
        f'<head><meta name="dtb:uid" content="{BOOK_ID}"/></head><docTitle><text>{escape(TITLE)}</text></docTitle>'
        f'<navMap>{"".join(ncx)}</navMap></ncx>\n')
    files["OEBPS/content.opf"] = (
        '<?xml version="1.0" encoding="utf-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="bookid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="bookid">{BOOK_ID}</dc:identifier><dc:title>{escape(TITLE)}</dc:title>'
        f'<dc:creator>{escape(AUTHOR)}</dc:creator><dc:language>zh-CN</dc:language><meta name="cover" content="cover"/>'
        '<meta property="dcterms:modified">2020-01-01T00:00:00Z</meta></metadata><manifest>'
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        '<item id="cover" href="cover.png" media-type="image/png" properties="cover-image"/>'
        f'{"".join(manifest)}</manifest><spine toc="ncx">{"".join(spine)}</spine></package>\n')
    import io

    binary = {"OEBPS/cover.png": cover_png()}

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype", FIXED_TIME), "application/epub+zip", zipfile.ZIP_STORED)
        for name in sorted(files):
            z.writestr(zipfile.ZipInfo(name, FIXED_TIME), files[name].encode("utf-8"), zipfile.ZIP_DEFLATED)
        for name in sorted(binary):
            z.writestr(zipfile.ZipInfo(name, FIXED_TIME), binary[name], zipfile.ZIP_DEFLATED)
    return buf.getvalue()


if __name__ == "__main__":
    DEST.write_bytes(build())
    print(DEST)
