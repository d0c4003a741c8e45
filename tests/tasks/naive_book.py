"""A naive reader for the Gutenberg zh TXT files (until tasks.ingest is merged): paragraphs are blocks split at
blank lines or full-width indentation, hard wraps joined; chapters start at lines like 第…回/章/卷."""
from __future__ import annotations

import re
from pathlib import Path

from tasks.book import Chapter

_RE_CHAPTER = re.compile(r"^\s*第[一二三四五六七八九十百千零〇0-9]+[回章卷篇节節]")


def read_chapters(path: Path, max_chapters: int | None = None) -> list[Chapter]:
    text = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n").replace("<br>", "")
    blocks = re.split(r"\n[ \t]*\n|\n(?=[\u3000 ]{2})", text)
    paras = [re.sub(r"[ \t\u3000]*\n[ \t\u3000]*", "", b).strip() for b in blocks]
    chapters: list[Chapter] = []
    title, cur = "", []
    for p in paras:
        if not p:
            continue
        if _RE_CHAPTER.match(p) and len(p) < 60:
            if cur or title:
                chapters.append(Chapter(len(chapters), title, tuple(cur)))
            title, cur = p, []
        else:
            cur.append(p)
    if cur or title:
        chapters.append(Chapter(len(chapters), title, tuple(cur)))
    return chapters[:max_chapters] if max_chapters else chapters


def read_epub_chapters(path: Path) -> list[Chapter]:
    """One chapter per spine document; paragraphs from <p> and headings (a stand-in for tasks.ingest)."""
    import posixpath
    import zipfile

    from lxml import etree, html

    z = zipfile.ZipFile(path)
    container = etree.fromstring(z.read("META-INF/container.xml"))
    opf_path = container.xpath("//*[local-name()='rootfile']/@full-path")[0]
    opf = etree.fromstring(z.read(opf_path))
    items = {i.get("id"): i.get("href") for i in opf.xpath("//*[local-name()='item']")}
    spine = [items[r.get("idref")] for r in opf.xpath("//*[local-name()='itemref']")]
    chapters: list[Chapter] = []
    for href in spine:
        doc = html.fromstring(z.read(posixpath.join(posixpath.dirname(opf_path), href)))
        paras = []
        for el in doc.xpath("//body//*[self::p or self::h1 or self::h2 or self::h3 or self::h4 or self::pre]"):
            t = re.sub(r"\s*\n\s*", "", el.text_content()).strip()
            if t:
                paras.append(t)
        if paras:
            chapters.append(Chapter(len(chapters), "", tuple(paras)))
    return chapters
