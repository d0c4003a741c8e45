"""Text normalization for ChatTTS: Traditional -> Simplified (tasks/text/t2s.py), the user's lexicon
(tasks/text/lexicon.py), numbers/dates/units read aloud (wetext FSTs on the digit-bearing windows only, plus our own
rules: tasks/text/rules.py; telephone numbers and codes first, digit by digit: tasks/text/codes.py), every
punctuation mark mapped to one ChatTTS's tokenizer keeps, and unspeakable characters removed *with a record* of
what and why.  English runs (an English book, or an English phrase inside a Chinese one: `_language_runs`) are read
by tasks/text/english.py with ASCII marks; the rest the Chinese way.  `NormalizeOptions` says which of these run.

The core is `iter_spans(text, opts)`: a stream of `Span`s that tile the source text in order.  Each span says which
source characters `[start, end)` became which output text, of what kind, and - for removals - why.  `normalize`
joins the outputs; `normalize_with_map` also returns the spans; the segmenter cuts between spans and the coverage
audit lists the removals.  Work is done per sentence-sized chunk, so memory stays bounded on huge paragraphs.

Output alphabet (what ChatTTS's own normalizer lets through, `ChatTTS/norm.py` reject pattern): CJK ideographs
U+4E00-U+9FFF and 〇, ASCII letters, single spaces between Latin words, and the marks `，` `。` `、` (plus `.` inside
Latin abbreviations).  Everything else is mapped (see PUNCT_TABLE) or removed with a reason (REMOVAL_REASONS).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from tasks.book import LANGUAGES, Language
from tasks.text import codes as tn_codes, english as en_tn, rules as tn_rules
from tasks.text.lexicon import Lexicon
from tasks.text.t2s import is_traditional, simplified_aligned

# ---------------------------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------------------------
MAX_CHUNK_CHARS = 2_000          # characters: a chunk with no sentence mark is cut near this length
TN_CONTEXT_CHARS = 6             # CJK characters of context either side of a digit run handed to wetext
TN_MAX_WINDOW_CHARS = 200        # characters: longer digit windows are verbalized in pieces

# Boundary strength after a span: where the segmenter may cut, and which pause follows.
NONE, CLAUSE, SENTENCE = 0, 1, 2

SpanKind = Literal["text", "tn", "punct", "space", "lexicon", "removed"]

# Punctuation table: source mark -> (output mark, boundary).  Output "" drops the mark (no pause of its own).
# Runs of marks with no speech between them collapse to the strongest output (。 > ， > 、) - e.g. `。」` -> `。`,
# `？！` -> `。`, `：「` -> `，`.  docs/text-frontend.md shows this table (tests/tasks/test_docs.py keeps it in step).
_P: dict[str, tuple[str, int]] = {}


def _marks(chars: str, out: str, boundary: int) -> None:
    for c in chars:
        _P[c] = (out, boundary)


_marks("。．｡.", "。", SENTENCE)                # full stop; ． is the full-width period of 紅樓夢
_marks("！!﹗", "。", SENTENCE)                  # ChatTTS's normalizer maps ！ to 。
_marks("？?﹖", "。", SENTENCE)                  # ChatTTS deletes ？ outright; 。 keeps the sentence pause
_marks("…⋯", "。", SENTENCE)                    # …… ellipsis: a full pause
_marks("；;﹔", "，", SENTENCE)                  # a sentence boundary for the segmenter, spoken as a comma pause
_marks("，,﹐、﹑､", "，", CLAUSE)
_marks("、﹑､", "、", CLAUSE)                    # enumeration comma: ChatTTS keeps 、
_marks("：:︰﹕∶", "，", CLAUSE)                 # ︰ (U+FE30) is the colon of 吶喊
_marks("—–―─━－‐‑‒⸺⸻", "，", CLAUSE)            # —— dash pair: a clause pause
_marks("~～〜", "，", CLAUSE)                    # wave dash outside numbers (inside numbers TN reads 到)
_marks("（(【［[〔｛{〖〘", "，", CLAUSE)           # opening brackets: a parenthetical pause
_marks("）)】］]〕｝}〗〙", "，", CLAUSE)
_marks("「『“‘\"'〝〞〟＂＇﹁﹂﹃﹄‹›«»", "", NONE)   # quotes: no sound of their own
_marks("」』”’", "", NONE)
_marks("《》〈〉<>＜＞", "", NONE)                 # book-title marks: read straight through
_marks("·・•‧∙・", "", NONE)                     # middle dot in transliterated names
_marks("/／\\＼|｜", "，", CLAUSE)               # slash outside numbers: "A/B" -> A，B
_marks("*＊#＃@＠^＾_＿`｀=＝+＋§¶†‡※〃", "", NONE)  # layout and reference symbols (*** section breaks)
PUNCT_TABLE: dict[str, tuple[str, int]] = dict(_P)

_STRENGTH = {"": 0, "、": 1, "，": 2, ",": 2, "。": 3, ".": 3}
_PAUSES = "，。、,."                              # marks that already pause (Chinese and English)
# An English run speaks the same marks in ASCII: the boundaries stay those of PUNCT_TABLE.
_EN_MARK = {"。": ".", "，": ",", "、": ","}


# Why a character can be removed.  Every removal is recorded (position, text, reason) and listed by the audit.
REMOVAL_REASONS = {
    "placeholder": "a missing-glyph placeholder (□ ■ 囗 ?) in the source",
    "glyph-description": "a 【…】 description of a character the source could not encode (山海經: 【上丞下□】)",
    "markup": "an HTML/XML tag left in the text",
    "emoji": "an emoji or pictograph",
    "private-use": "a private-use code point (font-specific glyph)",
    "control": "a control or format character (zero-width, BOM, bidi marks)",
    "unassigned": "an unassigned or invalid code point",
    "combining-mark": "a combining mark without a base ChatTTS can read",
    "unsupported-script": "a letter of a script ChatTTS does not read (kana, hangul, Greek, Cyrillic, ...)",
    "rare-glyph": "a CJK ideograph outside U+4E00-U+9FFF (ChatTTS's tokenizer has no entry)",
    "symbol": "a symbol with no reading outside a number (currency, math, arrows, boxes)",
}

_RE_DIGIT = re.compile(r"[0-9０-９]")
_RE_LATIN = re.compile(r"[A-Za-z]")
# Han runs of an English book: ideographs, the full-width marks among them, digits glued to them (2024年, 第2位).
_HAN = "\u4e00-\u9fff\u3007"
_FULL_WIDTH_MARKS = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
_RE_HAN_RUN = re.compile(f"(?:[0-9０-９]+(?=[{_FULL_WIDTH_MARKS}]*[{_HAN}]))?[{_FULL_WIDTH_MARKS}]*[{_HAN}]"
                         f"(?:[{_HAN}{_FULL_WIDTH_MARKS}]+|[0-9０-９]+(?![0-9A-Za-z ]))*")
# A Latin-script run inside Chinese: words and numbers joined by spaces and ASCII marks, the marks after it.
_RE_LATIN_RUN = re.compile(r"(?:[A-Za-z](?:[A-Za-z'’-]*[A-Za-z])?|[0-9][0-9,.:/]*[0-9%]?)(?:[ ,.:;!?\"'’-]+"
                           r"(?:[A-Za-z](?:[A-Za-z'’-]*[A-Za-z])?|[$£€]?[0-9][0-9,.:/]*[0-9%]?))*[.,!?;:\"'’]*")
_RE_GLUED_DIGITS = re.compile(r"[0-9](?:[0-9,.:]*[0-9])?$")          # digits touching the Han after the run
_RE_WORD = re.compile(r"[A-Za-z]+")
_RE_NUMBER_WORD = re.compile(r"[0-9] ([a-z]{2,})\b")              # 3 hours
_RE_WORD_NUMBER = re.compile(r"(?<![A-Za-z])([a-z]{3,}) [0-9]")      # chapter 2
# Chunks: up to and including a run of sentence marks and the closing quotes/brackets after it.
_RE_TERM = re.compile(r"[。．｡！!？﹖﹗…⋯；;\n]+[」』”’）)】\]》〉\"'\s]*")   # sentence marks + closers
_RE_CLOSERS = re.compile(r"[」』”’）)】\]》〉\"'\s]+")
_RE_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]{0,200})?/?>")
_RE_GLYPH = re.compile(r"[【\[][^【】\[\]。，！？；\n]{1,16}[】\]]")
_RE_GLYPH_WORDS = re.compile(r"[□■囗?？]|[上下左右外内內中].*[下右内內中]|[换換去加]")


# ---------------------------------------------------------------------------------------------------------------
# Public types
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Span:
    """Source characters [start, end) became `out`.  `aligned`: out[i] is the reading of source char start+i."""
    start: int
    end: int
    out: str
    kind: SpanKind
    reason: str = ""
    boundary: int = NONE
    aligned: bool = False


@dataclass(frozen=True)
class Removal:
    """A source character run that was removed as unspeakable."""
    start: int
    text: str
    reason: str

    def as_dict(self) -> dict:
        return {"pos": self.start, "text": printable(self.text), "reason": self.reason}


def printable(text: str) -> str:
    """Text safe to write as UTF-8 JSON: lone surrogates become \\udXXX escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class NormalizeOptions:
    t2s: bool = True                 # Traditional -> Simplified (OpenCC t2s)
    tn: bool = True                  # verbalize numbers, dates, units (wetext + our rules)
    lexicon: Lexicon | None = None
    lang: Language = "zh"            # the book's reading language (tasks.book.book_language)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.lang not in LANGUAGES:
            raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, not {self.lang!r}")
        if self.lexicon is not None and not isinstance(self.lexicon, Lexicon):
            raise ValueError(f"lexicon must be a Lexicon, not {type(self.lexicon).__name__}")


_LEXICON_OUT = NormalizeOptions(t2s=False)     # a lexicon replacement is read as written: no t2s, no lexicon


# ---------------------------------------------------------------------------------------------------------------
# Character classes
# ---------------------------------------------------------------------------------------------------------------
def _is_cjk(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff" or c == "\u3007"


def _is_latin(c: str) -> bool:
    return c.isascii() and c.isalpha()


@lru_cache(maxsize=8_192)
def classify(c: str) -> tuple[str, SpanKind, str, int]:
    """(output, kind, reason, boundary) for one character outside a number window, without context."""
    if c in "□■囗":
        return "", "removed", "placeholder", NONE
    if _is_cjk(c) or _is_latin(c):
        return c, "text", "", NONE
    if c in PUNCT_TABLE:
        out, b = PUNCT_TABLE[c]
        return out, "punct", "", b
    if c.isspace():
        return " ", "space", "", NONE
    if c == "○":                                 # a zero in 一九二○年 (placeholders are found by context)
        return "〇", "text", "", NONE
    cp = ord(c)
    cat = unicodedata.category(c)
    if 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x3FFFF:
        return "", "removed", "rare-glyph", NONE
    if cat == "Co":
        return "", "removed", "private-use", NONE
    if cat in ("Cn", "Cs"):
        return "", "removed", "unassigned", NONE
    if cat in ("Cc", "Cf"):
        return "", "removed", "control", NONE
    if cp >= 0x1F000 or cp in (0xFE0F, 0xFE0E, 0x200D):
        return "", "removed", "emoji", NONE
    folded = unicodedata.normalize("NFKC", c)
    if folded != c and folded and all(_is_cjk(x) or _is_latin(x) for x in folded):
        return folded, "text", "", NONE         # full-width letters, compatibility ideographs, Kangxi radicals
    if folded != c and len(folded) == 1 and folded in PUNCT_TABLE:
        out, b = PUNCT_TABLE[folded]
        return out, "punct", "", b
    if cat.startswith("M"):
        return "", "removed", "combining-mark", NONE
    if cat.startswith("L"):
        base = unicodedata.normalize("NFKD", c)[0]
        if _is_latin(base):                     # é -> e
            return base, "text", "", NONE
        if 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x3FFFF or 0xF900 <= cp <= 0xFAFF:
            return "", "removed", "rare-glyph", NONE
        return "", "removed", "unsupported-script", NONE
    if cat.startswith("P"):                       # other punctuation: brackets pause, the rest is silent
        if cat in ("Ps", "Pe", "Pd"):
            return "，", "punct", "", CLAUSE
        return "", "punct", "", NONE
    if cat == "Nd" or cat.startswith("N"):
        return "", "removed", "symbol", NONE      # only reached for numbers outside digit windows
    return "", "removed", "symbol", NONE


# ---------------------------------------------------------------------------------------------------------------
# Numbers (TN)
# ---------------------------------------------------------------------------------------------------------------
_FW = str.maketrans({chr(0xFF10 + i): str(i) for i in range(10)} | {
    "％": "%", "．": ".", "：": ":", "／": "/", "－": "-", "＋": "+", "～": "~", "￥": "¥", "＄": "$",
    "℃": "°C", "℉": "°F", "＝": "="})
# Initialisms inside Chinese text: 2-4 lowercase letters (nba, gpu) or spaced single letters (c e o).
_RE_ACRO = re.compile(r"(?<![A-Za-z0-9 ])(?!(?:am|pm|ad|bc)(?![A-Za-z]))"
                      r"(?:[a-z]{2,4}|[a-zA-Z](?: [a-zA-Z]){1,4})(?![A-Za-z0-9])")
# A digit token: optional sign/currency/letters before, digits with number-internal marks, units after.
# A comma stays inside only as a thousands separator (1,000); spaces only before more number material.
_RE_NUMTOK = re.compile(
    r"(?:[A-Za-z]{1,4} (?=[0-9$¥￥€£₩]))?(?:[A-Za-z$¥￥€£₩±+\-−.<>≤≥=≠≈~])*[0-9０-９]"
    r"(?:[0-9０-９A-Za-z%％‰°℃℉²³.:∶/\-~+×÷±=≤≥<>≠≈·・_$¥￥€£₩：／－＋～．]|,(?=\d{3}(?!\d))|[—–]{1,2}(?=\d)"
    r"| (?=[0-9A-Za-z≤≥<>=+\-×÷±/]))*")
_RE_TRAILING = re.compile(r"[.:/\-~+=·・_：／－＋～．]+$")
_RE_AMPM = re.compile(r"(?:^|[^A-Za-z])[abp]\.[cdm]\.$", re.I)
_RE_SUFFIX = re.compile(r"\s?(?:[ap]\.?m\.?|a\.?d\.?|b\.?c\.?)(?![A-Za-z])", re.I)    # am/pm/ad/bc after 3月
# Removal reasons that apply inside a number window too (the rest - symbols - may be read by TN).
_WINDOW_REMOVALS = {"placeholder", "emoji", "private-use", "control", "unassigned", "combining-mark"}
_QUOTES = set("“”‘’「」『』\"'《》（）()")     # context a window may take in (brackets: （1879）)
_DASHES = "—–-~～"                            # a dash after a dated word joins two windows: 10月—11月


def _verbalize_number_window(text: str) -> str:
    """Verbalize one window of text that contains digits: our pre-rules, wetext, our post-rules."""
    pre = tn_rules.pre(text)
    out = tn_rules.wetext_zh_normalize(pre) if _RE_DIGIT.search(pre) else pre
    return tn_rules.post(out)


# ---------------------------------------------------------------------------------------------------------------
# Chunking and span production
# ---------------------------------------------------------------------------------------------------------------
def _iter_chunks(text: str) -> Iterator[tuple[int, int]]:
    """Sentence-sized [start, end) chunks tiling `text`, each at most about MAX_CHUNK_CHARS.

    Linear: every search is bounded by the chunk limit, so a huge paragraph without marks costs O(n)."""
    pos, n = 0, len(text)
    while pos < n:
        limit = min(n, pos + MAX_CHUNK_CHARS)
        m = _RE_TERM.search(text, pos, limit)
        if m:
            end = m.end()
            if end == limit and limit < n:               # closers may run past the limit: take a few more
                c = _RE_CLOSERS.match(text, end, min(n, end + 64))
                end = c.end() if c else end
        elif limit == n:
            end = n
        else:
            cut = max(text.rfind(c, pos + MAX_CHUNK_CHARS // 2, limit) for c in "，,、 　：")
            end = cut + 1 if cut > 0 else limit
            stop = min(n, end + 64)
            while end < stop and (_glued(text[end - 1], text[end])):
                end += 1                                  # never cut inside a number, a word or a tag
        yield pos, end
        pos = end


def _glued(a: str, b: str) -> bool:
    return (a.isascii() and a.isalnum() and b.isascii() and b.isalnum()) or a in "<【[" or b in ">】]" \
        or a.isdigit() or b.isdigit()


def _find_removals(text: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """Context-dependent removals inside text[start:end]: markup tags, glyph descriptions, '?' placeholders."""
    found: list[tuple[int, int, str]] = []
    seg = text[start:end]
    if "<" in seg:
        for m in _RE_TAG.finditer(text, start, end):
            found.append((m.start(), m.end(), "markup"))
    if "【" in seg or "[" in seg:
        for m in _RE_GLYPH.finditer(text, start, end):
            inner = m.group()[1:-1]
            inline = m.start() > 0 and _is_cjk(text[m.start() - 1])
            if _RE_GLYPH_WORDS.search(inner) or (inline and 2 <= len(inner.strip()) <= 4
                                                   and all(_is_cjk(c) or c.isspace() for c in inner)):
                found.append((m.start(), m.end(), "glyph-description"))
    if "?" in seg:
        for i in range(start, end):
            if text[i] == "?":
                nxt = text[i + 1] if i + 1 < len(text) else ""
                prv = text[i - 1] if i > 0 else ""
                if _is_cjk(nxt) or nxt == "?" or (prv == "?" and not nxt.isspace() and nxt != ""):
                    found.append((i, i + 1, "placeholder"))
                elif prv == "?" or (prv and _is_cjk(prv) and nxt in "，。、,"):
                    found.append((i, i + 1, "placeholder"))
    if "○" in seg:
        for i in range(start, end):
            if text[i] == "○" and not (
                    (i > 0 and text[i - 1] in "一二三四五六七八九十〇○零")
                    or (i + 1 < len(text) and text[i + 1] in "一二三四五六七八九十〇○零")):
                found.append((i, i + 1, "placeholder"))
    return en_tn.first_of_overlapping(sorted(found))


def _context_before(work: str, s: int, start: int, k: int) -> bool:
    """Does a number window starting at s (k characters of context taken so far) take in work[s - 1]: CJK or a
    quote, a minus, or as its first context a space after CJK or a dash after a dated word (10月—11月)?"""
    c = work[s - 1]
    if _is_cjk(c) or c in _QUOTES or (k > 0 and c in "-−"):
        return True
    return k == 0 and s - 1 > start and ((c == " " and _is_cjk(work[s - 2]))
                                         or (c in _DASHES and work[s - 2] in "年月日号时"))


def _number_windows(work: str, start: int, end: int) -> list[tuple[int, int]]:
    """[s, e) windows around digit tokens, with up to TN_CONTEXT_CHARS CJK characters (and quotes) either side."""
    wins: list[tuple[int, int]] = []
    for m in _RE_NUMTOK.finditer(work, start, end):
        s, e = m.start(), m.end()
        tok = work[s:e]
        trail = _RE_TRAILING.search(tok)
        if trail and not _RE_AMPM.search(tok):
            e -= len(trail.group())
        if s >= e:
            continue
        k = 0
        while s > start and k < TN_CONTEXT_CHARS and _context_before(work, s, start, k):
            s -= 1
            k += 1
        k = 0
        while e < end and k < TN_CONTEXT_CHARS and (_is_cjk(work[e]) or work[e] in _QUOTES
                                                    or (e + 1 < end and _is_cjk(work[e + 1])
                                                        and (work[e] == "/" or (k == 0 and work[e] == " ")))):
            e += 1
            k += 1
        if k and (m2 := _RE_SUFFIX.match(work, e, end)):
            e = m2.end()
        if wins and s <= wins[-1][1]:
            wins[-1] = (wins[-1][0], e)
        else:
            wins.append((s, e))
    return wins


def _chunk_spans(text: str, start: int, end: int, opts: NormalizeOptions, traditional: bool = False) -> list[Span]:
    """Spans tiling text[start:end], before punctuation collapsing; `traditional`: the paragraph is Traditional."""
    chunk = text[start:end]
    work_chunk = simplified_aligned(chunk, traditional) if opts.t2s else chunk
    # Work in absolute coordinates on a same-length simplified copy: work[i] <-> text[i].
    work = _Offset(work_chunk, start)
    removals = _find_removals(text, start, end)
    spans: list[Span] = []

    # Lexicon matches first (on the simplified text), then number windows, then characters.
    lex_hits: list[tuple[int, int, str]] = []
    if opts.lexicon is not None:
        pat, table = opts.lexicon.pattern(opts.t2s)
        if pat is not None:
            for m in pat.finditer(work_chunk):
                lex_hits.append((m.start() + start, m.end() + start, table[m.group()]))

    acronyms: list[tuple[int, int, str]] = []
    if opts.tn and any("a" <= c <= "z" for c in work_chunk):
        for m in _RE_ACRO.finditer(work_chunk):
            a, b = m.start() + start, m.end() + start
            prev = text[a - 1] if a > 0 else ""
            nxt = text[b] if b < len(text) else ""
            if (_is_cjk(prev) or _is_cjk(nxt)) and not (_latinish(prev) or _latinish(nxt)):
                acronyms.append((a, b, m.group().replace(" ", "").upper()))

    blocked = sorted([(s, e, "removed", r) for s, e, r in removals]
                     + [(s, e, "lexicon", rep) for s, e, rep in lex_hits]
                     + [(s, e, "acronym", rep) for s, e, rep in acronyms])
    events = en_tn.first_of_overlapping(blocked)

    pos = start
    for s, e, kind, val in events + [(end, end, "", "")]:
        if pos < s:
            spans.extend(_plain_spans(text, work, pos, s, opts))
        if kind == "removed":
            spans.append(Span(s, e, "", "removed", val))
        elif kind == "lexicon":
            inner = normalize(val, _LEXICON_OUT) if val else ""
            spans.append(Span(s, e, inner, "lexicon"))
        elif kind == "acronym":
            spans.append(Span(s, e, val, "text", aligned=len(val) == e - s))
        pos = max(pos, e)
    return spans


class _Offset:
    """A string viewed at absolute offsets (work[i] for i in [base, base+len))."""
    __slots__ = ("base", "s")

    def __init__(self, s: str, base: int):
        self.s, self.base = s, base

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.s[i.start - self.base:i.stop - self.base]
        return self.s[i - self.base]


def _plain_spans(text: str, work: _Offset, start: int, end: int, opts: NormalizeOptions) -> list[Span]:
    """Spans for a stretch with no lexicon hits or context removals: its English runs the English way
    (tasks/text/english.py), the rest the Chinese way (number windows, then characters)."""
    runs = _language_runs(text, start, end, opts) if opts.lang == "en" or _RE_LATIN.search(text, start, end) \
        else [(start, end, "zh")]
    spans: list[Span] = []
    for s, e, lang in runs:
        spans.extend(_en_spans(text, work, s, e, opts) if lang == "en" else _zh_spans(text, work, s, e, opts))
    return spans


def _zh_spans(text: str, work: _Offset, start: int, end: int, opts: NormalizeOptions) -> list[Span]:
    """Telephone numbers and codes (tasks/text/codes.py), number windows read by wetext's Chinese grammar and our
    rules between them, then characters."""
    spans: list[Span] = []
    pos = start
    seg = work[start:end]
    wins: list[tuple[int, int, str | None]] = []
    if opts.tn and _RE_DIGIT.search(seg):
        gap = 0
        for s, e, reading in tn_codes.find_codes(seg, 0, len(seg), _say) + [(len(seg), len(seg), "")]:
            wins += [(ws, we, None) for ws, we in _number_windows(seg, gap, s)] + [(s, e, reading)]
            gap = e
        wins = [(s + start, e + start, reading) for s, e, reading in wins]
    for ws, we, code in wins + [(end, end, None)]:
        if pos < ws:
            spans.extend(_char_spans(text, work, pos, ws))
        if ws < we:
            spans.extend(_tn_spans(text, work, ws, we) if code is None else [Span(ws, we, code, "tn")])
        pos = max(pos, we)
    return spans


def _say(text: str) -> str:
    """Plain text (a keyword and the marks after it, inside a code's span) as the paragraph renders it."""
    return "".join(classify(c)[0] for c in text)


def _en_spans(text: str, work: _Offset, start: int, end: int, opts: NormalizeOptions) -> list[Span]:
    """An English run: number windows read by english.verbalize, abbreviations and Roman numerals outside them as
    words, the rest character by character with English (ASCII) marks."""
    def outside(found, taken):
        return [f for f in found if not any(f[0] < b and a < f[1] for a, b, *_ in taken)]

    addresses = en_tn.find_addresses(text, start, end) if opts.tn and ("@" in text or "." in text) else []
    wins = en_tn.number_windows(text, start, end) if opts.tn and _RE_DIGIT.search(text, start, end) else []
    wins = outside([(s, e, None) for s, e in wins], addresses)
    words = outside(outside(en_tn.find_words(text, start, end), addresses), wins) if opts.tn else []
    events = sorted(addresses + wins + words, key=lambda ev: ev[0])
    spans: list[Span] = []
    pos = start
    for s, e, reading in events + [(end, end, "")]:
        if pos < s:
            spans.extend(_char_spans(text, work, pos, s, english=True))
        if s < e and reading is None:
            spans.extend(_tn_spans(text, work, s, e, english=True))
        elif s < e:
            spans.append(Span(s, e, reading, "tn", boundary=SENTENCE if reading.endswith(".") else NONE))
        pos = max(pos, e)
    return _spaced(spans, text)


def _spaced(spans: list[Span], text: str) -> list[Span]:
    """An English run's spans with one space wherever a reading (a `tn` span: our rules, wetext, a word's reading)
    meets a letter, a digit or another reading with nothing spoken between them: `CSS3` -> CSS three, `B2A23C` ->
    B two A twenty three C, `Dr.Smith` -> doctor Smith, `$12@12%` -> twelve dollars twelve percent.  They stay
    one word where the source is one word: a reading that took the next word's capital (`St. P|aul` -> saint
    Paul, `J. M. B|arrie`) or an apostrophe before letters (`12's` -> twelves).  The space goes on the reading's
    side (the reading after, else the one before), so a text span stays aligned."""
    out = list(spans)
    last = -1                                   # the last span that says something
    for i, sp in enumerate(out):
        if not sp.out:
            continue
        if last >= 0:
            a = out[last]
            if "tn" in (a.kind, sp.kind) and _latinish(a.out[-1]) and _latinish(sp.out[0]) \
                    and not _one_word(text, a.end, sp.start):
                if sp.kind == "tn":
                    out[i] = sp = replace(sp, out=" " + sp.out)
                else:
                    out[last] = replace(a, out=a.out + " ")
        last = i
    return out


def _one_word(text: str, at: int, to: int) -> bool:
    """Is text[at:to] (between two spoken spans) inside one source word: nothing between two letters, or only
    apostrophes before a letter?"""
    gap = text[at:to]
    if to >= len(text) or not _is_latin(text[to]) or at == 0:
        return False
    return (not gap and _is_latin(text[at - 1])) or (gap != "" and all(c in "'’" for c in gap))


def _language_runs(text: str, start: int, end: int, opts: NormalizeOptions) -> list[tuple[int, int, Language]]:
    """[(start, end, language)] tiling text[start:end].

    In an English book everything but the Han runs is English (a Han run takes the full-width marks and the
    digits glued to it: 第2位, 2024年).  In a Chinese book a Latin-script run is English only where it is a phrase
    or a sentence (see _english_phrase): `iPhone 15 Pro`, `3 hours`, a quotation; `Xbox360`, `NBA`, `10 GB`,
    `COVID-19` stay with the Chinese reading."""
    runs: list[tuple[int, int, Language]] = []
    if opts.lang == "en":
        pos = start
        for m in _RE_HAN_RUN.finditer(text, start, end):
            if pos < m.start():
                runs.append((pos, m.start(), "en"))
            runs.append((m.start(), m.end(), "zh"))
            pos = m.end()
        if pos < end:
            runs.append((pos, end, "en"))
        return _merge_runs(runs)
    if not opts.tn:                                  # no reading to choose: the Chinese marks everywhere
        return [(start, end, "zh")]
    pos = start
    for m in _RE_LATIN_RUN.finditer(text, start, end):
        s, e = m.start(), m.end()
        if (g := _RE_GLUED_DIGITS.search(text, s, e)) and g.end() == e and e < end and _is_cjk(text[e]):
            e = g.start()                            # iPhone 15号: the number goes with the Chinese after it
        if not _english_phrase(text[s:e]):
            continue
        if pos < s:
            runs.append((pos, s, "zh"))
        runs.append((s, e, "en"))
        pos = e
    if pos < end:
        runs.append((pos, end, "zh"))
    return _merge_runs(runs)


def _merge_runs(runs: list[tuple[int, int, Language]]) -> list[tuple[int, int, Language]]:
    out: list[tuple[int, int, Language]] = []
    for s, e, lang in runs:
        if s >= e:
            continue
        if out and out[-1][2] == lang:
            out[-1] = (out[-1][0], e, lang)
        else:
            out.append((s, e, lang))
    return out


def _english_phrase(run: str) -> bool:
    """A Latin-script run inside Chinese is read the English way when it is a phrase: two words of two or more
    letters, one of them with a lower-case letter (`iPhone 15 Pro`, `Harry Potter`, `I am fine`), or a number
    next to a lower-case word that is not a unit wetext's Chinese grammar knows (`3 hours`, `chapter 2`; not
    `3 km`, `5 pm`)."""
    words = _RE_WORD.findall(run)
    long = [w for w in words if len(w) >= 2]
    if len(long) >= 2 and any(c.islower() for w in long for c in w):
        return True
    m = _RE_NUMBER_WORD.search(run) or _RE_WORD_NUMBER.search(run)
    return m is not None and m.group(1) not in ("am", "pm", "ad", "bc") and not tn_rules.zh_unit(m.group(1))


def _tn_spans(text: str, work: _Offset, start: int, end: int, english: bool = False) -> list[Span]:
    """One number window -> spans; unspeakable characters inside are removed first (and recorded)."""
    spans: list[Span] = []
    kept = []
    for i in range(start, end):
        c = work[i]
        out, kind, reason, _ = classify(c)
        if kind == "removed" and reason in _WINDOW_REMOVALS:
            spans.append(Span(i, i + 1, "", "removed", reason))
        else:
            kept.append(c)
    window = "".join(kept).translate(_FW)
    if english:
        return _interleave_removed(spans, Span(start, end, en_tn.verbalize(window), "tn"))
    if len(window) > TN_MAX_WINDOW_CHARS:
        out = "".join(_verbalize_number_window(window[i:i + TN_MAX_WINDOW_CHARS])
                      for i in range(0, len(window), TN_MAX_WINDOW_CHARS))
    else:
        out = _verbalize_number_window(window)
    out = _clean_output(out)
    # The TN span covers the whole window; removed characters inside are reported by separate zero-output spans
    # that come first (the segmenter never cuts inside a window).
    return _interleave_removed(spans, Span(start, end, out, "tn"))


def _interleave_removed(removed: list[Span], tn: Span) -> list[Span]:
    """A window with removed characters inside: report them as removals, and the window as one TN span.

    To keep spans tiling the source without overlap, the TN span is split around each removed character:
    the first piece carries the whole output; later pieces carry none."""
    out: list[Span] = []
    pos = tn.start
    first = True
    for r in removed:
        if pos < r.start:
            out.append(Span(pos, r.start, tn.out if first else "", "tn"))
            first = False
        out.append(r)
        pos = r.end
    if pos < tn.end:
        out.append(Span(pos, tn.end, tn.out if first else "", "tn"))
        first = False
    if first:                                    # everything removed but the window had output: keep it
        out.append(Span(tn.end, tn.end, tn.out, "tn"))
    return out


def _clean_output(s: str) -> str:
    """Map what TN left behind (marks, stray digits, symbols) into the output alphabet."""
    s = s.replace('\\"', '"')                      # wetext escapes a quote it passes through (的\" -> 的，)
    res = []
    for i, c in enumerate(s):
        if _is_cjk(c) or _is_latin(c) or c == " ":
            res.append(c)
        elif c.isdigit() and c.isascii():
            res.append(tn_rules.digits_zh(c))
        elif c == "." and i < len(s) - 1:          # a dot TN did not read (Vol.3): silent inside a window
            continue
        elif c in PUNCT_TABLE:
            res.append(PUNCT_TABLE[c][0])
        else:
            out, kind, _, _ = classify(c)
            if kind in ("text", "punct"):
                res.append(out)
    out = "".join(res).strip()
    if " " in out:                               # a space only between two Latin words
        out = re.sub(r" +", " ", out)
        out = re.sub(r"(?<![A-Za-z]) | (?![A-Za-z])", "", out)
    return out


def _char_spans(text: str, work: _Offset, start: int, end: int, english: bool = False) -> list[Span]:
    """Character-level spans: runs of speakable text merged into one aligned span; `english`: ASCII marks."""
    spans: list[Span] = []
    run_start = -1
    run: list[str] = []

    def flush(i: int) -> None:
        nonlocal run_start, run
        if run_start >= 0:
            out = "".join(run)
            spans.append(Span(run_start, i, out, "text", aligned=len(out) == i - run_start))
            run_start, run = -1, []

    for i in range(start, end):
        c = work[i]
        out, kind, reason, boundary = classify(c)
        if kind == "text":
            if run_start < 0:
                run_start = i
            run.append(out)
            continue
        flush(i)
        if kind == "punct" and c in ".." and c == "." and 0 < i < len(text) - 1 \
                and _is_latin(text[i - 1]) and _is_latin(text[i + 1]):
            out, boundary = ".", NONE              # e.g. "e.g" inside Latin words
        if kind == "punct" and c in "-‐‑－" and 0 < i < len(text) - 1 and (
                (_is_latin(text[i - 1]) and _is_latin(text[i + 1]))
                or (english and _latinish(text[i - 1]) and _latinish(text[i + 1]))):
            out, kind, boundary = " ", "space", NONE  # hyphenated Latin words
        if kind == "punct" and c in "'’" and 0 < i < len(text) - 1 \
                and _is_latin(text[i - 1]) and _is_latin(text[i + 1]):
            out = ""
        if english and kind == "punct":
            out = _EN_MARK.get(out, out)
        spans.append(Span(i, i + 1, out, kind, reason, boundary))
    flush(end)
    return spans


def _finish(spans: list[Span], text: str, state: dict) -> list[Span]:
    """Resolve whitespace by context and collapse runs of marks to the strongest one."""
    res: list[Span] = []
    n = len(spans)
    i = 0
    while i < n:
        sp = spans[i]
        if sp.kind not in ("punct", "space", "removed") or (sp.kind == "removed" and sp.start == sp.end):
            if sp.out and sp.out[0] in _PAUSES and state.get("last", "") in ("", " ", *_PAUSES):
                sp = Span(sp.start, sp.end, sp.out.lstrip(_PAUSES), sp.kind, sp.reason, sp.boundary, False)
            if sp.out:
                state["last"] = sp.out[-1]
            res.append(sp)
            i += 1
            continue
        # A run of marks/spaces/removals with no speech in it.
        j = i
        while j < n and (spans[j].kind in ("punct", "space") or (spans[j].kind == "removed")) \
                and not (spans[j].kind == "removed" and spans[j].start == spans[j].end):
            j += 1
        run = spans[i:j]
        nxt = next((s.out[0] for s in spans[j:] if s.out), "")
        prev = state.get("last", "")
        best_out, best_at, bound = "", -1, NONE
        for k, s in enumerate(run):
            bound = max(bound, s.boundary)
            if s.kind == "punct" and _STRENGTH.get(s.out, 0) > _STRENGTH.get(best_out, 0):
                best_out, best_at = s.out, k
        if best_at < 0:
            if any(s.out == "." for s in run):
                best_at = next(k for k, s in enumerate(run) if s.out == ".")
                best_out = "."
            else:
                has_space = any(s.kind == "space" for s in run)
                ideo = any(s.kind == "space" and "\u3000" in text[s.start:s.end] for s in run)
                if has_space and (_latinish(prev) or prev in ",.") and _latinish(nxt):
                    best_out = " "
                elif ideo and _is_cjk(prev) and _is_cjk(nxt):
                    best_out = "，"
                    bound = max(bound, CLAUSE)
                if best_out:
                    best_at = next(k for k, s in enumerate(run) if s.kind == "space")
        stronger = prev and prev in "，、," and _STRENGTH.get(best_out, 0) > _STRENGTH[prev]
        if stronger and _strengthen_last_mark(res, best_out):
            state["last"] = prev = best_out         # a number window ended with "）", the run holds "。"
        if (not prev or prev in _PAUSES or prev == " ") and best_out != " ":
            best_out = ""                           # nothing to pause after (paragraph start, or already paused)
        elif (best_out == "," or (best_out == "." and bound >= SENTENCE)) \
                and _latinish(nxt or text[run[-1].end:run[-1].end + 1]):
            best_out += " "                         # English: "fine, thank you", one space after the mark
        for k, s in enumerate(run):
            out = best_out if k == best_at else ""
            if s.kind == "removed":
                out = ""
            res.append(Span(s.start, s.end, out, s.kind, s.reason, bound if k == len(run) - 1 else NONE,
                            s.aligned and out == s.out))
        if best_out:
            state["last"] = best_out
        i = j
    return res


def _strengthen_last_mark(res: list[Span], mark: str) -> bool:
    """Replace the mark that ends the last spoken output in `res` (this chunk) by the stronger `mark`; False when
    this chunk has said nothing yet (the weaker mark was yielded with the chunk before)."""
    j = next((j for j in range(len(res) - 1, -1, -1) if res[j].out), -1)
    if j < 0:
        return False
    sp = res[j]
    res[j] = Span(sp.start, sp.end, sp.out[:-1] + mark, sp.kind, sp.reason, sp.boundary, False)
    return True


def _latinish(c: str) -> bool:
    return bool(c) and c.isascii() and c.isalnum()


def iter_spans(text: str, opts: NormalizeOptions = NormalizeOptions()) -> Iterator[Span]:
    """Spans tiling `text` in order; chunk by chunk, so memory is bounded by the chunk size."""
    state: dict = {}
    traditional = opts.t2s and is_traditional(text[:MAX_CHUNK_CHARS])
    for s, e in _iter_chunks(text):
        yield from _finish(_chunk_spans(text, s, e, opts, traditional), text, state)


def normalize_with_map(text: str, opts: NormalizeOptions = NormalizeOptions()) -> tuple[str, list[Span]]:
    """(normalized text, spans).  `removals(spans)` lists what was removed and why."""
    spans = list(iter_spans(text, opts))
    return "".join(s.out for s in spans), spans


def normalize(text: str, opts: NormalizeOptions = NormalizeOptions()) -> str:
    """Text ChatTTS can read aloud: simplified, numbers verbalized, marks mapped, unspeakables removed."""
    return "".join(s.out for s in iter_spans(text, opts))


def removals(spans: Iterable[Span], text: str, base: int = 0) -> list[Removal]:
    """Removed (unspeakable) runs, adjacent ones of the same reason merged; positions offset by `base`."""
    out: list[Removal] = []
    for s in spans:
        if s.kind != "removed" or s.start == s.end:
            continue
        if out and out[-1].reason == s.reason and out[-1].start + len(out[-1].text) == s.start + base:
            last = out[-1]
            out[-1] = Removal(last.start, last.text + text[s.start:s.end], last.reason)
        else:
            out.append(Removal(s.start + base, text[s.start:s.end], s.reason))
    return out

