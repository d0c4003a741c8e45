"""Plain-text books: the text (decoded by tasks.ingest.decode) cleared of HTML leftovers and Gutenberg boilerplate,
chapter headings (第X回/章/卷/节/篇, 序/楔子/后记..., bare title lines in essay collections) and unwrapping of
hard-wrapped lines.  Text whose letters are mostly Latin goes to tasks.ingest.txt_en (English headings, front
matter, paragraphs) instead; the Chinese path is unchanged by it.

Everything here is linear in the input: line-by-line loops, anchored regexes on single lines, and lists
joined once.  `read_txt(data, path)` is the entry point (bytes in, Book out)."""
from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from tasks.book import Book, BookMeta, Chapter, book_language, guess_language
from tasks.errors import BookError
from tasks.ingest.common import PG_END_LINE_RE, PG_SMALL_PRINT_END_RE, PG_START_RE, clean_title, collapse_ws
from tasks.ingest.decode import decode_book
from tasks.ingest.txt_en import double_spaced_wraps, english_chapters, title_lines

MAX_HEADING_CHARS = 40                   # characters; a longer line is never a numbered heading
MAX_BARE_TITLE_CHARS = 20                # characters; bare title lines in essay collections
MAX_SUBTITLE_CHARS = 40                  # characters; a heading's title on the following line
MIN_WRAP_WIDTH = 20                      # columns (CJK = 2); narrower "wrap widths" are not hard wrapping
WRAP_SLACK = 4                           # columns; a line this close to the wrap width is a wrapped line
MIN_MIDSENTENCE_SHARE = 0.2             # share of full-width lines that must end mid-sentence in a wrapped file
MIN_WRAPPED_SHARE = 0.25                 # share of text lines near the wrap width that marks a hard-wrapped file
MAX_BLANK_AFTER_SHARE = 0.3              # share of text lines followed by a blank line above which flush-left
                                         # short lines are dialogue, not essay titles

_CN_NUM = "零〇○一二三四五六七八九十百千两兩壹贰貳叁參肆伍陆陸柒捌玖拾佰仟廿卅"
_NUM = rf"(?:[{_CN_NUM}]+|[0-9０-９]+)"
_UNIT = "章回卷节節篇部集折幕"
# 第X回 + separator or end, or a short title glued on (第一章序); the caller limits the length.
NUMBERED_RE = re.compile(rf"^(?:第{_NUM}[{_UNIT}]|(?:CHAPTER|Chapter|BOOK|Book|PART|Part)\s+(?:[0-9]+|[IVXLC]+)\b\.?)"
                         r"(?P<rest>.*)$")
# Lines that are a heading by name alone (optionally after a book-title prefix like 《吶喊》).
SPECIAL_TITLES = ("序", "序言", "序章", "自序", "代序", "原序", "小引", "引子", "引言", "楔子", "前言", "後記",
                  "后记", "後記", "后記", "尾声", "尾聲", "跋", "附录", "附錄", "题记", "題記", "卷首语", "卷首語",
                  "终章", "終章", "后序", "後序", "前记", "前記", "引言", "导言", "導言", "序幕", "尾记", "尾記")
_SPECIAL_RE = re.compile(r"^(?:《[^》]{1,20}》)?\s*(?:" + "|".join(sorted(map(re.escape, SPECIAL_TITLES), key=len,
                                                                            reverse=True)) + r")$")
_SENTENCE_PUNCT = set("。．，,！!？?；;：:︰、…「」『』“”\"")
_SENTENCE_END = set("。．！？!?」』”’）)…")
_CLOSING_START = set("．。，、；：！？」』”’）)》〉】…,.;:!?")
_SEPARATOR_RE = re.compile(r"^[\s\-—=＝_＿*＊~～·•.。．、]{3,}$")
_HTML_BR_RE = re.compile(r"<br\s*/?>", re.I)
_HTML_TAG_RE = re.compile(r"</?(?:br|p|div|span|font|b|i|u|s|a|img|hr|center|strong|em|small|big|sup|sub|table|"
                          r"tr|td|th|tbody|html|body|head|title|meta|pre|blockquote|h[1-6]|ul|ol|li)"
                          r"(?:\s[^<>]{0,200})?/?>", re.I)
_HTML_ENTITY_RE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
_JUNK_TITLES = {"無標題文件", "无标题文档", "無標題文檔", "无标题文件", "untitled", "untitled document"}
_LABEL_RE = re.compile(r"^(书名|書名|作者|著者|title|Title|author|Author)\s*[:：︰]\s*(\S.{0,60})$")
_PG_CREDIT_RE = re.compile(r"^(Produced by|E-text prepared by|Transcribed by|Transcribed from)\b", re.I)
_PG_META_RE = re.compile(r"^(Title|Author)\s*:\s*(.+)$", re.I)
_PG_LANGUAGE_RE = re.compile(r"^Language\s*:\s*([A-Za-z]+)", re.I)
# Gutenberg's "Language:" header line -> BCP 47 (the languages of most of its books; others: read from the text).
_PG_LANGUAGES = {"english": "en", "chinese": "zh", "french": "fr", "german": "de", "spanish": "es", "italian": "it",
                 "portuguese": "pt", "dutch": "nl", "finnish": "fi", "latin": "la", "japanese": "ja"}
_HAN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_RE = re.compile(r"[A-Za-z\u00c0-\u024f]")
_PG_FOOTER_META_RE = re.compile(r"End of (?:the )?Project Gutenberg(?:'s|\s+E-?Book of)\s+(.+?)(?:,\s+by\s+(.+?))?\s*"
                                r"(?:\*{3}|$)", re.I)
# Other file types people rename to .txt/.epub: refused by name, not by "unknown text encoding".


# ---------------------------------------------------------------------------------------------- cleanup
def _strip_html(text: str) -> str:
    """Leftover HTML from web copies: <br> ends a line, tags vanish, entities decode (&nbsp; -> space)."""
    if "<" not in text and "&" not in text:
        return text
    text = _HTML_BR_RE.sub("", text) if _br_at_line_ends(text) else _HTML_BR_RE.sub("\n", text)
    text = _HTML_TAG_RE.sub("", text)
    return _HTML_ENTITY_RE.sub(lambda m: html.unescape(m.group()).replace("\xa0", " "), text)


def _br_at_line_ends(text: str) -> bool:
    """True when <br> marks the source's own line ends (恨海: every line ends in <br>): drop it, keep the newline."""
    n_br = len(_HTML_BR_RE.findall(text[:200_000]))
    n_end = len(re.findall(r"<br\s*/?>[ \t]*\r?\n", text[:200_000], re.I))
    return n_br > 0 and n_end >= 0.8 * n_br


@dataclass(frozen=True)
class _Gutenberg:
    found: bool        # a Gutenberg header or footer was removed
    language: str      # BCP 47 tag from the header's "Language:" line, "" when absent or not known


def _strip_gutenberg(lines: list[str]) -> tuple[list[str], dict[str, str], _Gutenberg]:
    """Drop the PG header (through '*** START OF ...', or the older '*END*THE SMALL PRINT! ...' licence) and footer
    (from '*** END OF ...' / 'End of the Project Gutenberg EBook'); return the remaining lines, Title/Author found
    in the header, and whether there was one, with its Language line."""
    meta: dict[str, str] = {}
    language = ""
    start = 0
    for i, line in enumerate(lines[:2000]):
        if PG_START_RE.search(line) or PG_SMALL_PRINT_END_RE.match(line):
            for h in lines[:i]:
                m = _PG_META_RE.match(h.strip())
                if m and m.group(1).lower() not in meta:
                    meta[m.group(1).lower()] = m.group(2).strip()
                m = _PG_LANGUAGE_RE.match(h.strip())
                if m and not language:
                    language = _PG_LANGUAGES.get(m.group(1).lower(), "")
            start = i + 1
            break
    end = len(lines)
    for i in range(len(lines) - 1, max(start, len(lines) - 5000) - 1, -1):
        if PG_END_LINE_RE.search(lines[i]):
            end = i
    if end < len(lines):
        # "End of the Project Gutenberg EBook of Hen Hai, by Jian-Ren Wu": a last-resort title and author.
        m = _PG_FOOTER_META_RE.search(" ".join(lines[end:end + 3]))
        if m:
            meta.setdefault("footer_title", m.group(1).strip())
            meta.setdefault("footer_author", (m.group(2) or "").strip())
    return lines[start:end], meta, _Gutenberg(found=start > 0 or end < len(lines), language=language)


# ---------------------------------------------------------------------------------------------- headings
def _visible(line: str) -> str:
    return line.strip()


def _indent(line: str) -> int:
    """Leading whitespace in columns (ideographic space = 2)."""
    n = 0
    for ch in line:
        if ch == "\u3000":
            n += 2
        elif ch in " \t\xa0":
            n += 1
        else:
            break
    return n


def _width(s: str) -> int:
    """Columns as a fixed-width wrapper counts them: non-ASCII (GBK/Big5 double-byte) = 2."""
    return 2 * len(s) - len(s.encode("ascii", "ignore"))


def _has_sentence_punct(s: str) -> bool:
    return any(ch in _SENTENCE_PUNCT for ch in s)


def numbered_heading(line: str) -> str | None:
    """The heading text if `line` is a 第X回/章/... heading, else None.  Body lines that merely start with
    第X回 (第四回中既將..., 第二回了．你...) are refused: the marker must be followed by a separator, the end of
    the line, or a short glued title without sentence punctuation."""
    s = _visible(line)
    if not s or len(s) > MAX_HEADING_CHARS or s[0] not in "第CcBbPp":
        return None
    m = NUMBERED_RE.match(s)
    if m is None:
        return None
    rest = m.group("rest")
    if not rest:
        return s
    if rest[0] in " \t\u3000\xa0:：、.．,，-—_":
        body = rest.strip(" \t\u3000\xa0:：、.．,，-—_")
        # A title may have internal commas (宴桃園豪傑三結義，斬黃巾英雄首立功) but not end a sentence.
        return s if not body or rest.rstrip()[-1] not in "。．！？!?." else None
    # Glued title (第一章序): short, no punctuation at all.
    return s if len(rest) <= 15 and not _has_sentence_punct(rest) else None


def special_heading(line: str) -> str | None:
    s = _visible(line)
    return s if s and len(s) <= 30 and _SPECIAL_RE.match(s) else None


def _is_separator(line: str) -> bool:
    return bool(_SEPARATOR_RE.match(line)) and bool(line.strip())


@dataclass
class _Heading:
    line: int          # index of the heading line
    title: str
    consumed: int      # lines after `line` that belong to the heading (subtitle, rules)


def _find_headings(lines: list[str], wrap: int) -> list[_Heading]:
    """Chapter headings, by the first structure the book has:
    1. numbered headings (第X回/章...) outdented from the body (at most one space when the body is indented);
    2. bare title lines (essay collections: short, outdented, after a blank line, no sentence punctuation);
    3. numbered headings at any indentation (web-novel files indent every line, headings included).
    序/楔子/后记... lines are headings in every case."""
    blank = [not ln.strip() for ln in lines]
    body_indent = _body_indent(lines)
    max_head_indent = max(1, body_indent - 1) if body_indent >= 2 else 8

    numbered: list[int] = []
    numbered_any: list[int] = []
    special: list[int] = []
    for i, ln in enumerate(lines):
        if blank[i] or len(ln) > 4 * MAX_HEADING_CHARS:
            continue
        low = _indent(ln) <= max_head_indent
        if numbered_heading(ln):
            (numbered if low else numbered_any).append(i)
        elif low and special_heading(ln):
            special.append(i)

    if len(numbered) >= 2:
        idx = set(numbered) | set(special)
    else:
        bare = _bare_titles(lines, blank, body_indent, wrap)
        if len(bare) < 2 and numbered + numbered_any:
            idx = set(numbered) | set(numbered_any) | set(special)
        else:
            idx = set(special) | set(bare)
    heads = [_complete_heading(lines, blank, i) for i in sorted(idx)]
    return _dedupe(heads, lines, blank)


def _body_indent(lines: list[str]) -> int:
    """The most common indentation of long text lines (0 for flush-left hard-wrapped books)."""
    c = Counter(_indent(ln) for ln in lines[:50_000] if len(ln.strip()) >= 15)
    return c.most_common(1)[0][0] if c else 0


def _bare_titles(lines: list[str], blank: list[bool], body_indent: int, wrap: int) -> list[int]:
    """Title lines of an essay collection.  In a flush-left file whose paragraphs are separated by blank lines
    a short line after a blank one is ordinary text (嗯 / 好吧), so there only outdented lines qualify."""
    text_lines = [i for i in range(len(lines)) if not blank[i]]
    blank_after = sum(1 for i in text_lines if i + 1 < len(lines) and blank[i + 1])
    if body_indent < 2 and blank_after >= MAX_BLANK_AFTER_SHARE * max(1, len(text_lines)):
        return []
    out = []
    for i, ln in enumerate(lines):
        if blank[i]:
            continue
        s = ln.strip()
        if (len(s) > MAX_BARE_TITLE_CHARS or _has_sentence_punct(s) or s[0] in "（(［[【〔-—－*＊"
                or _is_separator(s)):
            continue
        if i > 0 and not blank[i - 1]:
            # After a text line only when that line is complete: it ends a sentence and is not cut at the
            # wrap width (朝花夕拾 puts the next title right under the date line of the previous essay).
            prev = lines[i - 1].rstrip()
            right_aligned = _indent(prev) >= 8 and len(prev.strip()) <= MAX_BARE_TITLE_CHARS  # a date, a signature
            ends = prev.strip()[-1] in "。！？!?」”』" and not (wrap and _width(prev) >= wrap - WRAP_SLACK)
            if not (right_aligned or ends):
                continue
            if i + 1 < len(lines) and not blank[i + 1]:
                continue
        ind = _indent(ln)
        if ind > 1 and not (body_indent >= 2 and ind < body_indent):
            continue
        if body_indent >= 2 and ind >= body_indent:
            continue
        out.append(i)
    # The first line of a file is usually the book's own title: only a title line if more text lines follow
    # before the next one (handled by front-matter logic later), so keep it.
    return out


def _complete_heading(lines: list[str], blank: list[bool], i: int) -> _Heading:
    """A heading with no title of its own (第三回) takes the next short non-sentence line as its title, skipping
    blank lines and separator rules (紅樓夢: 第三回 / ----- / 賈雨村夤緣复舊職　林黛玉拋父進京都)."""
    title = lines[i].strip()
    consumed = 0
    j = i + 1
    # Skip rule lines directly after any heading.
    while j < len(lines) and j - i <= 6 and (blank[j] or _is_separator(lines[j])):
        j += 1
    if _is_bare_number_heading(title) and j < len(lines):
        cand = lines[j].strip()
        if (cand and len(cand) <= MAX_SUBTITLE_CHARS and cand[-1] not in "。．！？!?」”"
                and not numbered_heading(cand) and not _has_sentence_punct(cand.replace("，", ""))):
            title = f"{title}\u3000{cand}"
            j += 1
            while j < len(lines) and j - i <= 8 and (blank[j] or _is_separator(lines[j])):
                j += 1
    consumed = j - i - 1
    return _Heading(i, title, consumed)


def _is_bare_number_heading(title: str) -> bool:
    m = NUMBERED_RE.match(title)
    return m is not None and not m.group("rest").strip(" \t\u3000\xa0:：、.．,，-—_")


def _dedupe(heads: list[_Heading], lines: list[str], blank: list[bool]) -> list[_Heading]:
    """Two consecutive headings with no text between them and the same number (紅樓夢 repeats 第四十五回) or the
    same title (吶喊 repeats 《吶喊》自序) are one heading."""
    out: list[_Heading] = []
    for h in heads:
        if out:
            prev = out[-1]
            gap = range(prev.line + prev.consumed + 1, h.line)
            empty_between = all(blank[k] or _is_separator(lines[k]) for k in gap)
            if empty_between and _heading_key(prev.title) == _heading_key(h.title):
                out[-1] = _Heading(prev.line, max(prev.title, h.title, key=len), h.line + h.consumed - prev.line)
                continue
        out.append(h)
    return out


def _heading_key(title: str) -> str:
    m = NUMBERED_RE.match(title.strip())
    if m:
        return title.strip()[: m.start("rest")]
    return re.sub(r"\s+", "", title)


# ---------------------------------------------------------------------------------------------- unwrapping
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
        if j - i >= 2 or not out or j >= n or _indent(lines[j]) < _indent(out[-1]):
            out.append("")
        i = j
    return out


def _wrap_width(lines: list[str]) -> int:
    """The fixed width a hard-wrapped file was cut at (0 when it is not hard-wrapped)."""
    widths = [_width(ln.rstrip()) for ln in lines[:100_000] if len(ln.strip()) >= 8]
    if len(widths) < 10:
        return 0
    top = max(Counter(widths).items(), key=lambda kv: (kv[1], kv[0]))[0]
    # Look for the upper edge of the dense band: the largest width that many lines reach.
    c = Counter(widths)
    near = sum(v for w, v in c.items() if top - WRAP_SLACK <= w <= top)
    if top < MIN_WRAP_WIDTH or near < MIN_WRAPPED_SHARE * len(widths):
        return 0
    # Hard wrapping cuts lines mid-sentence; a file of complete sentences that happen to be the same length
    # (one per line) is not wrapped.
    full = [ln.rstrip() for ln in lines[:100_000] if len(ln.strip()) >= 8 and _width(ln.rstrip()) >= top - WRAP_SLACK]
    mid = sum(1 for ln in full if ln[-1] not in _SENTENCE_END)
    return top if mid >= MIN_MIDSENTENCE_SHARE * len(full) else 0


def _paragraphs(block: list[str], wrap: int, indent_marks_paragraph: bool) -> list[str]:
    """Join the lines of one text block into paragraphs."""
    paras: list[str] = []
    cur: list[str] = []
    prev_full = False
    for ln in block:
        s = ln.strip()
        if not s or _is_separator(s):  # rule lines (-----, ＊＊＊) end a paragraph and are not text
            if cur:
                paras.append(_join(cur))
                cur = []
            prev_full = False
            continue
        if len(s) <= MAX_HEADING_CHARS and (numbered_heading(s) or special_heading(s)):
            # A section heading inside a chapter (阿Q正傳's 第九章大團圓) stands alone, even after a full line.
            if cur:
                paras.append(_join(cur))
                cur = []
            paras.append(_join([s]))
            prev_full = False
            continue
        if cur:
            cont = s[0] in _CLOSING_START or (prev_full and not (indent_marks_paragraph and _indent(ln) > 0))
            if not cont:
                paras.append(_join(cur))
                cur = []
        cur.append(s)
        prev_full = bool(wrap) and _width(ln.rstrip()) >= wrap - WRAP_SLACK
    if cur:
        paras.append(_join(cur))
    return [p for p in paras if p]


def _join(parts: list[str]) -> str:
    return collapse_ws("\n".join(parts)).strip()


# ---------------------------------------------------------------------------------------------- book
def read_txt(data: bytes, path: str) -> Book:
    text, encoding = decode_book(data, path)
    text = _strip_html(text)
    lines, pg_meta, pg = _strip_gutenberg(text.split("\n"))
    prose = "\n".join(ln for ln in lines if not _PG_CREDIT_RE.match(ln.strip()))  # a credit line is not the book
    english = guess_language(_count(_HAN_RE, prose), _count(_LATIN_RE, prose)) == "en"
    # English paragraphs are one blank line apart, so a blank after each line is double spacing only where the
    # lines before those blanks are cut mid-sentence.
    if _double_spaced(lines) and (not english or double_spaced_wraps(lines)):
        lines = _collapse_double_spacing(lines)
    if english:
        return _english_book(lines, pg_meta, pg, path, encoding)
    wrap = _wrap_width(lines)
    heads = _find_headings(lines, wrap)
    indented = sum(1 for ln in lines if ln.strip() and _indent(ln) > 0)
    nonblank = sum(1 for ln in lines if ln.strip()) or 1
    indent_marks_paragraph = indented < 0.5 * nonblank

    chapters: list[tuple[str, list[str]]] = []
    first_line = heads[0].line if heads else len(lines)
    front = _paragraphs(lines[:first_line], wrap, indent_marks_paragraph)
    if pg_meta:  # a Gutenberg text: its credit line is not part of the book
        front = [p for p in front if not _PG_CREDIT_RE.match(p)]
    title, author, front = _front_matter(front, pg_meta, path, has_chapters=bool(heads))
    if front:
        chapters.append((title, front))
    for k, h in enumerate(heads):
        end = heads[k + 1].line if k + 1 < len(heads) else len(lines)
        body = lines[h.line + h.consumed + 1:end]
        # Wrap widths differ between parts of one file (紅樓夢: 52, 66, 70 columns): measure per chapter.
        local = _wrap_width(body) if len(body) >= 40 else wrap
        paras = _paragraphs(body, local or wrap, indent_marks_paragraph)
        htitle = clean_title(h.title)
        if paras and re.sub(r"\s+", "", paras[0]) == re.sub(r"\s+", "", htitle):
            paras = paras[1:]  # the title repeated as the first body line
        chapters.append((htitle, paras))

    chapters = [(t, p) for t, p in chapters if p]
    if not chapters and heads:
        # Only headings and no text under them (a file holding one short line): the lines are the text.
        chapters = [(title, _paragraphs(lines, wrap, indent_marks_paragraph))]
        chapters = [(t, p) for t, p in chapters if p]
    if not chapters:
        raise BookError(path, "no readable text")
    meta = BookMeta(title=title, author=author, language="zh", source_path=str(path), source_format="txt",
                    encoding=encoding)
    return Book(meta=meta, chapters=tuple(Chapter(index=i, title=t or title, paragraphs=tuple(p))
                                          for i, (t, p) in enumerate(chapters)))


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(text) - len(pattern.sub("", text))


def _english_book(lines: list[str], pg_meta: dict[str, str], pg: _Gutenberg, path: str, encoding: str) -> Book:
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


def _front_matter(front: list[str], pg_meta: dict[str, str], path: str,
                  has_chapters: bool) -> tuple[str, str, list[str]]:
    """Title and author from the PG header or the short lines before the first heading; short front matter
    (title/author lines only) before the chapters is not read as a chapter.  A book without headings is
    all front matter, and all of it is read."""
    title = pg_meta.get("title", "")
    author = pg_meta.get("author", "")
    for p in front[:10]:  # 书名：xxx / 作者：yyy label lines
        m = _LABEL_RE.match(p)
        if m:
            value = m.group(2).strip().strip("《》")
            if m.group(1) in ("作者", "著者", "author", "Author") and not author:
                author = value
            elif m.group(1) not in ("作者", "著者", "author", "Author") and not title:
                title = value
    short = [p for p in front if len(p) <= 30 and not _has_sentence_punct(p.replace("︰", "").replace("：", ""))]
    short = [p for p in short if p.strip().lower() not in _JUNK_TITLES]
    if not title and short:
        first = short[0].strip("《》〈〉 ")
        if "/" in first or "／" in first:
            parts = re.split(r"[/／]", first, maxsplit=1)
            title, author = parts[0].strip(), author or parts[1].strip()
        else:
            title = first
            if not author and len(short) > 1:
                author = short[1]
    if not title:
        title = pg_meta.get("footer_title", "")
        author = author or pg_meta.get("footer_author", "")
    author = author or pg_meta.get("footer_author", "")
    if not title:
        title = Path(path).stem
    only_labels = has_chapters and all(len(p) <= 30 for p in front) and sum(len(p) for p in front) <= 120
    return clean_title(title), clean_title(author), ([] if only_labels else front)
