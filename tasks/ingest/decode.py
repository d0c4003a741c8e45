"""The bytes of a plain-text book as text: the size limit, byte-order marks, strict UTF-8 (a character cut off at
the end dropped; a few damaged bytes replaced and named), cp1252 for nearly-ASCII Latin text (English saved by
Windows), else charset-normalizer with GB18030/Big5 scored by their common characters; binary files refused.
Line ends become newlines.  `decode_book(data, path)` -> (text, the encoding's name); tasks.ingest.txt reads
the structure."""
from __future__ import annotations

import codecs
import re

from tasks.errors import BookError

MAX_TXT_BYTES = 512 * 1024 * 1024        # bytes; larger files are refused, not read
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
_BINARY_MAGICS = ((b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
                  (b"%PDF", "PDF document"), (b"Rar!", "RAR archive"), (b"7z\xbc\xaf", "7-Zip archive"),
                  (b"\x1f\x8b", "gzip data"), (b"BM", None), (b"RIFF", "RIFF media"), (b"ID3", "MP3 audio"),
                  (b"\xd0\xcf\x11\xe0", "MS Office document"), (b"MOBI", None), (b"\x7fELF", "executable"))


def decode_book(data: bytes, path: str) -> tuple[str, str]:
    """(the text, its line ends newlines and no byte-order mark; the encoding's name): BookError for a file too
    large, empty, binary or in no encoding we read."""
    if len(data) > MAX_TXT_BYTES:
        raise BookError(path, f"text file too large ({len(data)} bytes, limit {MAX_TXT_BYTES})")
    text, encoding = decode_text(data, path)
    if _looks_binary(text):
        raise BookError(path, "not a text file (binary data)")
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n"), encoding


def decode_text(data: bytes, path: str) -> tuple[str, str]:
    """(text, encoding name).  BOMs first, then strict UTF-8, then charset-normalizer; the chosen encoding
    must decode the WHOLE file strictly, else BookError("unknown text encoding")."""
    if not data:
        raise BookError(path, "empty file")
    for magic, kind in _BINARY_MAGICS:
        if kind and data.startswith(magic):
            raise BookError(path, f"not an EPUB or text file ({kind})")
    for bom, bom_enc in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(bom_enc), bom_enc
            except UnicodeDecodeError:
                raise BookError(path, f"unknown text encoding (invalid {bom_enc} after a byte-order mark)") from None
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


def _looks_binary(text: str) -> bool:
    if not text:
        return False
    sample = text[:DETECT_SAMPLE_BYTES]
    bad = len(_BINARY_CHARS_RE.findall(sample))
    return bad > max(MIN_CONTROL_CHARS, MAX_CONTROL_SHARE * len(sample))
