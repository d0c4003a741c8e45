"""Traditional -> Simplified with OpenCC's t2s (loaded once, on first use): `simplified(text)` as OpenCC converts
it, `is_traditional(text)` (does OpenCC change it), and `simplified_aligned(chunk, traditional)`, the form
normalization works on: the same length as the source, so that output character i is the reading of source
character i."""
from __future__ import annotations

import re
from functools import lru_cache

from tasks.text.zhe import simplify_zhe

_RE_SURROGATE = re.compile("[\ud800-\udfff]")
_RE_RARE = re.compile("[\u3400-\u4dbf\U00020000-\U0003ffff]")


@lru_cache(maxsize=1)
def _opencc():
    import opencc
    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    """`text` as OpenCC's t2s converts it (phrases may change length)."""
    return _opencc().convert(text)


def is_traditional(text: str) -> bool:
    """Is `text` Traditional Chinese: does OpenCC's t2s change it?  (Decided per paragraph from its first
    characters, so a sentence with no other Traditional character still reads 著 as its paragraph does.)"""
    return not text.isascii() and not _RE_SURROGATE.search(text) and simplified(text) != text


def simplified_aligned(chunk: str, traditional: bool = False) -> str:
    """Simplified text with the same length as `chunk` (per-character conversion if phrases changed length).
    `traditional`: the paragraph is Traditional text (OpenCC changes it), so 著 is written 着 where it is not zhù
    (tasks/text/zhe.py); a chunk OpenCC changes is Traditional too."""
    if chunk.isascii():
        return chunk
    if _RE_SURROGATE.search(chunk):              # OpenCC needs UTF-8: keep lone surrogates out of it
        safe = _RE_SURROGATE.sub("\x00", chunk)
        conv = simplified_aligned(safe, traditional)
        return "".join(c if c != "\x00" else o for c, o in zip(conv, chunk))
    conv = simplified(chunk)
    if len(conv) != len(chunk):
        conv = "".join(x if len(x := simplified(c)) == 1 else c for c in chunk)
    if _RE_RARE.search(conv):
        # OpenCC maps some common Traditional characters to rare Simplified ones outside U+4E00-U+9FFF
        # (綝 -> U+2C62D, 喎 -> U+359E) that ChatTTS cannot read: keep the Traditional character then.
        conv = "".join(c if _RE_RARE.match(x) and not _RE_RARE.match(c) else x for c, x in zip(chunk, conv))
    return simplify_zhe(conv) if traditional or conv != chunk else conv
