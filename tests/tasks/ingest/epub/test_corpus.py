"""The EPUB corpus: named books (the 山海經 sections, Robinson Crusoe, The Waste Land's notes, 草枕's ruby,
Liber Esther) and the walk over every EPUB in it."""
from __future__ import annotations

from tasks.errors import BookError
from tasks.ingest import load_book
from tests.conftest import CORPUS, corpus_missing, corpus_path
from tests.tasks.ingest.epub.helpers import all_text


def test_shanhaijing_sections_from_xhtml_headings():
    book = load_book(corpus_path("epub", "gutenberg", "pg25288-shanhaijing-zh.epub"))
    titles = [c.title for c in book.chapters]
    assert titles == ["南山經", "西山經", "北山經", "東山經", "中山經", "海外南經", "海外西經", "海外北經", "海外東經",
                      "海內南經", "大荒南經", "海內西經", "海內北經", "海內東經", "大荒東經", "大荒西經", "大荒北經",
                      "海內經"]
    assert book.chapters[0].paragraphs[0].startswith("南山經之首曰鵲山")
    text = all_text(book)
    assert "Gutenberg" not in text and "Produced by" not in text and "LICENSE" not in text
    assert book.meta.title == "山海經" and book.meta.language == "zh" and book.meta.cover_mime == "image/png"
    # Hard-wrapped lines rendered as separate <p>s are joined again: "...帝乃</p><p>命禹卒布土以定九州。".
    last = book.chapters[-1].paragraphs[-1]
    assert last.startswith("洪水滔天") and last.endswith("帝乃命禹卒布土以定九州。")
    assert any(p.endswith("其名曰類，自為牝牡，食者不妒。") for p in book.chapters[0].paragraphs)


def test_robinson_crusoe_chapters():
    book = load_book(corpus_path("epub", "gutenberg", "pg521-Robinson_Crusoe-en.epub"))
    titles = [c.title for c in book.chapters]
    assert len(titles) == 20 and titles[0] == "CHAPTER I. START IN LIFE"
    assert titles[-1] == "CHAPTER XX. FIGHT BETWEEN FRIDAY AND A BEAR"
    assert book.chapters[0].paragraphs[0].startswith("I was born in the year 1632")
    assert "Gutenberg" not in all_text(book)


def test_wasteland_notes_and_line_numbers():
    book = load_book(corpus_path("epub", "idpf-epub3-samples", "wasteland.epub"))
    assert [c.title for c in book.chapters][1:] == ["I. THE BURIAL OF THE DEAD", "II. A GAME OF CHESS",
                                                    "III. THE FIRE SERMON", "IV. DEATH BY WATER",
                                                    "V. WHAT THE THUNDER SAID"]
    burial = book.chapters[1].paragraphs
    assert "Out of this stony rubbish? Son of man," in burial   # no "*" note mark, no line number "20"
    assert "Line 20. Cf. Ezekiel 2:1." in burial  # note 1 read at the end of the chapter that cites it
    assert burial.index("Out of this stony rubbish? Son of man,") < burial.index("Line 20. Cf. Ezekiel 2:1.")
    assert book.chapters[2].paragraphs[-1] != burial[-1]
    skipped = load_book(corpus_path("epub", "idpf-epub3-samples", "wasteland.epub"), notes="skip")
    assert not any("Ezekiel 2:1" in p for c in skipped.chapters for p in c.paragraphs)
    assert len(skipped.chapters[1].paragraphs) < len(burial)


def test_kusamakura_ruby_base_text_only():
    book = load_book(corpus_path("epub", "idpf-epub3-samples", "kusamakura-japanese-vertical-writing.epub"))
    assert [c.title for c in book.chapters][1:14] == ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十",
                                                      "十一", "十二", "十三"]
    assert book.chapters[1].paragraphs[0] == "山路を登りながら、こう考えた。"
    assert "智に働けば角が立つ。" in book.chapters[1].paragraphs[1]


def test_liber_esther_no_boilerplate_titles():
    book = load_book(corpus_path("epub", "gutenberg", "pg826-Liber_Esther-la.epub"))
    assert not any("Gutenberg" in c.title for c in book.chapters)
    assert book.chapters[1].title == "1. REGINA VASTHI EICITUR, 1:1-22."
    assert "Gutenberg" not in all_text(book)


EXPECTED_ERRORS = {
    "ocf-container-not-ocf-error.epub": "not an EPUB (an Office Open XML document, e.g. .docx)",
    "ocf-zip-unreadable-empty-fatal.epub": "empty file",
    "ocf-zip-unreadable-image-with-epub-extension-fatal.epub": "not an EPUB or text file (JPEG image)",
    "ocf-zip-unreadable-no-end-header-fatal.epub": "truncated or corrupt ZIP archive",
    "page-blanche-bitmaps-in-spine.epub": "no readable text",
}


def test_every_corpus_epub_ingests_or_fails_cleanly():
    """Walk every EPUB in the corpus: a Book whose chapters have text, or the expected one-line BookError;
    never another exception and never an unexpected parser failure converted at the boundary."""
    root = CORPUS / "epub"
    files = sorted(root.rglob("*.epub"))
    if not files:
        corpus_missing(root)
    outcomes = {}
    for f in files:
        try:
            book = load_book(f)
        except BookError as e:
            assert "\n" not in str(e) and str(f) in str(e)
            outcomes[f.name] = e.problem
            continue
        assert book.chapters and all(c.paragraphs and all(c.paragraphs) for c in book.chapters), f
        assert all(p == p.strip() for c in book.chapters for p in c.paragraphs), f
        outcomes[f.name] = "ok"
    errors = {k: v for k, v in outcomes.items() if v != "ok"}
    assert errors == {k: v for k, v in EXPECTED_ERRORS.items() if k in outcomes}
    assert len(outcomes) >= 70
