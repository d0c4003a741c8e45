"""The blocks of each spine document put into chapters, and the notes placed at the end of the chapter that cites
them.

A document's TOC entries start chapters at their fragments (the shallowest entries and MAX_TOC_DEPTH levels
below them); a document without entries starts one at its first heading, or else continues the previous chapter
(a split chunk).  When the TOC names at most one document, every document is split at its top heading level.
Leading headings that spell the chapter's title are not read again as paragraphs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from tasks.book import Chapter
from tasks.ingest.common import clean_title
from tasks.ingest.epub.content import HEADING_TAGS, Block, Note
from tasks.ingest.epub.opf import TocEntry

MAX_TOC_DEPTH = 2                        # TOC levels below a document's shallowest entry that start chapters


@dataclass
class Draft:
    """A chapter being put together."""
    title: str
    paras: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)    # note targets ("path#id") its paragraphs cite
    breaks: list[int] = field(default_factory=list)  # paragraphs that start after matter (Block.barrier)

    def add(self, blocks: list[Block]) -> None:
        for b in blocks:
            if b.barrier:
                self.breaks.append(len(self.paras))
            self.paras.append(b.text)
            self.refs.extend(b.refs)


def place(chapters: list[Draft], blocks: list[Block], entries: list[TocEntry], split: bool,
          fallback_title: str) -> list[int]:
    """Add one spine document's blocks to the chapters.  Its TOC entries (the shallowest ones) start chapters
    at their fragments; without entries the first heading starts one, else the text continues the previous
    chapter (a Gutenberg "Split on p" chunk).  Returns the chapter (its index in `chapters`) each block went to."""
    starts: dict[int, str] = {}
    if entries:
        top = min(e.depth for e in entries)
        where: dict[str, int] = {}
        for i, b in enumerate(blocks):
            for a in b.anchors:
                where.setdefault(a, i)
        for e in (e for e in entries if e.depth <= top + MAX_TOC_DEPTH):
            idx = 0
            if e.frag:
                idx = where.get(e.frag, -1)
                if idx < 0 and len(entries) == 1:
                    idx = 0
            if idx >= 0 and idx not in starts:
                starts[idx] = e.title
    elif split:
        level = _top_heading_level(blocks)
        starts = {i: b.text for i, b in enumerate(blocks) if b.kind == level}
    else:
        first = next((i for i, b in enumerate(blocks) if b.kind in HEADING_TAGS), None)
        if first is not None and (not chapters or first <= 2):
            starts[first] = blocks[first].text
    if not chapters and 0 not in starts:
        lead = blocks[: min(starts) if starts else len(blocks)]
        starts[0] = next((b.text for b in lead if b.kind != "p"), "") or fallback_title
    cut = sorted(starts)
    went: list[int] = []
    if not cut or cut[0] > 0:  # text before the first start continues the previous chapter
        head = blocks[: cut[0]] if cut else blocks
        chapters[-1].add(head)
        went += [len(chapters) - 1] * len(head)
    for k, i in enumerate(cut):
        seg = blocks[i: cut[k + 1] if k + 1 < len(cut) else len(blocks)]
        went += [len(chapters)] * len(seg)
        title = starts[i]
        seg = _drop_title_blocks(seg, title)
        chapters.append(Draft(title))
        chapters[-1].add(seg)
    return went


def _drop_title_blocks(seg: list[Block], title: str) -> list[Block]:
    """Leading blocks that spell the chapter title (a heading equal to the TOC label, or CHAPTER I. / START IN
    LIFE split over two headings) are not read again as paragraphs."""
    key = _squash(title)
    if not key:
        return seg
    acc, drop = "", 0
    for n, b in enumerate(seg[:3], 1):
        acc += _squash(b.text)
        if acc == key:
            return seg[n:]
        if b.kind == "p" or not key.startswith(acc):
            break
        drop = n  # headings that are a shorter form of the title (第一回 for "第一回 始")
    return seg[drop:]


def _squash(s: str) -> str:
    return re.sub(r"[\W_]+", "", s).lower()


def attach_notes(chapters: list[Draft], all_notes: list[Note], doc_end_chapter: dict[str, int]) -> None:
    """notes="end": each note is read at the end of the chapter that first references it; a note nobody
    references is read at the end of the chapter its own document ends in."""
    by_id: dict[str, Note] = {}
    for n in all_notes:
        for i in n.ids:
            by_id.setdefault(f"{n.doc}#{i}", n)
    for ch in chapters:
        for ref in ch.refs:
            note = by_id.get(ref)
            if note is not None and not note.used:
                ch.paras.extend(note.paras)
                note.used = True
    for n in all_notes:
        if not n.used and chapters:
            k = doc_end_chapter.get(n.doc, len(chapters) - 1)
            chapters[max(0, k)].paras.extend(n.paras)
            n.used = True


def _top_heading_level(blocks: list[Block]) -> str:
    kinds = {b.kind for b in blocks}
    return next((k for k in ("h1", "h2", "h3", "hp") if k in kinds), "none")


def finish(chapters: list[Draft]) -> list[Chapter]:
    """The drafts that have text, numbered; an empty title becomes the chapter's number."""
    out: list[Chapter] = []
    for ch in chapters:
        paras = [p for p in ch.paras if p]
        if paras:
            breaks = tuple(sorted({b for b in ch.breaks if 0 < b < len(paras)}))
            out.append(Chapter(index=len(out), title=clean_title(ch.title) or str(len(out) + 1),
                               paragraphs=tuple(paras), breaks=breaks))
    return out
