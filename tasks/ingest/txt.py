"""Plain-text books: encoding detection, Gutenberg boilerplate removal, chapter headings (第X回/章/卷/节/篇,
序/楔子/后记..., bare title lines in essay collections) and unwrapping of hard-wrapped lines.  Text whose letters
are mostly Latin goes to tasks.ingest.txt_en (English headings, front matter, paragraphs) instead; the Chinese
path is unchanged by it.

Everything here is linear in the input: line-by-line loops, anchored regexes on single lines, and lists
joined once.  `read_txt(data, path)` is the entry point (bytes in, Book out)."""
from __future__ import annotations

import codecs
import html
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from tasks.book import Book, BookMeta, Chapter, book_language, guess_language
from tasks.errors import BookError
from tasks.ingest.common import PG_END_LINE_RE, PG_SMALL_PRINT_END_RE, PG_START_RE, clean_title, collapse_ws
from tasks.ingest.txt_en import double_spaced_wraps, english_chapters, title_lines

MAX_TXT_BYTES = 512 * 1024 * 1024        # bytes; larger files are refused, not read
DETECT_SAMPLE_BYTES = 1 * 1024 * 1024    # bytes handed to charset-normalizer (the whole file is decoded strictly)
MAX_HEADING_CHARS = 40                   # characters; a longer line is never a numbered heading
MAX_BARE_TITLE_CHARS = 20                # characters; bare title lines in essay collections
MAX_SUBTITLE_CHARS = 40                  # characters; a heading's title on the following line
MIN_WRAP_WIDTH = 20                      # columns (CJK = 2); narrower "wrap widths" are not hard wrapping
WRAP_SLACK = 4                           # columns; a line this close to the wrap width is a wrapped line
MIN_MIDSENTENCE_SHARE = 0.2             # share of full-width lines that must end mid-sentence in a wrapped file
MIN_WRAPPED_SHARE = 0.25                 # share of text lines near the wrap width that marks a hard-wrapped file
MAX_CONTROL_SHARE = 0.01                 # share of control characters above which decoded text is binary junk
MAX_UTF8_DAMAGE = 8                      # invalid sequences tolerated in a UTF-8 file (replaced, reported)
MAX_UTF8_DAMAGE_SHARE = 0.001            # ... or this share of its characters, if larger
MIN_HANZI_FOR_SCORE = 2                  # ideographs needed before a GB18030/Big5 decoding is scored
MIN_COMMON_HANZI_SHARE = 0.25            # share of common characters in real Chinese (~0.5; misdecodings ~0.05)
MAX_BLANK_AFTER_SHARE = 0.3              # share of text lines followed by a blank line above which flush-left
                                         # short lines are dialogue, not essay titles
MIN_CONTROL_CHARS = 16                   # characters; fewer control characters never make a file "binary"
MAX_WESTERN_ACCENT_SHARE = 0.02          # share of non-ASCII letters below which a Latin text is English (cp1252)

# The commonest Chinese characters (Simplified and Traditional forms), for telling GB18030 from Big5 from junk.
_COMMON_HANZI = frozenset(
    "了不一的道來来是人我他有說说你那這这個个之去大也子見见上在得著着又下曰只出老行們们將将此好就便回家頭头中者"
    "日三到知如里裡裏天二太儿兒時时看可自為为笑心王要事今馬马都何起兵無无軍军兩两小前過过還还等以叫明卻却問问與与"
    "門门而正面十然打走言山身生么麼些姐眾众沒没進进話话把手後后听聽若和多已因師师公方先至相才於于長长當当住處处母"
    "八想怎吃聲声地四罷罢父年夫張张其命請请入且死分外用城爺爷東东意西路主所德乃吾必口倒能作水金再忙使從从往五坐"
    "令安呢取樣样會会邊边娘親亲開开未拿真敢甚即放很嗎吗吧啊對对就最從被讓让給给")
# Detected legacy Chinese encodings are decoded with their superset (the detected name is what meta records).
_ENCODING_ALIASES = {"gb2312": "gb18030", "gbk": "gb18030", "cp936": "gb18030"}
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))

_CN_NUM = "零〇○一二三四五六七八九十百千两兩壹贰貳叁參肆伍陆陸柒捌玖拾佰仟廿卅"
_NUM = rf"(?:[{_CN_NUM}]+|[0-9０-９]+)"
_UNIT = "章回卷节節篇部集折幕"
# 第X回 + separator or end, or a short title glued on (第一章序); the caller limits the length.
NUMBERED_RE = re.compile(rf"^(?:第{_NUM}[{_UNIT}]|(?:CHAPTER|Chapter|BOOK|Book|PART|Part)\s+(?:[0-9]+|[IVXLC]+)\b\.?)"
                         r"(?P<rest>.*)$")
# Lines that are a heading by name alone (optionally after a book-title prefix like 《吶喊》).
SPECIAL_TITLES = ("序", "序言", "序章", "自序", "代序", "原序", "小引", "引子", "引言", "楔子", "前言", "後記", "后记",
                  "後記", "后記", "尾声", "尾聲", "跋", "附录", "附錄", "题记", "題記", "卷首语", "卷首語", "终章", "終章", "后序", "後序", "前记", "前記",
                  "引言", "导言", "導言", "序幕", "尾记", "尾記")
_SPECIAL_RE = re.compile(r"^(?:《[^》]{1,20}》)?\s*(?:" + "|".join(sorted(map(re.escape, SPECIAL_TITLES), key=len,
                                                                            reverse=True)) + r")$")
_SENTENCE_PUNCT = set("。．，,！!？?；;：:︰、…「」『』“”\"")
_SENTENCE_END = set("。．！？!?」』”’）)…")
_CLOSING_START = set("．。，、；：！？」』”’）)》〉】…,.;:!?")
_SEPARATOR_RE = re.compile(r"^[\s\-—=＝_＿*＊~～·•.。．、]{3,}$")
_BINARY_CHARS_RE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufff0-\uffff]")
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
_BINARY_MAGICS = ((b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
                  (b"%PDF", "PDF document"), (b"Rar!", "RAR archive"), (b"7z\xbc\xaf", "7-Zip archive"),
                  (b"\x1f\x8b", "gzip data"), (b"BM", None), (b"RIFF", "RIFF media"), (b"ID3", "MP3 audio"),
                  (b"\xd0\xcf\x11\xe0", "MS Office document"), (b"MOBI", None), (b"\x7fELF", "executable"))


# ---------------------------------------------------------------------------------------------- decoding
def decode_text(data: bytes, path: str) -> tuple[str, str]:
    """(text, encoding name).  BOMs first, then strict UTF-8, then charset-normalizer; the chosen encoding
    must decode the WHOLE file strictly, else BookError("unknown text encoding")."""
    if not data:
        raise BookError(path, "empty file")
    for magic, kind in _BINARY_MAGICS:
        if kind and data.startswith(magic):
            raise BookError(path, f"not an EPUB or text file ({kind})")
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(enc), enc
            except UnicodeDecodeError:
                raise BookError(path, f"unknown text encoding (invalid {enc} after a byte-order mark)") from None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 3 and e.reason == "unexpected end of data":
            return data[: e.start].decode("utf-8"), "utf-8"  # the file was cut inside its last character
    lossy = _nearly_utf8(data)
    if lossy is not None:
        return lossy
    if _western(data):
        return data.decode("cp1252"), "cp1252"
    enc = _detect(data)
    if enc is None:
        raise BookError(path, "unknown text encoding")
    codec = _ENCODING_ALIASES.get(enc, enc)
    try:
        text = _decode_tolerating_cut_end(data, codec)
    except (UnicodeDecodeError, LookupError):
        # The sample fitted but the rest of the file does not: try the Chinese superset before giving up.
        try:
            text, enc = data.decode("gb18030"), "gb18030"
        except UnicodeDecodeError:
            raise BookError(path, "unknown text encoding") from None
    return text, enc


def _western(data: bytes) -> bool:
    """True when `data` decodes as cp1252 into text whose letters are nearly all ASCII (English with a few accented
    names): English text saved by Windows.  The detector takes such text for cp1250 or cp852 (æ read as ć, à as ŕ)
    or, with one accented letter in an ASCII file, for Big5; Chinese in any encoding is far from passing."""
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return False
    sample = text[:DETECT_SAMPLE_BYTES]
    accented = sum(1 for ch in sample if ord(ch) > 0x7F and ch.isalpha())
    ascii_letters = sum(1 for ch in sample if ch.isascii() and ch.isalpha())
    return accented <= MAX_WESTERN_ACCENT_SHARE * max(1, ascii_letters + accented)


def _decode_tolerating_cut_end(data: bytes, codec: str) -> str:
    """Strict decoding, except that a multibyte character cut off by the end of the file is dropped."""
    try:
        return data.decode(codec)
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 4:
            return data[: e.start].decode(codec)
        raise


def _nearly_utf8(data: bytes) -> tuple[str, str] | None:
    """UTF-8 with a few damaged bytes (a bad sector, a bad copy): decoded with U+FFFD for the damage, and the
    damage named in the encoding, rather than misread as GB18030 or Big5.  None when it is not UTF-8."""
    sample = data[:DETECT_SAMPLE_BYTES]
    text = sample.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - sample.count(b"\xef\xbf\xbd")
    multibyte = sum(1 for ch in text if ord(ch) > 0x7F) - bad
    if bad > max(MAX_UTF8_DAMAGE, MAX_UTF8_DAMAGE_SHARE * multibyte):
        return None
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    if bad > max(MAX_UTF8_DAMAGE, MAX_UTF8_DAMAGE_SHARE * len(text)) or multibyte < 4 * bad:
        return None
    return text, f"utf-8 ({bad} invalid byte sequences replaced)"


def _detect(data: bytes) -> str | None:
    # UTF-16 without a BOM: NUL bytes on one side of most ASCII characters.
    sample = data[:DETECT_SAMPLE_BYTES]
    if len(sample) >= 4 and sample.count(0) > len(sample) // 8:
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        for enc, ok in (("utf-16-le", odd > 2 * even), ("utf-16-be", even > 2 * odd)):
            if ok:
                try:
                    data.decode(enc)
                    return enc
                except UnicodeDecodeError:
                    pass
        return None
    from charset_normalizer import from_bytes  # lazy: only non-UTF-8 files need it

    best = from_bytes(sample).best()
    cut = sample.rfind(b"\n")
    if best is None and cut > len(sample) // 2:
        best = from_bytes(sample[: cut + 1]).best()  # the sample may end inside a character
    name = best.encoding.lower().replace("_", "-") if best is not None else None
    # Short Chinese texts fool statistical detectors (GBK read as cp949 or Big5): when GB18030 or Big5
    # decodes the sample into common Chinese, that wins; otherwise the detector's answer stands.
    chinese = _best_chinese_decoding(sample)
    if chinese is not None and (name is None or name not in ("utf-16-le", "utf-16-be", "utf-32")):
        if name not in ("gb18030", "gbk", "gb2312", "big5", "cp950", "big5hkscs") or chinese[1] >= 0.5:
            return chinese[0] if name not in ("gbk", "gb2312") or chinese[0] != "gb18030" else name
    if name is None:
        return None
    return "utf-8" if name in ("utf-8", "ascii") else name


def _best_chinese_decoding(sample: bytes) -> tuple[str, float] | None:
    """(encoding, share of common Chinese characters) for the better of GB18030 and Big5, or None when neither
    decodes the sample into text where common Chinese characters are at least MIN_COMMON_HANZI_SHARE of the
    ideographs."""
    best: tuple[str, float] | None = None
    for enc in ("gb18030", "big5"):
        try:
            text = _decode_tolerating_cut_end(sample, enc)
        except UnicodeDecodeError:
            continue
        han = [ch for ch in text if "\u4e00" <= ch <= "\u9fff"]
        if len(han) < MIN_HANZI_FOR_SCORE:
            continue
        share = sum(1 for ch in han if ch in _COMMON_HANZI) / len(han)
        if share >= MIN_COMMON_HANZI_SHARE and (best is None or share > best[1]):
            best = (enc, share)
    return best


def _looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:DETECT_SAMPLE_BYTES]
    bad = len(_BINARY_CHARS_RE.findall(sample))
    return bad > max(MIN_CONTROL_CHARS, MAX_CONTROL_SHARE * len(sample))


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
    return bool(m) and not m.group("rest").strip(" \t\u3000\xa0:：、.．,，-—_")


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
    if len(data) > MAX_TXT_BYTES:
        raise BookError(path, f"text file too large ({len(data)} bytes, limit {MAX_TXT_BYTES})")
    text, encoding = decode_text(data, path)
    if _looks_binary(text):
        raise BookError(path, "not a text file (binary data)")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_html(text)
    lines, pg_meta, pg = _strip_gutenberg(text.split("\n"))
    body = "\n".join(ln for ln in lines if not _PG_CREDIT_RE.match(ln.strip()))  # a credit line is not the book
    english = guess_language(_count(_HAN_RE, body), _count(_LATIN_RE, body)) == "en"
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
