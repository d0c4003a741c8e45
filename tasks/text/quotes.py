"""Quoted speech and who says it: the text side of a cast (`--cast`; voices per role in tasks/voice/cast.py).

A paragraph's quotes are found by their marks (QUOTE_MARKS); only speech is a quote.  A quote gets a speaker only
where the text names one, before or after it with a speech verb (attribute_book); the name is never guessed: a
speaker is always the text at that place, as the source writes it.  Matching runs on a Simplified folding of the
text (fold), so Traditional and Simplified books behave the same.  The rules, and what they score on hand-labelled
quotes: docs/modules.md, "Quoted speech and its speakers".
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tasks.book import ROLE_DIALOGUE, ROLE_NARRATOR, Book, Run
from tasks.text.t2s import simplified

# Opening mark -> the marks that close it.  “…" (a straight closer) is common in Gutenberg texts.
QUOTE_MARKS = {"「": "」", "『": "』", "“": "”\"", "\"": "\"”"}
SPEECH_MARKS = frozenset("，,。．！!？?；;…、：:︰")    # a quote holding one of these is speech
COLONS = frozenset("：:︰")
COMMAS = frozenset("，,")
CLAUSE_MARKS = frozenset("，,、：:︰")               # clauses of one sentence
SENTENCE_MARKS = frozenset("。．.！!？?；;…")        # where a sentence (and a topic chain) ends
NAME_CHARS = (2, 4)                                  # characters in a name
NAME_RE = re.compile(r"[\u4e00-\u9fffA-Za-zＡ-Ｚａ-ｚ]+")

# Word lists, in the folded (Simplified) form.
SPEECH_VERBS = ("嘱咐", "吩咐", "告诉", "答应", "说", "道", "问", "答", "叫", "喊", "嚷", "骂", "劝", "云", "曰", "想")
NOT_SPEECH = ("知道", "难道", "味道", "街道", "地道", "一道", "听说", "据说", "虽说", "且说", "却说", "话说", "再说",
              "所说", "小说", "传说", "不说", "没说", "休说", "别说", "不想", "没想", "思想", "理想")
VERB_TAIL = ("着", "了")                             # 說著
MANNER = ("连忙", "急忙", "赶忙", "忽然", "突然", "终于", "一面", "一边", "冷笑", "含笑", "陪笑", "微笑", "大笑",
          "叹息", "点头", "摇头", "低头", "回头", "抬头", "起身", "进来", "走来", "过来", "上来", "出来", "走近",
          "低声", "高声", "大声", "轻轻", "悄悄", "慢慢", "连连", "纳罕", "接着", "随即", "不觉", "不禁", "只得",
          "只好", "从旁", "向前", "上前", "自己", "也就", "听了", "见了", "看罢", "笑", "哭", "泣", "叹", "忙",
          "便", "又", "也", "因", "乃", "遂", "方", "才", "只", "都", "就", "还", "却", "亦", "先", "再", "早",
          "正", "仍", "即", "忽", "复", "着", "了")
PREPOSITIONS = "对向和跟同给与"                        # 對我說, 向黛玉道: the addressee before the verb
LEADS = ("且说", "却说", "话说", "于是", "当下", "只见", "又见", "忽见", "但见", "只听", "又听", "忽听", "这时",
         "一面", "一边", "那时", "此时", "一时", "且兼", "不免", "原来", "然而", "而且", "但是", "可是", "幸而",
         "因此", "所以",
         "后来", "接着", "随后", "然后", "忽然", "这", "那", "时", "但", "便", "又", "因", "乃", "遂", "再", "也",
         "却", "早", "且")
PERSONAL = ("我", "你", "他", "她", "它", "伊")        # 伊: "she" in 吶喊's time
PRONOUNS = PERSONAL + ("咱", "您", "谁", "自己", "大家", "人家", "别人", "旁人", "有人", "有的")
GENERIC = ("人", "众", "丫鬟", "丫头", "婆子", "媳妇", "小厮", "孩子", "女人", "男人", "姊妹", "家人", "仆人", "客人",
           "老婆子", "老嬷嬷", "嬷嬷")
DETERMINERS = "那这此些每各某众诸有几"                  # 那人, 眾人, 有的: not one named person
COUNTED = re.compile(r"[一二两三四五六七八九十几]+[个位只群些名条人]")   # 一個丫鬟, 三四人
NEGATIONS = ("不", "没", "未", "莫", "别", "休")          # 掌櫃也不再問: nothing is said
NOT_FIRST = DETERMINERS + PREPOSITIONS + "一两把将被从在的之"  # no name starts with these here
LOCATIVE_ENDS = "里内中上下"                             # 心里, 口內, 心下: a place, not a person
# jieba part-of-speech classes that a name never ends with (verbs, adverbs, numerals, time, places, …) and
# never starts with (function words): what a misread clause leaves ("寶玉听說", "心下", "掌櫃也不").
# Compared by the class's first letter; "z" (state words: 含含糊糊) only exactly, as "zg" ends names (雨村, 閏土).
NOT_NAME_END = frozenset("vdcumtfspqilryeo") | {"z"}
NOT_NAME_START = frozenset("dcpuryeo")
NOT_NAME_INSIDE = NOT_NAME_END | {"a"}                    # 黛玉忙止, 趙太太慌: a predicate after the name
AFTER_NAME_STOP = "之的和与同跟及们"                     # 賈赦之妻, 黛玉和鸚哥: the subject is not the name
_FOLD_EXTRA = {"著": "着", "麽": "么", "於": "于"}

NAME, STOP, ON = "name", "stop", "on"                   # a clause's subject: a name, not a name, none (read on)


@dataclass(frozen=True)
class Quote:
    """One quote of a book: where it is, its text as in the source (marks included) and its speaker as the
    text writes the name ("" when the text names nobody)."""
    chapter: int
    paragraph: int
    start: int                  # offset in the paragraph, at the opening mark
    end: int                    # after the closing mark (the paragraph's end when it never closes)
    text: str
    speaker: str = ""


@lru_cache(maxsize=65_536)
def _fold_char(c: str) -> str:
    s = _FOLD_EXTRA.get(c) or simplified(c)
    return s if len(s) == 1 else c


def fold(text: str) -> str:
    """Simplified, one character for one (offsets stay those of `text`): how names and words are compared."""
    return "".join(_fold_char(c) for c in text)


def find_quotes(paragraph: str) -> list[tuple[int, int]]:
    """[start, end) of each quote of speech in the paragraph, in order (marks included)."""
    out, i, n = [], 0, len(paragraph)
    while i < n:
        closers = QUOTE_MARKS.get(paragraph[i])
        if closers is None:
            i += 1
            continue
        j = i + 1
        while j < n and paragraph[j] not in closers:
            j += 1
        end = min(j + 1, n)
        if _is_speech(paragraph, i, end):
            out.append((i, end))
        i = end
    return out


def _is_speech(p: str, start: int, end: int) -> bool:
    before = p[:start].rstrip()
    return bool(SPEECH_MARKS.intersection(p[start + 1:end])) or (before[-1:] in COLONS)


def paragraph_runs(length: int, quotes: Sequence[Quote]) -> list[Run]:
    """Runs tiling a paragraph of `length` characters: narration between the quotes, one dialogue run each."""
    runs, pos = [], 0
    for q in quotes:
        if q.start > pos:
            runs.append(Run(pos, q.start))
        runs.append(Run(q.start, q.end, ROLE_DIALOGUE, q.speaker))
        pos = q.end
    if pos < length or not runs:
        runs.append(Run(pos, length, ROLE_NARRATOR))
    return runs


def book_runs(book: Book, quotes: dict[int, list[Quote]]) -> dict[int, dict[int, list[Run]]]:
    """Per chapter, per paragraph that holds quotes: its runs (segment.iter_segments' `runs`)."""
    out: dict[int, dict[int, list[Run]]] = {}
    for ch in book.chapters:
        by_para: dict[int, list[Quote]] = {}
        for q in quotes.get(ch.index, ()):
            by_para.setdefault(q.paragraph, []).append(q)
        out[ch.index] = {p: paragraph_runs(len(ch.paragraphs[p]), qs) for p, qs in by_para.items()}
    return out


def speaker_counts(quotes: dict[int, list[Quote]]) -> list[tuple[str, int]]:
    """The speaker names found, most quotes first (Traditional and Simplified forms counted together, shown
    as first written)."""
    counts: Counter = Counter()
    shown: dict[str, str] = {}
    for qs in quotes.values():
        for q in qs:
            if q.speaker:
                key = fold(q.speaker)
                counts[key] += 1
                shown.setdefault(key, q.speaker)
    return [(shown[k], n) for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


# ----------------------------------------------------------------------------------------------------------
# Attribution

def attribute_book(book: Book) -> dict[int, list[Quote]]:
    """Every chapter's quotes with their speakers.  Two passes over the whole book: the first learns the names
    of clean attributions, the second attributes every quote with them."""
    chapters = []
    for ch in book.chapters:
        paras = [(p, fold(p), find_quotes(p)) for p in ch.paragraphs]
        chapters.append((ch.index, paras))
    clean: set[str] = set()
    for _, paras in chapters:
        clean.update(fold(who) for _, _, _, who in _attribute(paras, frozenset()) if who)
    names = _learned(clean)
    out: dict[int, list[Quote]] = {}
    for index, paras in chapters:
        out[index] = [Quote(index, pi, s, e, paras[pi][0][s:e], who) for pi, s, e, who in _attribute(paras, names)]
    return out


def _attribute(paras: list[tuple[str, str, list[tuple[int, int]]]],
               names: frozenset[str]) -> list[tuple[int, int, int, str]]:
    """(paragraph, start, end, speaker) of every quote of one chapter."""
    out = []
    for pi, (src, folded, spans) in enumerate(paras):
        inherited = ""                                   # “A，”他說，“B”: B continues A's speaker
        for k, (s, e) in enumerate(spans):
            lo = spans[k - 1][1] if k else 0
            nsrc, nfold = src[lo:s], folded[lo:s]
            if k == 0 and not nsrc.strip() and pi > 0:   # “ at the paragraph's start: "…冷笑說︰" before it
                prev_src, prev_fold, prev_spans = paras[pi - 1]
                plo = prev_spans[-1][1] if prev_spans else 0
                if prev_src.rstrip()[-1:] in COLONS:
                    nsrc, nfold = prev_src[plo:], prev_fold[plo:]
            said, who = _before(nsrc, nfold, names)
            if not said and inherited and not re.search(r"[。．.！!？?；;…]", nsrc):
                who = inherited
            hi = spans[k + 1][0] if k + 1 < len(spans) else len(src)
            after, carries = _after(src[e:hi], folded[e:hi], names, _ends_with_comma(src[s:e]))
            who = who or after
            inherited = after if carries else ""
            out.append((pi, s, e, who))
    return out


def _ends_with_comma(quote: str) -> bool:
    """“…，”: the sentence goes on after the quote."""
    return quote.rstrip().rstrip("」』”\"'’").rstrip()[-1:] in COMMAS


def _before(src: str, folded: str, names: frozenset[str]) -> tuple[bool, str]:
    """(the narration before a quote ends with a speech verb, the speaker it names or "")."""
    t = folded.rstrip()
    if t[-1:] in COLONS or t[-1:] in COMMAS:
        t = t[:-1].rstrip()
    if not _verb_end(t):
        return False, ""
    start = max((i for i, c in enumerate(t) if c in SENTENCE_MARKS), default=-1) + 1
    clauses = _clauses(t, start, len(t))
    return True, _chain(src, folded, reversed(clauses), names)


def _after(src: str, folded: str, names: frozenset[str], ends_with_comma: bool) -> tuple[str, bool]:
    """(the speaker named right after a quote or "", whether it carries to the next quote)."""
    end = next((i for i, c in enumerate(folded) if c in SENTENCE_MARKS), len(folded))
    clauses = _clauses(folded, 0, end)
    for n, (a, b) in enumerate(clauses[:1]):             # the clause right after the quote only
        if not _verb_end(folded[a:b].rstrip()):
            continue
        mark = folded[b:b + 1]
        if mark in COLONS:
            return "", False                             # 寶玉道：“…”: it introduces the next quote
        rest = folded[b + 1:]
        if mark in COMMAS and not rest.strip() and not ends_with_comma:
            return "", False                             # “…。”賈母笑道，“…”: the next quote's
        who = _chain(src, folded, reversed(clauses[:n + 1]), names)
        carries = bool(who) and mark in COMMAS and not any(c in SENTENCE_MARKS for c in rest)
        return who, carries
    return "", False


def _clauses(t: str, start: int, end: int) -> list[tuple[int, int]]:
    """[a, b) of each clause of t[start:end] (split at clause marks and quote marks), spaces trimmed."""
    out, a = [], start
    for i in range(start, end + 1):
        if i == end or t[i] in CLAUSE_MARKS or t[i] in QUOTE_MARKS or t[i] in "」』”":
            lo, hi = a, i
            while lo < hi and t[lo].isspace():
                lo += 1
            while hi > lo and t[hi - 1].isspace():
                hi -= 1
            if hi > lo:
                out.append((lo, hi))
            a = i + 1
    return out


def _chain(src: str, folded: str, clauses: Iterable[tuple[int, int]], names: frozenset[str]) -> str:
    """The speaker of a topic chain: the clauses from the verb's back to the sentence start."""
    for n, (a, b) in enumerate(clauses):
        kind, lo, hi = _subject(folded, a, b, names, verb_clause=n == 0)
        if kind == NAME:
            return src[lo:hi]
        if kind == STOP:
            return ""
    return ""


def _subject(t: str, a: int, b: int, names: frozenset[str], verb_clause: bool) -> tuple[str, int, int]:
    """What the clause t[a:b] starts with: (NAME, lo, hi) a name at t[lo:hi]; (STOP, …) a subject that is not
    a name; (ON, …) no subject (the chain goes on)."""
    a = _strip_leads(t, a, b)
    c = t[a:b]
    if not c:
        return ON, a, a
    if c.startswith(PRONOUNS) or c.startswith(GENERIC) or c[0] in DETERMINERS or COUNTED.match(c):
        return STOP, a, a
    known = next((c[:k] for k in range(NAME_CHARS[1], NAME_CHARS[0] - 1, -1) if c[:k] in names), "")
    if known:
        follows = c[len(known):len(known) + 1]
        return (STOP, a, a) if follows and follows in AFTER_NAME_STOP else (NAME, a, a + len(known))
    if verb_clause:
        rest = _strip_predicate(c)
        if rest and _is_name(rest):
            return NAME, a, a + len(rest)
    return ON, a, a


def _strip_leads(t: str, a: int, b: int) -> int:
    """a moved past the connectives and time words that start the clause t[a:b]."""
    while t.startswith(LEADS, a, b):
        a += max(len(w) for w in LEADS if t.startswith(w, a, b))
    return a


def _verb_end(t: str) -> bool:
    """t ends with a speech verb (and maybe 著/了, or a pronoun as its object: 問他)."""
    return _strip_verb(t) is not None


def _strip_verb(t: str) -> str | None:
    """t without its final speech verb (and what may follow it), or None when t does not end with one."""
    for tail in ("",) + PERSONAL + VERB_TAIL:
        if tail and not t.endswith(tail):
            continue
        body = t[:len(t) - len(tail)] if tail else t
        if body.endswith(NOT_SPEECH):
            return None
        verb = next((v for v in SPEECH_VERBS if body.endswith(v)), None)
        if verb:
            rest = body[:-len(verb)]
            return None if _strip_suffix(rest, ("再", "曾", "有")).endswith(NEGATIONS) else rest
    return None


def _strip_predicate(c: str) -> str:
    """The subject left of a verb clause once its verbs, manner words and addressee are removed."""
    rest = _strip_verb(c) or ""
    while True:
        prev = rest
        verb = _strip_verb(rest)
        if verb is not None:
            rest = verb
        rest = _strip_suffix(rest, MANNER)
        m = re.search(rf"[{PREPOSITIONS}]着?(?:{'|'.join(PERSONAL)})$", rest)
        if m:
            rest = rest[:m.start()]
        if len(rest) >= 3 and rest[-1] in "的地" and rest[-2] == rest[-3]:
            rest = rest[:-3]                             # 懶懶的, 絮絮的
        if rest == prev:
            return rest


def _strip_suffix(t: str, words: Sequence[str]) -> str:
    """t without the longest of `words` it ends with."""
    if not t.endswith(tuple(words)):
        return t
    return t[:-max(len(w) for w in words if t.endswith(w))]


def _is_name(c: str) -> bool:
    lo, hi = NAME_CHARS
    return (lo <= len(c) <= hi and NAME_RE.fullmatch(c) is not None and c[0] not in NOT_FIRST
            and not any(p in c for p in PERSONAL) and c not in GENERIC and not c.endswith("们")
            and not any(ch in c for ch in "的之地") and not (len(c) == 2 and c[1] in LOCATIVE_ENDS)
            and _word_classes_fit(c))


@lru_cache(maxsize=16_384)
def _word_classes_fit(c: str) -> bool:
    """jieba's dictionary (no guessing of new words) does not read c as ending in a verb, adverb, place … or
    starting with a function word."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(60)
    words = jieba.posseg.lcut(c, HMM=False)
    if any(_is_class(w.flag, NOT_NAME_INSIDE) for w in words[1:-1]):
        return False
    if all(len(w.word) == 1 for w in words):     # not a word jieba knows: its characters' classes are weak
        return not (_is_class(words[0].flag, NOT_NAME_END) and _is_class(words[-1].flag, NOT_NAME_END))
    first = words[0]
    return not (_is_class(words[-1].flag, NOT_NAME_INSIDE) or _is_class(first.flag, NOT_NAME_START)
                or (len(first.word) > 1 and first.flag.startswith("v")))      # 看見棣華


def _is_class(flag: str, classes: frozenset[str]) -> bool:
    return flag in classes or (flag[:1] in classes and flag[:1] != "z")


def _learned(found: set[str]) -> frozenset[str]:
    """The clean attributions that are names: not a shorter one followed by a predicate (寶釵見 beside 寶釵)."""
    import jieba.posseg

    def predicate(tail: str) -> bool:
        return _is_class(jieba.posseg.lcut(tail, HMM=False)[0].flag, NOT_NAME_INSIDE)

    return frozenset(c for c in found if not any(c != n and c.startswith(n) and predicate(c[len(n):])
                                                 for n in found))
