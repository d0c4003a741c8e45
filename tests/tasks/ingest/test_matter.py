"""What not to read (tasks/ingest/matter.py, issue 41): front and back matter set aside by default, listed with
the reason, brought back with --include; the body never changes with it.

Acceptance 4 on three real EPUBs with a bibliography (the IDPF samples childrens-literature, epub30-spec and
kusamakura): the items set aside are exactly the file's navigation, bibliography, colophon and copyright sections
(found here with lxml, independently of the reader), nothing of the book is lost (read with --include all it is
the default book's text plus exactly what was set aside), every chapter's coverage is complete, and the body's
segments — hence its content keys — are the same either way.  An EPUB 2 built from a real book's text checks the
guide's types; a real Gutenberg TXT its licence."""
from __future__ import annotations

import re
import zipfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree

from tasks.book import segment_name
from tasks.ingest import load_book
from tasks.ingest.matter import SET_ASIDE, MatterOptions
from tasks.plan.prepare import coverage_json, segment_book
from tasks.plan.rows import content_key, derive_seed
from tasks.text.segment import SegmentOptions, book_options
from tests.conftest import corpus_path
from tests.tasks.ingest.epub.helpers import load_bytes, make_epub

EPUBS = ("childrens-literature", "epub30-spec", "kusamakura-japanese-vertical-writing")
ALL = MatterOptions(include=("all",))
OPS = "{http://www.idpf.org/2007/ops}type"
SECTION_KINDS = ("index", "bibliography", "colophon", "copyright-page")


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def marked_sections(path: Path) -> dict[str, str]:
    """kind -> the squashed text of every element of the linear spine's documents whose epub:type names it, read
    with lxml (the reader's own code is not used; page numbers, epub:type pagebreak, are not text), in spine
    order."""
    z = zipfile.ZipFile(path)
    opf_name = next(n for n in z.namelist() if n.endswith(".opf"))
    opf = etree.fromstring(z.read(opf_name))
    base = opf_name.rsplit("/", 1)[0]
    items = {i.get("id"): i for i in opf.iter("{*}item")}
    spine = [items[r.get("idref")].get("href") for r in opf.iter("{*}itemref") if r.get("linear", "yes") != "no"]
    found: dict[str, str] = dict.fromkeys(SECTION_KINDS, "")
    for href in spine:
        doc = etree.fromstring(z.read(f"{base}/{href}"))
        for pb in [e for e in doc.iter() if "pagebreak" in (e.get(OPS) or "").split()]:
            pb.getparent().remove(pb) if pb.tail is None else pb.getparent().replace(pb, _tail_only(pb))
        for el in doc.iter():
            kinds = set((el.get(OPS) or "").split()) & set(SECTION_KINDS)
            if kinds and not any(set((a.get(OPS) or "").split()) & set(SECTION_KINDS) for a in el.iterancestors()):
                text = "".join(t for t in el.itertext())
                found[kinds.pop()] += squash(text)
    return found


def _tail_only(el):
    """An empty <span> carrying el's tail (the text after a page number stays)."""
    span = etree.Element("span")
    span.tail = el.tail
    return span


@pytest.fixture(scope="module", params=EPUBS)
def book_pair(request):
    path = corpus_path("epub", "idpf-epub3-samples", f"{request.param}.epub")
    return path, load_book(path), load_book(path, matter=ALL)


def test_exactly_the_marked_sections_are_set_aside(book_pair):
    path, book, _ = book_pair
    kinds = {s.kind for s in book.set_aside}
    assert kinds <= set(SET_ASIDE) and kinds & {"bibliography", "index"}          # each has one
    marked = marked_sections(path)
    for kind in SECTION_KINDS:
        got = "".join(squash("".join(s.paragraphs)) for s in book.set_aside if s.kind == kind)
        if kind == "copyright-page" and not marked[kind]:
            continue                                   # kusamakura's is a whole document, named by the landmarks
        assert got == marked[kind], (path.name, kind)
    numbers = [s.number for s in book.set_aside]
    assert sorted(numbers) == list(range(1, len(numbers) + 1))
    assert all(s.reason.startswith(SET_ASIDE[s.kind]) and s.paragraphs for s in book.set_aside)


def test_nothing_is_lost_and_the_body_reads_the_same(book_pair):
    """With --include all: the default book's paragraphs plus exactly those set aside; the body's segments (their
    texts, so their content keys) are the same, and every chapter's coverage is complete either way."""
    path, book, everything = book_pair
    assert not everything.set_aside and len(everything.chapters) > len(book.chapters)
    read = Counter(p for c in book.chapters for p in c.paragraphs)
    aside = Counter(p for s in book.set_aside for p in s.paragraphs)
    whole = Counter(p for c in everything.chapters for p in c.paragraphs)
    titles = Counter(c.title for c in everything.chapters) - Counter(c.title for c in book.chapters)
    assert whole - read - aside == Counter() and read + aside - whole - titles == Counter(), path.name
    def same(c) -> tuple:
        return c.title, c.paragraphs, c.breaks

    common = Counter(map(same, book.chapters)) & Counter(map(same, everything.chapters))   # segment alike: left out
    segs = {}
    for name, b in (("default", book), ("all", everything)):
        seg = book_options(b, SegmentOptions())
        left = Counter(common)
        changed = []
        for c in b.chapters:
            if left[same(c)]:
                left[same(c)] -= 1
            else:
                changed.append(c)
        assert changed or name == "default"                      # (the matter's own chapters, or those it was in)
        segments, reports = segment_book(replace(b, chapters=tuple(changed)), seg)
        assert all(r.ok for r in reports)
        segs[name] = Counter(content_key(s.text, "v", derive_seed(s.text, "v"), "e") for s in segments)
    body = segs["default"] - Counter({content_key(c.title, "v", derive_seed(c.title, "v"), "e"): 1
                                      for c in book.chapters})
    assert body - segs["all"] == Counter(), path.name           # every body segment is there, unchanged


def test_coverage_json_says_what_was_set_aside_and_why():
    book = load_book(corpus_path("epub", "idpf-epub3-samples", "kusamakura-japanese-vertical-writing.epub"))
    seg = book_options(book, SegmentOptions())
    data = coverage_json(segment_book(book, seg)[1], book)
    assert [c["chapter"] for c in data["chapters"]] == [c.index for c in book.chapters]
    assert [(e["number"], e["kind"], e["reason"], e["text"]) for e in data["set_aside"]] == \
        [(s.number, s.kind, s.reason, list(s.paragraphs)) for s in book.set_aside]
    assert sum(e["characters"] for e in data["set_aside"]) == sum(s.characters for s in book.set_aside) > 0


def test_include_by_number_and_skip_more(book_pair):
    path, book, _ = book_pair
    first = book.set_aside[0]
    back = load_book(path, matter=MatterOptions(include=(str(first.number),)))
    assert [s.number for s in back.set_aside] == [s.number for s in book.set_aside[1:]]
    assert any(set(first.paragraphs) - {c.title} <= set(c.paragraphs) for c in back.chapters)   # read again
    fewer = load_book(path, matter=MatterOptions(skip=("1",)))
    assert [c.title for c in fewer.chapters] == [c.title for c in book.chapters[1:]]
    extra = [s for s in fewer.set_aside if s.kind == "chapter"]
    assert len(extra) == 1 and extra[0].reason == "--skip 1" and extra[0].paragraphs == book.chapters[0].paragraphs
    assert extra[0].number == len(book.set_aside) + 1 and extra[0].after == 0


def crusoe_paragraphs(n: int) -> list[str]:
    """Real English text: paragraphs of Robinson Crusoe (Project Gutenberg's EPUB in the corpus)."""
    book = load_book(corpus_path("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub"))
    paras = [p for c in book.chapters for p in c.paragraphs if len(p) > 80]
    return paras[:n]


def test_an_epub2_guide_names_what_is_set_aside(tmp_path):
    """An EPUB 2 (NCX, a <guide>) built from Robinson Crusoe's text: the documents the guide calls toc, index,
    copyright-page and colophon are set aside, with the guide named as the reason; a guide entry with a fragment
    names no document; the chapters and their text are those of the same book without a guide."""
    p = crusoe_paragraphs(12)

    def body(title: str, paras: list[str]) -> str:
        return f"<h1>{title}</h1>" + "".join(f"<p>{x}</p>" for x in paras)

    docs = [("contents.xhtml", body("Contents", ["Chapter I", "Chapter II", "Index"])),
            ("c1.xhtml", body("CHAPTER I. START IN LIFE", p[0:4])),
            ("c2.xhtml", body("CHAPTER II. SLAVERY AND ESCAPE", p[4:8])),
            ("index.xhtml", body("Index", ["Africa, 12, 40", "Brazil, 51", "Crusoe, Robinson, passim"])),
            ("rights.xhtml", body("Copyright", [p[8]])),
            ("colophon.xhtml", body("Colophon", [p[9]])),
            ("notes.xhtml", body("A note", [p[10]]))]
    toc = [(n, t) for n, t in (("c1.xhtml", "Chapter I"), ("c2.xhtml", "Chapter II"), ("index.xhtml", "Index"),
                               ("notes.xhtml", "A note"))]
    guide = ('<reference type="toc" title="Contents" href="contents.xhtml"/>'
             '<reference type="index" title="Index" href="index.xhtml"/>'
             '<reference type="copyright-page" title="Copyright" href="rights.xhtml"/>'
             '<reference type="colophon" title="Colophon" href="colophon.xhtml"/>'
             '<reference type="text" title="Start" href="c1.xhtml"/>'
             '<reference type="bibliography" title="Notes" href="notes.xhtml#n1"/>')
    book = load_bytes(tmp_path, make_epub(docs, toc=toc, ncx=True, nav=False, guide=guide), "guide.epub")
    plain = load_bytes(tmp_path, make_epub(docs, toc=toc, ncx=True, nav=False), "plain.epub")
    assert [(s.kind, s.title, s.reason) for s in book.set_aside] == [
        ("toc", "Contents", 'a table of contents (the guide\'s "toc")'),
        ("index", "Index", 'an index (the guide\'s "index")'),
        ("copyright-page", "Copyright", 'a copyright page (the guide\'s "copyright-page")'),
        ("colophon", "Colophon", 'a colophon (the guide\'s "colophon")')]
    assert [c.title for c in book.chapters] == ["Chapter I", "Chapter II", "A note"]
    kept = {c.title: c.paragraphs for c in book.chapters}
    assert all(kept[c.title] == c.paragraphs for c in plain.chapters if c.title in kept)
    assert book.set_aside[1].paragraphs == ("Index", "Africa, 12, 40", "Brazil, 51", "Crusoe, Robinson, passim")
    assert [s.after for s in book.set_aside] == [0, 2, 2, 2]
    everything = load_bytes(tmp_path, make_epub(docs, toc=toc, ncx=True, nav=False, guide=guide), "all.epub",
                            matter=ALL)
    assert not everything.set_aside and "Index" in [c.title for c in everything.chapters]


def test_gutenberg_licence_in_txt_is_set_aside_and_comes_back(tmp_path):
    """A TXT made of a real Gutenberg book's header, its text and its licence (Robinson Crusoe: the corpus's
    Gutenberg TXTs are trimmed to one footer line): the header and the licence are set aside, whole, and
    --include pg-license (or the licence's number) reads them as the first and the last chapter; the corpus TXT's
    footer line is set aside too."""
    epub = load_book(corpus_path("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub"))
    header, _, licence = epub.set_aside                   # the EPUB's own: header, its contents page, licence
    assert (header.kind, licence.kind) == ("pg-license", "pg-license") and licence.characters > 15_000
    body = [("CHAPTER I. START IN LIFE", crusoe_paragraphs(6)[:3]), ("CHAPTER II. SLAVERY AND ESCAPE",
                                                                  crusoe_paragraphs(6)[3:])]
    text = "\n\n".join([*header.paragraphs, *(f"{t}\n\n" + "\n\n".join(ps) for t, ps in body),
                         *licence.paragraphs])
    path = tmp_path / "crusoe.txt"
    path.write_text(text + "\n", encoding="utf-8")
    book = load_book(path)
    assert [(s.number, s.kind, s.title, s.after) for s in book.set_aside] == [
        (1, "pg-license", "Project Gutenberg", 0), (2, "pg-license", "Project Gutenberg License", len(book.chapters))]
    assert book.set_aside[0].paragraphs == header.paragraphs and book.set_aside[1].paragraphs == licence.paragraphs
    assert [c.title for c in book.chapters] == [t for t, _ in body]
    back = load_book(path, matter=MatterOptions(include=("pg-license",)))
    assert not back.set_aside and [c.title for c in back.chapters] == [
        "Project Gutenberg", *(t for t, _ in body), "Project Gutenberg License"]
    assert back.chapters[0].paragraphs == header.paragraphs and back.chapters[-1].paragraphs == licence.paragraphs
    assert [c.paragraphs for c in back.chapters[1:-1]] == [c.paragraphs for c in book.chapters]
    only_licence = load_book(path, matter=MatterOptions(include=("2",)))
    assert ([s.number for s in only_licence.set_aside] == [1] and only_licence.chapters[-1].title == licence.title) \
        or only_licence.chapters[-1].title == "Project Gutenberg License"
    corpus = load_book(corpus_path("txt", "gutenberg-zh", "23865-0.txt"))
    assert [(s.kind, s.paragraphs) for s in corpus.set_aside] == [
        ("pg-license", ("End of the Project Gutenberg EBook of Hen Hai, by Jian-Ren Wu",))]


def test_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="not a number or one of toc"):
        MatterOptions(include=("preface",))                    # read by default: nothing to bring back
    with pytest.raises(ValueError, match="both name index"):
        MatterOptions(include=("index",), skip=("index",))
    with pytest.raises(ValueError, match="count from 1"):
        MatterOptions(skip=("0",))
    assert MatterOptions.parse(" Index, 3 ", "preface") == MatterOptions(("index", "3"), ("preface",))
    assert MatterOptions().sets_aside("index") and not MatterOptions().sets_aside("preface")
    assert MatterOptions(skip=("preface",)).sets_aside("preface")
    assert not MatterOptions(include=("all",)).sets_aside("pg-license")


def test_a_set_aside_section_is_a_break_so_short_neighbours_stay_apart(tmp_path):
    """A short paragraph before a bibliography and one after it: read with it or without it, neither is joined to
    what is across (Chapter.breaks), so every body segment is the same."""
    body = ("<h1>第一章</h1><p>他说完了。</p><section epub:type=\"bibliography\"><h2>参考书目</h2>"
            "<p>甲，《乙》。</p></section><p>好。</p><p>第二天早上，天还没有亮，他就起身出门去了。</p>")
    data = make_epub([("c1.xhtml", body)], toc=[("c1.xhtml", "第一章")])
    segs = {}
    for name, opts in (("default", MatterOptions()), ("all", ALL)):
        book = load_bytes(tmp_path, data, f"{name}.epub", matter=opts)
        segs[name] = [s.source_text for s in segment_book(book, book_options(book, SegmentOptions()))[0]]
        assert book.chapters[0].breaks
    assert set(segs["default"]) <= set(segs["all"]), segs
    assert "他说完了。" in segs["default"] and "他说完了。" in segs["all"]     # never joined across the section


def test_inspect_lists_what_is_set_aside(capsys):
    from flows.cli import main

    path = corpus_path("epub", "idpf-epub3-samples", "kusamakura-japanese-vertical-writing.epub")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    block = out.split("Set aside:", 1)[1].splitlines()
    assert "3 item(s)" in block[0] and "colophon" in block[2] and "bibliography" in block[4]
    assert main(["inspect", str(path), "--include", "9"]) == 2
    assert "--include 9: the book sets aside 3 item(s)" in capsys.readouterr().err


def test_names_stay_those_of_the_book_as_read(book_pair):
    """C.S names count the chapters as read: the first chapter read is 1 whatever came before it."""
    _, book, _ = book_pair
    assert [c.index for c in book.chapters] == list(range(len(book.chapters)))
    assert segment_name(book.chapters[0].index, 0) == "1.1"

