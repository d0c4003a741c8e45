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
