"""Plain-text books: `read_txt(data, path)` (bytes in, Book out).  The bytes are decoded and cleaned
(txt_decode.py: encoding, HTML leftovers, Gutenberg boilerplate), double spacing collapsed, then the letters are
counted (credit lines left out): text whose Han characters are a fifth of its letters or more takes the Chinese
path (txt_zh.py), other text the English one (txt_en.py).  Gutenberg's header and footer (its licence) are matter
"pg-license" (tasks/ingest/matter.py): set aside, or with `--include pg-license` read as the first and last
chapters."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from tasks.book import Book, BookMeta, Chapter, SetAside, book_language, guess_language
from tasks.errors import BookError
from tasks.ingest.common import clean_title, collapse_ws
from tasks.ingest.matter import PG_TITLES, MatterOptions, Numbering, reason
from tasks.ingest.txt_decode import PG_CREDIT_RE, Gutenberg, decode_text, looks_binary, strip_gutenberg, strip_html
from tasks.ingest.txt_en import double_spaced_wraps, english_chapters, title_lines
from tasks.ingest.txt_zh import chinese_book, indent

MAX_TXT_BYTES = 512 * 1024 * 1024        # bytes; larger files are refused, not read
_HAN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_RE = re.compile(r"[A-Za-z\u00c0-\u024f]")


def read_txt(data: bytes, path: str, matter: MatterOptions = MatterOptions()) -> Book:
    if len(data) > MAX_TXT_BYTES:
        raise BookError(path, f"text file too large ({len(data)} bytes, limit {MAX_TXT_BYTES})")
    text, encoding = decode_text(data, path)
    if looks_binary(text):
        raise BookError(path, "not a text file (binary data)")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text = strip_html(text)
    lines, pg_meta, pg = strip_gutenberg(text.split("\n"))
    body = "\n".join(ln for ln in lines if not PG_CREDIT_RE.match(ln.strip()))  # a credit line is not the book
    english = guess_language(_count(_HAN_RE, body), _count(_LATIN_RE, body)) == "en"
    # English paragraphs are one blank line apart, so a blank after each line is double spacing only where the
    # lines before those blanks are cut mid-sentence.
    if _double_spaced(lines) and (not english or double_spaced_wraps(lines)):
        lines = _collapse_double_spacing(lines)
    book = (_english_book(lines, pg_meta, pg, path, encoding) if english
            else chinese_book(lines, pg_meta, path, encoding))
    return _gutenberg_matter(book, pg, matter, path)


def _gutenberg_matter(book: Book, pg: Gutenberg, matter: MatterOptions, path: str) -> Book:
    """Gutenberg's header and footer as matter "pg-license": set aside (numbered 1, 2), or read as the book's first
    and last chapters."""
    numbering = Numbering(matter)
    first: list[Chapter] = []
    last: list[Chapter] = []
    aside: list[SetAside] = []
    for lines, title, where in ((pg.header, PG_TITLES[0], first), (pg.footer, PG_TITLES[1], last)):
        paras = _blank_line_paragraphs(lines)
        if not paras:
            continue
        if not matter.sets_aside("pg-license"):
            where.append(Chapter(0, title, paras))
            continue
        number, set_aside = numbering.next()
        how = "its header" if where is first else "its footer and licence"
        if set_aside:
            aside.append(SetAside(number, "pg-license", title, paras, 0 if where is first else len(book.chapters),
                                  reason("pg-license", how)))
        else:
            where.append(Chapter(0, title, paras))
    numbering.check(path)
    if not (first or last or aside):
        return book
    chapters = [*first, *book.chapters, *last]
    shift = len(first)
    aside = [a if a.after == 0 else replace(a, after=a.after + shift) for a in aside]
    return Book(book.meta, tuple(replace(c, index=i) for i, c in enumerate(chapters)), tuple(aside))


def _blank_line_paragraphs(lines: tuple[str, ...]) -> tuple[str, ...]:
    """Lines as paragraphs: blank lines between them, each one's lines joined (whitespace collapsed)."""
    out, cur = [], []
    for ln in (*lines, ""):
        if ln.strip():
            cur.append(ln)
        elif cur:
            out.append(collapse_ws("\n".join(cur)).strip())
            cur = []
    return tuple(p for p in out if p)


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(text) - len(pattern.sub("", text))


def _english_book(lines: list[str], pg_meta: dict[str, str], pg: Gutenberg, path: str, encoding: str) -> Book:
    """An English text (tasks.ingest.txt_en): headings, front matter and paragraphs; title and author from the
    Gutenberg header, else from the title page; language from the header's Language line, else from the text."""
    text = english_chapters(lines, gutenberg=pg.found)
    page_title, page_author = title_lines(text.title_page)
    title = clean_title(pg_meta.get("title") or page_title or pg_meta.get("footer_title") or Path(path).stem)
    author = clean_title(pg_meta.get("author") or page_author or pg_meta.get("footer_author", ""))
    chapters = [(title, text.front)] + text.chapters if text.front else text.chapters
    chapters = [(t, p) for t, p in chapters if p]
    if not chapters:
        raise BookError(path, "no readable text")
    meta = BookMeta(title=title, author=author, language=pg.language, source_path=str(path), source_format="txt",
                    encoding=encoding)
    book = Book(meta=meta, chapters=tuple(Chapter(index=i, title=t or title, paragraphs=tuple(p))
                                          for i, (t, p) in enumerate(chapters)))
    if not pg.language:
        book = Book(meta=replace(meta, language=book_language(book)), chapters=book.chapters)
    return book


# ---------------------------------------------------------------------------------------------- double spacing
def _double_spaced(lines: list[str]) -> bool:
    """吶喊-style files put a blank line after every wrapped line (and two between paragraphs)."""
    text_lines = single_gap = 0
    i, n = 0, len(lines)
    while i < n:
        if lines[i].strip():
            text_lines += 1
            if i + 2 < n and not lines[i + 1].strip() and lines[i + 2].strip():
                single_gap += 1
        i += 1
    return text_lines >= 20 and single_gap > 0.5 * text_lines


def _collapse_double_spacing(lines: list[str]) -> list[str]:
    """One blank line between text lines is a line break; two or more are a paragraph break (one blank)."""
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        if lines[i].strip():
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < n and not lines[j].strip():
            j += 1
        # Two or more blank lines, or an outdented line after one (a title line), break the paragraph.
        if j - i >= 2 or not out or j >= n or indent(lines[j]) < indent(out[-1]):
            out.append("")
        i = j
    return out

