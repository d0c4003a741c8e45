"""A plain-text book's bytes to its lines: the encoding (BOM, UTF-8, UTF-8 with a few damaged bytes, cp1252 for
nearly-ASCII Latin text, then charset-normalizer with the GB18030/Big5 scoring), other file types refused by name,
HTML leftovers removed, the Gutenberg header and footer dropped (their Title/Author/Language lines kept).
`tasks.ingest.txt.read_txt` runs these in that order; the structure (headings, paragraphs) is txt_zh.py's and
txt_en.py's."""
from __future__ import annotations

import codecs
import html
import re
from dataclasses import dataclass

from tasks.errors import BookError
from tasks.ingest.common import PG_END_LINE_RE, PG_SMALL_PRINT_END_RE, PG_START_RE

DETECT_SAMPLE_BYTES = 1 * 1024 * 1024    # bytes handed to charset-normalizer (the whole file is decoded strictly)
MAX_CONTROL_SHARE = 0.01                 # share of control characters above which decoded text is binary junk
MAX_UTF8_DAMAGE = 8                      # invalid sequences tolerated in a UTF-8 file (replaced, reported)
MAX_UTF8_DAMAGE_SHARE = 0.001            # ... or this share of its characters, if larger
MIN_HANZI_FOR_SCORE = 2                  # ideographs needed before a GB18030/Big5 decoding is scored
MIN_COMMON_HANZI_SHARE = 0.25            # share of common characters in real Chinese (~0.5; misdecodings ~0.05)
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
_BINARY_CHARS_RE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufff0-\uffff]")
_HTML_BR_RE = re.compile(r"<br\s*/?>", re.I)
_HTML_TAG_RE = re.compile(r"</?(?:br|p|div|span|font|b|i|u|s|a|img|hr|center|strong|em|small|big|sup|sub|table|"
                          r"tr|td|th|tbody|html|body|head|title|meta|pre|blockquote|h[1-6]|ul|ol|li)"
                          r"(?:\s[^<>]{0,200})?/?>", re.I)
_HTML_ENTITY_RE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
# A Gutenberg credit line ("Produced by ..."): not the book's text (read_txt's language count, txt_zh's front matter).
PG_CREDIT_RE = re.compile(r"^(Produced by|E-text prepared by|Transcribed by|Transcribed from)\b", re.I)
_PG_META_RE = re.compile(r"^(Title|Author)\s*:\s*(.+)$", re.I)
_PG_LANGUAGE_RE = re.compile(r"^Language\s*:\s*([A-Za-z]+)", re.I)
# Gutenberg's "Language:" header line -> BCP 47 (the languages of most of its books; others: read from the text).
_PG_LANGUAGES = {"english": "en", "chinese": "zh", "french": "fr", "german": "de", "spanish": "es", "italian": "it",
                 "portuguese": "pt", "dutch": "nl", "finnish": "fi", "latin": "la", "japanese": "ja"}
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
    for bom, bom_codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(bom_codec), bom_codec
            except UnicodeDecodeError:
                raise BookError(path, f"unknown text encoding (invalid {bom_codec} after a byte-order mark)") from None
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
    if (chinese is not None and (name is None or name not in ("utf-16-le", "utf-16-be", "utf-32"))
            and (name not in ("gb18030", "gbk", "gb2312", "big5", "cp950", "big5hkscs") or chinese[1] >= 0.5)):
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


def looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:DETECT_SAMPLE_BYTES]
    bad = len(_BINARY_CHARS_RE.findall(sample))
    return bad > max(MIN_CONTROL_CHARS, MAX_CONTROL_SHARE * len(sample))


# ---------------------------------------------------------------------------------------------- cleanup
def strip_html(text: str) -> str:
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
class Gutenberg:
    found: bool        # a Gutenberg header or footer was removed
    language: str      # BCP 47 tag from the header's "Language:" line, "" when absent or not known
    header: tuple[str, ...] = ()   # the lines removed before the text (through '*** START OF ...')
    footer: tuple[str, ...] = ()   # the lines removed after it (from '*** END OF ...': the licence)


def strip_gutenberg(lines: list[str]) -> tuple[list[str], dict[str, str], Gutenberg]:
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
    return lines[start:end], meta, Gutenberg(found=start > 0 or end < len(lines), language=language,
                                             header=tuple(lines[:start]), footer=tuple(lines[end:]))
