"""Chinese plain-text books: chapter headings (第X回/章/卷/节/篇, 序/楔子/后记..., bare title lines in essay
collections), hard-wrapped lines joined at a measured width, and the title and author from the front matter.
`chinese_book` is `tasks.ingest.txt.read_txt`'s Chinese path, byte for byte what it was before English ingest
(tests/tasks/ingest/test_txt_zh_unchanged.py).

Everything here is linear in the input: line-by-line loops, anchored regexes on single lines, and lists
joined once."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tasks.book import Book, BookMeta, Chapter
from tasks.errors import BookError
from tasks.ingest.common import clean_title, collapse_ws
from tasks.ingest.txt_decode import PG_CREDIT_RE

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
_JUNK_TITLES = {"無標題文件", "无标题文档", "無標題文檔", "无标题文件", "untitled", "untitled document"}
_LABEL_RE = re.compile(r"^(书名|書名|作者|著者|title|Title|author|Author)\s*[:：︰]\s*(\S.{0,60})$")


# ---------------------------------------------------------------------------------------------- headings
def _visible(line: str) -> str:
    return line.strip()


def indent(line: str) -> int:
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
        low = indent(ln) <= max_head_indent
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
    c = Counter(indent(ln) for ln in lines[:50_000] if len(ln.strip()) >= 15)
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
            right_aligned = indent(prev) >= 8 and len(prev.strip()) <= MAX_BARE_TITLE_CHARS  # a date, a signature
            ends = prev.strip()[-1] in "。！？!?」”』" and not (wrap and _width(prev) >= wrap - WRAP_SLACK)
            if not (right_aligned or ends):
                continue
            if i + 1 < len(lines) and not blank[i + 1]:
                continue
        ind = indent(ln)
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
            cont = s[0] in _CLOSING_START or (prev_full and not (indent_marks_paragraph and indent(ln) > 0))
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
def chinese_book(lines: list[str], pg_meta: dict[str, str], path: str, encoding: str) -> Book:
    """A Chinese text: headings, paragraphs unwrapped at the measured wrap width, title and author from the
    Gutenberg header or the front matter (the lines before the first heading)."""
    wrap = _wrap_width(lines)
    heads = _find_headings(lines, wrap)
    indented = sum(1 for ln in lines if ln.strip() and indent(ln) > 0)
    nonblank = sum(1 for ln in lines if ln.strip()) or 1
    indent_marks_paragraph = indented < 0.5 * nonblank

    chapters: list[tuple[str, list[str]]] = []
    first_line = heads[0].line if heads else len(lines)
    front = _paragraphs(lines[:first_line], wrap, indent_marks_paragraph)
    if pg_meta:  # a Gutenberg text: its credit line is not part of the book
        front = [p for p in front if not PG_CREDIT_RE.match(p)]
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
