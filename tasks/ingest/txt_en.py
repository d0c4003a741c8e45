"""English plain-text books (Project Gutenberg's and others'): chapter headings, the front matter before the
first one, and paragraphs from hard-wrapped lines.  `tasks.ingest.txt.read_txt` calls `english_chapters` for a
text whose letters are mostly Latin (after the Gutenberg header and licence are gone); Chinese text never
reaches this module.

Headings (a line of its own, after a blank line):
- a division word and a number: `CHAPTER I.`, `Chapter 1`, `CHAPTER THE FIRST`, `Chapter Twelve`, `BOOK II`,
  `PART ONE`, `Letter 4`, `STAVE I:  MARLEY'S GHOST`, optionally with the title on the same line
  (`CHAPTER I. Down the Rabbit-Hole`);
- a bare roman numeral (`I`, `IV.`), only where the book numbers its chapters that way (I and II both occur).
A heading without a title takes the next line as its title when that line stands alone, is short and is
capitalized like a title (`Chapter I.` / `PETER BREAKS THROUGH`).  A heading with no text under it (`PART ONE`
right before `CHAPTER I`) becomes part of the next heading's title.  Lines of a contents list follow one
another without blank lines, so they are never headings.

Paragraphs: the lines between blank lines are one paragraph (Gutenberg's convention), joined with a space, or
with nothing after a line-end hyphen or dash (`waistcoat-` / `pocket`: Gutenberg does not break words, so the
hyphen is the word's own and stays); verse and lists inside such a block are joined too, their line ends
marked by their own punctuation.  A line indented deeper than the one before, after a sentence end, starts a
new paragraph (books that indent paragraphs without blank lines).  A file whose lines run long (unwrapped:
one paragraph per line) has every line as a paragraph.  `_italic_` underscores and `[Illustration]` tags are
markup, not text: removed.

Front matter (lines before the first heading): the contents list, Gutenberg's credit and licence notes and
illustration tags are dropped; what is left is a title page (dropped: its title and author are the book's
metadata) when every paragraph is short, else it is read as the first chapter (a preface, a dedication, an
epigraph), title page included."""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from tasks.ingest.common import clean_title, collapse_ws, roman_sum

MAX_HEADING_CHARS = 80              # characters; a longer line is never a heading
MAX_TITLE_LINE_CHARS = 60           # characters; a heading's title on a line of its own
MAX_TITLE_LINES = 3                 # lines; a title in capitals may be wrapped over this many
MAX_TITLE_GAP_LINES = 2             # blank lines allowed between a heading and its title line
MIN_TITLE_CAPITALIZED = 0.6         # share of a title line's words of 4+ letters that start with a capital
MAX_WRAP_WIDTH = 100                # characters; hard-wrapped text (Gutenberg: ~70) has its long lines under this
WRAP_PERCENTILE = 0.95              # ... measured at this percentile of the non-blank lines' lengths
MAX_CONTENTS_START_LINE = 600       # lines; a `Contents` line further into the text is not the book's contents list
MAX_TITLE_PAGE_CHARS = 60           # characters; front matter whose paragraphs are all this short is a title page
MIN_WRAPPED_LINE_CHARS = 40         # characters; shorter lines are not evidence of wrapping (headings, short replies)
MIN_MIDSENTENCE_SHARE = 0.5         # share of lines before a single blank line cut mid-sentence in a double-spaced file

_ONES = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
             "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth").split()
_TENS_ORDINALS = [t[:-1] + "ieth" for t in _TENS]
_CARDINAL = rf"(?:(?:{'|'.join(_TENS)})(?:[- ](?:{'|'.join(_ONES[:9])}))?|{'|'.join(_ONES)})"
_ORDINAL = (rf"(?:(?:{'|'.join(_TENS)})[- ](?:{'|'.join(_ORDINALS[:9])})|{'|'.join(_TENS_ORDINALS)}|"
            rf"{'|'.join(_ORDINALS)})")
_ROMAN = r"[IVXLC]{1,8}"
_NUMBER = rf"(?:[0-9]{{1,3}}|{_ROMAN}|(?i:the\s+{_ORDINAL}|{_ORDINAL}|{_CARDINAL}))"
_DIVISIONS = ("CHAPTER", "BOOK", "PART", "VOLUME", "LETTER", "STAVE", "CANTO", "EPISODE", "SECTION")
_DIVISION = "|".join(w for d in _DIVISIONS for w in (d, d.capitalize()))
# A division word, its number, then the end of the line or a separator and a title.
HEADING_RE = re.compile(rf"^(?:{_DIVISION})\s+{_NUMBER}(?P<rest>(?:\s*[.:\-—–]|\s).*)?$")
BARE_ROMAN_RE = re.compile(rf"^(?P<num>{_ROMAN})\.?$")
_NUMBER_KEY_RE = re.compile(rf"^(?:(?:{_DIVISION})\s+{_NUMBER}|{_ROMAN})\b")
ROMAN_TITLE_RE = re.compile(rf"^(?P<num>{_ROMAN})\.\s+(?P<title>\S.*)$")   # "I. A SCANDAL IN BOHEMIA"
_CONTENTS_RE = re.compile(r"^(?:table of )?contents[.:]?$", re.I)
_CREDIT_RE = re.compile(r"^(?:Produced by|E-?text prepared by|Transcribed by|Transcribed from|Transcriber[’']s note)"
                        r"|Project Gutenberg|\bcopyright\b|\be-?text\b|\be-?book\b", re.I)
_ILLUSTRATION_RE = re.compile(r"^\[Illustration[^\]]*\]$", re.I | re.S)
_SEPARATOR_RE = re.compile(r"^[\s*\-=_~.·•]{3,}$")   # "* * * * *": a scene break, not text
_ITALIC_RE = re.compile(r"(?<![\w_])_(?=\S)([^_]*?\S)_(?![\w_])")
_SENTENCE_END = tuple(".!?\"'”’)")


@dataclass(frozen=True)
class _Heading:
    line: int          # index of the heading line
    title: str
    end: int           # index of the first line after the heading (and its title line)


@dataclass(frozen=True)
class EnglishText:
    title_page: list[str]                      # the front matter's paragraphs (for the title and author)
    front: list[str]                           # the front matter read as a chapter: [] when it is a title page
    chapters: list[tuple[str, list[str]]]      # (heading title, paragraphs), in order


def english_chapters(lines: list[str], *, gutenberg: bool) -> EnglishText:
    """The front matter and chapters of an English text's lines; `gutenberg` drops Gutenberg's credit and licence
    notes from the front matter."""
    wrapped = _is_hard_wrapped(lines)
    heads = _headings(lines)
    first = heads[0].line if heads else len(lines)
    page = _front_paragraphs(lines[:first], wrapped, gutenberg=gutenberg)
    front = [] if heads and all(len(p) <= MAX_TITLE_PAGE_CHARS for p in page) else page
    chapters: list[tuple[str, list[str]]] = []
    pending = ""                       # titles of headings with no text under them (PART ONE before CHAPTER I)
    for k, h in enumerate(heads):
        stop = heads[k + 1].line if k + 1 < len(heads) else len(lines)
        paras = paragraphs(lines[h.end:stop], wrapped)
        title = _join_titles(pending, h.title) if pending else h.title
        if not paras and k + 1 < len(heads):
            pending = title
            continue
        pending = ""
        chapters.append((clean_title(title), paras))
    return EnglishText(title_page=page, front=front, chapters=chapters)


def title_lines(front: list[str]) -> tuple[str, str]:
    """(title, author) from a title page's paragraphs: the first short one, and a 'by ...' one or the next."""
    short = [p for p in front if len(p) <= MAX_TITLE_PAGE_CHARS and not p.startswith("[")]
    if not short:
        return "", ""
    title = short[0]
    by = next((p for p in short[1:] if p.lower().startswith("by ")), "")
    author = by[3:].strip() if by else (short[1] if len(short) > 1 else "")
    return clean_title(title), clean_title(author)


# ---------------------------------------------------------------------------------------------- headings
def heading_text(line: str) -> str | None:
    """The heading if `line` (stripped) is a division heading (`CHAPTER I.`, `Chapter 1 The Bertolini`), else None.
    Bare roman numerals are headings only in context (see _headings)."""
    s = line.strip()
    if not s or len(s) > MAX_HEADING_CHARS or s[0] not in "CBPVLSEcbpvlse":
        return None
    m = HEADING_RE.match(s)
    if m is None:
        return None
    rest = (m.group("rest") or "").strip(" :-—–")
    if rest.strip(".") and not re.search(r"[A-Za-z]", rest):
        return None                    # "Chapter I.]": the end of an illustration caption
    # "Chapter 3 was not written." is a sentence: a title on the heading's line is capitalized like one.
    if rest.strip(".") and (rest[-1] in ",;" or (rest[-1] == "." and not _capitalized(rest))):
        return None
    return s


def _roman_heading(line: str) -> int | None:
    """The number of a bare roman numeral line (`IV.`) or one with a capitalized title (`I. A SCANDAL IN
    BOHEMIA`), else None."""
    s = line.strip()
    m = BARE_ROMAN_RE.match(s)
    if m is None:
        m = ROMAN_TITLE_RE.match(s)
        if m is None or len(s) > MAX_HEADING_CHARS or not _is_title_line(m.group("title")):
            return None
    return roman_sum(m.group("num"))


def _headings(lines: list[str]) -> list[_Heading]:
    blank = [not ln.strip() for ln in lines]
    n = len(lines)

    def alone(i: int) -> bool:  # a line after a blank one (or the start), with a blank line or the end after it
        return (i == 0 or blank[i - 1]) and (i + 1 >= n or blank[i + 1])

    def titled(i: int) -> bool:  # ... or with title lines and then a blank line or the end
        return _title_block(lines, blank, i + 1) > 0

    found: list[int] = []
    titled_roman: list[tuple[int, int]] = []   # I. A SCANDAL IN BOHEMIA, or I. / THE EVE OF THE WAR.
    bare: list[tuple[int, int]] = []           # I.
    for i, ln in enumerate(lines):
        if blank[i] or len(ln) > 2 * MAX_HEADING_CHARS or not (i == 0 or blank[i - 1]):
            continue
        if heading_text(ln):
            if alone(i) or titled(i):
                found.append(i)
        elif (value := _roman_heading(ln)) is not None and (alone(i) or titled(i)):
            (bare if alone(i) and BARE_ROMAN_RE.match(ln.strip()) else titled_roman).append((i, value))
    # Numbered with titles, and bare numerals counting again from I inside them (Sherlock Holmes's stories and
    # their parts): the titled ones are the chapters, the bare ones stay in the text.
    if _numbers_chapters(titled_roman) and sum(v == 1 for _, v in bare) >= 2:
        bare = []
    for group in (titled_roman, bare, titled_roman + bare):
        if _numbers_chapters(group):  # the book numbers its chapters I, II, ...: they are headings
            found.extend(i for i, _ in group)
            break
    if len(found) < 2:
        found = _contents_titles(lines, blank) or found
    heads = [_complete(lines, blank, i) for i in sorted(set(found))]
    # Leading "headings" whose sections hold only contents entries are a contents list laid out with blank lines
    # (BOOK ONE.—THE COMING OF THE MARTIANS / I. THE EVE OF THE WAR. / II. THE FALLING STAR. ...).
    first = 0
    while first < len(heads) and _is_contents(lines[heads[first].end:heads[first + 1].line
                                                     if first + 1 < len(heads) else n]):
        first += 1
    heads = heads[first:]
    # So is a heading with no prose under it whose number comes again later (Don Quixote's contents list of
    # two-line CHAPTER entries); PART ONE before CHAPTER I comes once.
    later: dict[str, int] = {}
    for k, h in enumerate(heads):
        later[_number_key(lines[h.line])] = k
    return [h for k, h in enumerate(heads)
            if later[_number_key(lines[h.line])] == k
            or _has_prose(lines[h.end:heads[k + 1].line if k + 1 < len(heads) else n])]


def _number_key(line: str) -> str:
    m = _NUMBER_KEY_RE.match(line.strip())
    return re.sub(r"\s+", " ", m.group(0) if m else line.strip()).casefold()


def _has_prose(lines: list[str]) -> bool:
    return any(len(ln.strip()) >= MIN_WRAPPED_LINE_CHARS and not ln.isupper() and not _is_entry(ln) for ln in lines)


def _numbers_chapters(numbered: list[tuple[int, int]]) -> bool:
    values = {v for _, v in numbered}
    return 1 in values and 2 in values


def _contents_titles(lines: list[str], blank: list[bool]) -> list[int]:
    """Headings named by the book's contents list, for books whose chapters have titles and no numbers
    (Jekyll and Hyde: `Contents` / `STORY OF THE DOOR` / ...): the lines after the list that repeat an entry,
    each after a blank line, in the list's order."""
    entries, end = contents_entries(lines)
    keys = [_key(e) for e in entries]
    out: list[int] = []
    k = 0
    for i in range(end, len(lines)):
        if k < len(keys) and not blank[i] and (i == 0 or blank[i - 1]) and _key(lines[i]) == keys[k]:
            out.append(i)
            k += 1
    return out if len(out) >= 2 else []


def contents_entries(lines: list[str]) -> tuple[list[str], int]:
    """The entries of the contents list that follows a `Contents` line near the start (each a short line; the
    list ends at a run of blank lines, a long line or an entry's repeat) and the index after the list."""
    start = next((i for i, ln in enumerate(lines[:MAX_CONTENTS_START_LINE]) if _CONTENTS_RE.match(ln.strip())), None)
    if start is None:
        return [], 0
    entries: list[str] = []
    gap = 0
    i = start + 1
    while i < len(lines):
        s = lines[i].strip()
        if not s:
            gap += 1
            if entries and gap >= 2:
                break
        elif len(s) > MAX_HEADING_CHARS or _key(s) in {_key(e) for e in entries[:1]}:
            break
        else:
            entries.append(s)
            gap = 0
        i += 1
    return entries, i


def _key(line: str) -> str:
    return re.sub(r"\s+", " ", line.strip()).casefold()


def _is_contents(lines: list[str]) -> bool:
    entries = [ln for ln in lines if ln.strip()]
    return bool(entries) and all(_is_entry(ln) for ln in entries)


def _is_entry(line: str) -> bool:
    """A line of a contents list: a heading, a roman numeral with or without a title, 'Contents'."""
    s = line.strip()
    return bool(heading_text(s) or BARE_ROMAN_RE.match(s) or ROMAN_TITLE_RE.match(s) or _CONTENTS_RE.match(s))


def _complete(lines: list[str], blank: list[bool], i: int) -> _Heading:
    """A heading without a title of its own takes the title line after it (`CHAPTER I` / `Down the Rabbit-Hole`)."""
    head = _ITALIC_RE.sub(r"\1", lines[i].strip())
    m = HEADING_RE.match(head)
    if (m and (m.group("rest") or "").strip(" .:-—–")) or ROMAN_TITLE_RE.match(head):
        # A title in capitals wrapped onto the next lines (CHAPTER I WHICH TREATS OF THE CHARACTER AND /
        # PURSUITS OF THE FAMOUS GENTLEMAN DON QUIXOTE OF LA MANCHA) continues the heading.
        k = _title_block(lines, blank, i + 1) if head.isupper() else 0
        if k and all(lines[j].strip().isupper() for j in range(i + 1, i + 1 + k)):
            return _Heading(i, " ".join([head] + [lines[j].strip() for j in range(i + 1, i + 1 + k)]), i + 1 + k)
        return _Heading(i, head, i + 1)
    j = i + 1
    while j < len(lines) and blank[j] and j - i <= MAX_TITLE_GAP_LINES:
        j += 1
    k = _title_block(lines, blank, j)
    if k:
        title = " ".join(_ITALIC_RE.sub(r"\1", lines[x].strip()) for x in range(j, j + k))
        return _Heading(i, _join_titles(head, title), j + k)
    return _Heading(i, head, i + 1)


def _title_block(lines: list[str], blank: list[bool], j: int) -> int:
    """How many lines from j are a heading's title: one title line, or up to MAX_TITLE_LINES in capitals, then a
    blank line or the end; 0 when there is none."""
    k = j
    while k < len(lines) and not blank[k] and k - j < MAX_TITLE_LINES and _is_title_line(lines[k]):
        k += 1
    if k == j or (k < len(lines) and not blank[k]):
        return 0
    return k - j if k - j == 1 or all(lines[x].strip().isupper() for x in range(j, k)) else 0


def _is_title_line(line: str) -> bool:
    """Short, capitalized like a title, no sentence punctuation at its end, not a heading or a quotation."""
    s = line.strip().strip("_*")
    if (not s or len(s) > (MAX_HEADING_CHARS if s.isupper() else MAX_TITLE_LINE_CHARS) or heading_text(s)
            or BARE_ROMAN_RE.match(s) or ROMAN_TITLE_RE.match(s)):
        return False
    if (s[-1] in ",;:" or (s[-1] == "." and not s.isupper())) or s[0] in "\"'“‘([" or not s[0].isupper():
        return False                   # "THE EVE OF THE WAR." is a title; "To Mrs. Saville, England." is not
    return _capitalized(s)


def _capitalized(s: str) -> bool:
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z’'-]*", s) if len(w) >= 4]
    return not words or sum(w[0].isupper() for w in words) >= MIN_TITLE_CAPITALIZED * len(words)


def _join_titles(head: str, title: str) -> str:
    """`Chapter I.` + `PETER BREAKS THROUGH` -> `Chapter I. PETER BREAKS THROUGH`; `CHAPTER I` + `Down the
    Rabbit-Hole` -> `CHAPTER I. Down the Rabbit-Hole` (a full stop where the heading had no mark: it is a pause)."""
    head = head.rstrip()
    return f"{head} {title}" if head[-1:] in ".:!?" else f"{head}. {title}"


# ---------------------------------------------------------------------------------------------- front matter
def _front_paragraphs(lines: list[str], wrapped: bool, *, gutenberg: bool) -> list[str]:
    entries = {_key(e) for e in contents_entries(lines)[0]}
    keep = [ln for ln in lines if not ln.strip() or not (_is_entry(ln) or (entries and _key(ln) in entries))]
    paras = paragraphs(keep, wrapped)
    return [p for p in paras if not _CREDIT_RE.search(p)] if gutenberg else paras


# ---------------------------------------------------------------------------------------------- paragraphs
def _is_hard_wrapped(lines: list[str]) -> bool:
    lengths = sorted(len(ln.rstrip()) for ln in lines if ln.strip())
    return not lengths or lengths[int(WRAP_PERCENTILE * (len(lengths) - 1))] <= MAX_WRAP_WIDTH


def double_spaced_wraps(lines: list[str]) -> bool:
    """True when most lines followed by one blank line and then text end mid-sentence: a double-spaced file (a
    blank line after every wrapped line, a CR CR LF copy), not paragraphs one blank line apart."""
    ends = [lines[i].rstrip()[-1] for i in range(len(lines) - 2)
            if len(lines[i].strip()) >= MIN_WRAPPED_LINE_CHARS and not lines[i + 1].strip() and lines[i + 2].strip()
            and not _is_entry(lines[i])]
    return bool(ends) and sum(ch not in _SENTENCE_END + tuple(":;") for ch in ends) >= MIN_MIDSENTENCE_SHARE * len(ends)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def paragraphs(lines: list[str], wrapped: bool = True) -> list[str]:
    """Paragraphs of English lines: blank-line separated blocks, unwrapped (see the module docstring)."""
    out: list[str] = []
    cur: list[str] = []
    prev = ""
    for ln in lines:
        if not ln.strip():
            if cur:
                out.append(_join(cur))
                cur = []
            continue
        if cur and (not wrapped or (_indent(ln) > _indent(prev) and prev.rstrip().endswith(_SENTENCE_END))):
            out.append(_join(cur))
            cur = []
        cur.append(ln.strip())
        prev = ln
    if cur:
        out.append(_join(cur))
    return [p for p in out if p and not _ILLUSTRATION_RE.match(p) and not _SEPARATOR_RE.match(p)]


def _join(parts: list[str]) -> str:
    pieces = [parts[0]]
    for prev, part in pairwise(parts):
        hyphen = prev[-1] in "-—" and len(prev) > 1 and not prev[-2].isspace()
        pieces.append(part if hyphen or part[0] == "—" or part.startswith("--") else f" {part}")
    return collapse_ws(_ITALIC_RE.sub(r"\1", "".join(pieces))).strip()
