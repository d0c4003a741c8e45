"""Segmentation: a chapter's normalized text cut into pieces of about 15 s (never over 20 s but for one reading that
may not be cut) ChatTTS speaks well.

Sentences end where the normalizer's spans say (。！？；… and the closing quotes after them; in English . ! ? that
end a sentence); sentences are packed into segments up to `target_seconds` (never over `max_seconds`, nor
`max_chars` characters in Chinese or `max_words` words in English: engine.units.estimate_seconds counts Han
characters and English words each at its own rate); a sentence over the limit is split at clause marks, then
between words (jieba in Chinese, spaces in English), never inside a span's reading (nor, in English, inside a word
of the source: a web address); a single reading over the caps is a segment of its own, noted (OVER_CAP_NOTE).
Fragments under `min_chars` speakable characters (English: `min_words` words) are merged with a neighbour (ChatTTS
fails on very short inputs), never across a chapter's `breaks` (where matter was set aside: the body reads the same
either way).  The chapter title is always the first segment (pause "paragraph").  Works as a
stream: memory is bounded by a chunk, not the paragraph.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.units import estimate_seconds, speakable_chars
from tasks.book import PAUSE_KINDS, ROLE_NARRATOR, Book, Chapter, Language, PauseKind, Run, Segment, book_language
from tasks.text.normalize import CLAUSE, SENTENCE, NormalizeOptions, Span, iter_spans

TARGET_SECONDS = 15.0      # s: stop packing sentences into a segment once it is this long
MAX_SECONDS = 20.0         # s: never pack past this (a single sentence over it is split)
MAX_CHARS = 150            # normalized characters: hard cap (upstream loses endings past ~150-200)
MIN_CHARS = 5              # speakable characters: shorter fragments are merged with a neighbour
MIN_SECONDS = 3.0          # s: fragments shorter than this are merged with a neighbour when it fits
# English (lang="en"): the character cap is Chinese's (a Han character is a token); English is capped in words.
# 20 s at engine.units.WORDS_PER_SECOND (2.58) is 52 words; ChatTTS's tokenizer (bert-base-chinese's vocabulary,
# lower-cased) makes 1.74 tokens of an English word, punctuation included (Robinson Crusoe chapter 1: 9,143 tokens
# for 5,258 words, at most 106 in a segment; docs/text-frontend.md): 50 words stay under a Chinese segment's 150.
MAX_WORDS = 50             # words: hard cap of an English segment
MIN_WORDS = 5              # words: shorter English fragments are merged with a neighbour (ChatTTS fails on them)
# A segment over the caps is one reading the segmenter may not cut (a long number's, a web address's): kept whole and
# noted, never cut inside (its halves would read differently); the engine renders it as any other segment.
OVER_CAP_NOTE = "over the caps: one reading that has no cut inside"
_MARKS = "，。、,. "
_END = {"zh": "。", "en": "."}               # the mark that closes a sentence, per reading language
_EN_ENDS = ".!?…"                            # English text ending in one of these ends a sentence already
# A word as the English caps count it: a run of letters/digits (inner apostrophes kept), each Han character apart.
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W_\u3400-\u9fff]+(?:['\u2019][^\W_\u3400-\u9fff]+)*")
_SPACE_OR_HAN = re.compile(r"[\s\u3400-\u9fff]")
_RUNAWAY_FACTOR = 8        # a sentence longer than this many max_chars is packed before it ends


@dataclass(frozen=True)
class SegmentOptions:
    target_seconds: float = TARGET_SECONDS
    max_seconds: float = MAX_SECONDS
    max_chars: int = MAX_CHARS
    min_chars: int = MIN_CHARS
    min_seconds: float = MIN_SECONDS
    max_words: int = MAX_WORDS         # lang="en": the cap in words (max_chars is Chinese's)
    min_words: int = MIN_WORDS         # lang="en": the short-fragment threshold in words (min_chars: Chinese's)
    normalize: NormalizeOptions = NormalizeOptions()   # how each piece of text is read (t2s, tn, lexicon, lang)

    @property
    def lang(self) -> Language:
        """The book's reading language (normalize.lang, tasks.book.book_language): words or characters."""
        return self.normalize.lang

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if not 0 < self.target_seconds <= self.max_seconds:
            raise ValueError(f"target_seconds ({self.target_seconds}) must be in (0, max_seconds="
                             f"{self.max_seconds}]")
        if self.max_chars < 10:
            raise ValueError(f"max_chars ({self.max_chars}) must be at least 10")
        if not 0 <= self.min_chars < self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) must be in [0, max_chars={self.max_chars})")
        if not 0 <= self.min_words < self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must be in [0, max_words={self.max_words})")
        if not 0 <= self.min_seconds < self.target_seconds:
            raise ValueError(f"min_seconds ({self.min_seconds}) must be in [0, target_seconds="
                             f"{self.target_seconds})")


def book_options(book: Book, opts: SegmentOptions, language: str = "auto") -> SegmentOptions:
    """`opts` for this book: its reading language resolved once from --language (auto | zh | en) by
    tasks.book.book_language (ValueError naming a bad value)."""
    return replace(opts, normalize=replace(opts.normalize, lang=book_language(book, language)))


def chapter_units(chapter: Chapter) -> list[str]:
    """The texts a chapter is segmented from, in order: its title (if any), then its paragraphs."""
    units = [chapter.title] if chapter.title and chapter.title.strip() else []
    units.extend(p for p in chapter.paragraphs if p)
    return units


@dataclass
class _Draft:
    u0: int                  # first unit
    o0: int                  # source offset in it
    u1: int                  # last unit
    o1: int                  # source end offset in it
    text: str
    pause: PauseKind
    title: bool = False
    notes: list[str] = field(default_factory=list)
    role: str = ROLE_NARRATOR
    speaker: str = ""


def words(text: str) -> int:
    """Words of normalized text as the English caps count them (a Han character is one)."""
    return len(_WORD.findall(text))


def _fits(text: str, opts: SegmentOptions) -> bool:
    size = words(text) <= opts.max_words if opts.lang == "en" else len(text) <= opts.max_chars
    return size and estimate_seconds(text) <= opts.max_seconds


def _out(spans: list[Span]) -> str:
    return "".join(s.out for s in spans)


def _pack(items: list[list[Span]], opts: SegmentOptions) -> list[list[Span]]:
    """Greedy: join consecutive items while the result fits."""
    parts: list[list[Span]] = []
    cur: list[Span] = []
    cur_text = ""
    for it in items:
        t = _out(it)
        if cur and not _fits(cur_text + t, opts):
            parts.append(cur)
            cur, cur_text = [], ""
        cur = cur + it
        cur_text += t
    if cur:
        parts.append(cur)
    return parts


def _split_groups(spans: list[Span], at: int) -> list[list[Span]]:
    groups: list[list[Span]] = []
    cur: list[Span] = []
    for s in spans:
        cur.append(s)
        if s.boundary >= at:
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    return groups


def _cut_words(text: str, lang: str) -> Iterator[str]:
    """`text` as consecutive words: jieba's in Chinese; in English each word with the spaces after it."""
    if lang == "en":
        yield from re.findall(r"\s*\S+\s*", text) or [text]
        return
    import jieba
    jieba.setLogLevel(60)
    yield from jieba.cut(text, HMM=False)


def _words(spans: list[Span], opts: SegmentOptions, src: str) -> list[list[Span]]:
    """Word-sized atoms: aligned text spans cut at word boundaries (jieba's; English: spaces); an aligned word that
    still does not fit is cut into characters.  Any other span is one atom however long its reading: a reading is
    never cut (a span over the caps becomes a part of its own, over them).  English: atoms that touch in `src` with
    no space between them (the pieces of a web address, `$16,716,594,` and its comma) are one atom - a piece of a
    word read alone may read differently (the coverage audit reads each segment's source alone)."""
    atoms: list[list[Span]] = []
    for s in spans:
        if s.kind == "text" and s.aligned and len(s.out) > 1:
            i = 0
            for w in _cut_words(s.out, opts.lang):
                a = s.start + i
                if _fits(w, opts):
                    atoms.append([Span(a, a + len(w), w, "text", aligned=True)])
                else:
                    atoms.extend([Span(a + k, a + k + 1, c, "text", aligned=True)] for k, c in enumerate(w))
                i += len(w)
        elif atoms and not s.out:
            atoms[-1].append(s)              # silent spans ride with the previous atom
        else:
            atoms.append([s])
    if opts.lang != "en":
        return atoms
    return [p for a in _glue(atoms, src) for p in (_cut_word(a, src, opts) if not _fits(_out(a), opts) else [a])]


def _glue(atoms: list[list[Span]], src: str) -> list[list[Span]]:
    """English atoms joined where they touch inside one source word: no space and no Han character at the
    junction, and not both plain text (an over-long word cut into characters stays cut)."""
    out: list[list[Span]] = []
    for atom in atoms:
        if out:
            prev = out[-1]
            at = prev[-1].end
            if (at == atom[0].start and 0 < at < len(src) and not (prev[-1].kind == atom[0].kind == "text")
                    and not _SPACE_OR_HAN.match(src[at - 1]) and not _SPACE_OR_HAN.match(src[at])):
                prev.extend(atom)
                continue
        out.append(list(atom))
    return out


def _cut_word(atom: list[Span], src: str, opts: SegmentOptions) -> list[list[Span]]:
    """An English word over the caps (spans that touch: a long web address) cut between its spans only where both
    sides read alone as they read inside it (the audit reads each segment's source alone); no such cut: whole."""
    pieces: list[list[Span]] = []
    cur: list[Span] = []
    for i, s in enumerate(atom):
        if (cur and s.out and not _fits(_out(cur) + s.out, opts)
                and _reads_alone(cur, src, opts) and _reads_alone(atom[i:], src, opts)):
            pieces.append(cur)
            cur = []
        cur.append(s)
    return pieces + [cur]


def _reads_alone(spans: list[Span], src: str, opts: SegmentOptions) -> bool:
    """Do these spans of `src` say, normalized alone, what they say in their sentence? (letters and digits)"""
    alone = iter_spans(src[spans[0].start:max(s.end for s in spans)], opts.normalize)
    return _letters(_out(spans)) == _letters("".join(s.out for s in alone))


def _letters(text: str) -> str:
    return "".join(c for c in text if c.isalnum()).lower()


def _fit_sentence(spans: list[Span], opts: SegmentOptions, src: str) -> list[list[Span]]:
    """A sentence (spans of `src`) as one or more parts that each fit: clause marks first, then word boundaries;
    a part that is one reading over the caps stays whole (_words)."""
    if _fits(_out(spans), opts):
        return [spans]
    parts: list[list[Span]] = []
    for clause in _pack(_split_groups(spans, CLAUSE), opts):
        if _fits(_out(clause), opts):
            parts.append(clause)
        else:
            parts.extend(_pack(_words(clause, opts, src), opts))
    return parts


def _pause_of(spans: list[Span]) -> PauseKind:
    b = spans[-1].boundary if spans else 0
    return "sentence" if b >= SENTENCE else "clause"


def _unit_drafts(ui: int, text: str, opts: SegmentOptions, title: bool,
                 run: Run | None = None, ends_unit: bool = True) -> Iterator[_Draft]:
    """Drafts tiling one unit (title or paragraph), or one run of it (a cast's narration or quote: text[start:
    end], ends_unit when it is the unit's last); none when it has nothing to say."""
    lo, hi = (run.start, run.end) if run else (0, len(text))
    role, speaker = (run.role, run.speaker) if run else (ROLE_NARRATOR, "")

    def parts() -> Iterator[list[Span]]:
        sentence: list[Span] = []
        chars = 0
        for sp in iter_spans(text[lo:hi], opts.normalize):
            sp = replace(sp, start=sp.start + lo, end=sp.end + lo) if lo else sp
            sentence.append(sp)
            chars += len(sp.out)
            if sp.boundary >= SENTENCE:
                yield from _fit_sentence(sentence, opts, text)
                sentence, chars = [], 0
            elif chars > _RUNAWAY_FACTOR * opts.max_chars:
                # A sentence with no end in sight: emit all but its last part, keep that to continue from,
                # so memory stays bounded however long the paragraph is.
                fitted = _fit_sentence(sentence, opts, text)
                yield from fitted[:-1]
                sentence = fitted[-1]
                chars = len(_out(sentence))
        if sentence:
            yield from _fit_sentence(sentence, opts, text)

    cur: list[Span] = []
    cur_text = ""
    start = lo
    last: _Draft | None = None
    for part in parts():
        t = _out(part)
        if not cur or speakable_chars(t) == 0 or speakable_chars(cur_text) == 0:
            cur, cur_text = cur + part, cur_text + t
            continue
        short = _is_short(t, opts) or _is_short(cur_text, opts)
        joined = cur_text + t
        if _fits(joined, opts) and (short or estimate_seconds(cur_text) < opts.target_seconds):
            cur, cur_text = cur + part, joined
            continue
        end = cur[-1].end
        if last is not None:
            yield last
        last = _Draft(ui, start, ui, end, cur_text.strip(), _pause_of(cur), title, role=role, speaker=speaker)
        start = end
        cur, cur_text = part, t
    if cur and speakable_chars(cur_text) > 0:
        if last is not None:
            yield last
        pause = "paragraph" if ends_unit else _pause_of(cur)
        last = _Draft(ui, start, ui, hi, cur_text.strip(), pause, title, role=role, speaker=speaker)
    elif last is not None:
        # trailing marks without speech ride with the previous draft
        pause = "paragraph" if ends_unit else max(last.pause, _pause_of(cur), key=PAUSE_KINDS.index)
        last = replace(last, o1=hi, text=(last.text + cur_text).strip(), pause=pause)
    if last is not None:
        yield last


def _join(a: str, b: str, opts: SegmentOptions, units: bool = True) -> str:
    """Two drafts' texts as one; `units`: they come from different units (a sentence mark between them when the
    first has none; in English a space too)."""
    ends = _MARKS + _EN_ENDS if opts.lang == "en" else _MARKS
    sep = _END[opts.lang] if units and a and a[-1] not in ends else ""
    return a + sep + (" " if opts.lang == "en" and a and b else "") + b


def _merge(a: _Draft, b: _Draft, opts: SegmentOptions) -> _Draft:
    return _Draft(a.u0, a.o0, b.u1, b.o1, _join(a.text, b.text, opts, a.u1 != b.u0), b.pause, False,
                  a.notes + b.notes, a.role, a.speaker)


def _is_short(text: str, opts: SegmentOptions) -> bool:
    size = words(text) < opts.min_words if opts.lang == "en" else speakable_chars(text) < opts.min_chars
    return size or estimate_seconds(text) < opts.min_seconds


def _short(d: _Draft, opts: SegmentOptions) -> bool:
    return _is_short(d.text, opts)


def iter_segments(chapter: Chapter, *, opts: SegmentOptions = SegmentOptions(),
                  runs: Mapping[int, Sequence[Run]] | None = None) -> Iterator[Segment]:
    """Segments of one chapter, in order (a stream; see segment_chapter).  `runs` (a cast: paragraph index ->
    its runs, tasks/text/quotes.book_runs) cuts those paragraphs at every run's edge; segments of different
    runs are never merged unless the role and speaker are the same."""
    units = chapter_units(chapter)
    has_title = bool(units) and units[0] is chapter.title
    runs = runs or {}
    breaks = {p + has_title for p in chapter.breaks}   # units no draft joins across (matter set aside there)

    def drafts() -> Iterator[_Draft]:
        for ui, text in enumerate(units):
            para = ui - 1 if has_title else ui
            if (has_title and ui == 0) or para not in runs:
                yield from _unit_drafts(ui, text, opts, title=has_title and ui == 0)
                continue
            for k, run in enumerate(runs[para]):
                yield from _unit_drafts(ui, text, opts, False, run, ends_unit=k == len(runs[para]) - 1)

    def merged() -> Iterator[_Draft]:
        prev: _Draft | None = None
        for d in drafts():
            if (prev is not None and (prev.role, prev.speaker) == (d.role, d.speaker)
                    and not prev.title and not d.title and not (d.u0 in breaks and d.u0 != prev.u1)):
                joined = prev.text + "。" + d.text if opts.lang == "zh" else _join(prev.text, d.text, opts)
                if (_short(d, opts) or _short(prev, opts)) and _fits(joined, opts):
                    prev = _merge(prev, d, opts)
                    continue
            if prev is not None:
                yield prev
            prev = d
        if prev is not None:
            yield prev

    pending: Segment | None = None
    for index, d in enumerate(merged()):
        if pending is not None:
            yield pending
        src = _source(units, d)
        pause: PauseKind = "paragraph" if d.title and d.pause == "paragraph" else d.pause
        text = _close(d.text, pause, opts)
        notes = tuple(d.notes) + ((OVER_CAP_NOTE,) if not _fits(text, opts) else ())
        pending = Segment(chapter=chapter.index, index=index, text=text, source_text=src,
                          pause_after=pause, notes=notes, role=d.role, speaker=d.speaker)
    if pending is not None:
        yield replace(pending, text=_close(pending.text, "chapter", opts), pause_after="chapter")


def _close(text: str, pause: PauseKind, opts: SegmentOptions) -> str:
    """A segment that ends a sentence (or more) ends with 。 (English: .) so ChatTTS closes the intonation."""
    if pause == "clause" or not text:
        return text
    if opts.lang == "en":
        if text[-1] in ",;:，；：、":                # a clause mark closing the paragraph
            return text[:-1] + "." if _fits(text[:-1] + ".", opts) else text[:-1]
        return text + "." if text[-1] not in _EN_ENDS + "。！？" and _fits(text + ".", opts) else text
    if text[-1] in "，、":                        # a bracket or colon closing the paragraph
        return text[:-1] + "。" if _fits(text[:-1] + "。", opts) else text[:-1]
    if text[-1] not in _MARKS and _fits(text + "。", opts):
        return text + "。"
    return text


def _source(units: list[str], d: _Draft) -> str:
    if d.u0 == d.u1:
        return units[d.u0][d.o0:d.o1]
    pieces = [units[d.u0][d.o0:]] + units[d.u0 + 1:d.u1] + [units[d.u1][:d.o1]]
    return "\n".join(pieces)


def segment_chapter(chapter: Chapter, *, opts: SegmentOptions = SegmentOptions(),
                    runs: Mapping[int, Sequence[Run]] | None = None) -> list[Segment]:
    """The chapter as segments: title first, about 15 s each (never over 20 s), every source character in exactly
    one segment (or removed with a reason - see tasks.text.coverage.audit_chapter).  `runs`: see iter_segments."""
    return list(iter_segments(chapter, opts=opts, runs=runs))
