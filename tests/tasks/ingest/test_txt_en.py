"""English TXT ingest on real Project Gutenberg files (tests/data/txt/, see its README): header and licence gone,
chapters with their titles, contents lists not read as chapters, paragraphs unwrapped, nothing of the text lost,
the language; plus the heading forms and layouts the real files do not cover."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.book import Book
from tasks.ingest import load_book
from tasks.ingest.txt_en import heading_text

DATA = Path(__file__).resolve().parents[2] / "data" / "txt"
ALICE, PETER, FRANKENSTEIN, GATSBY = ("alice30.txt", "pg16-peter-pan.txt", "pg84-frankenstein-cp1252.txt",
                                      "pg64317-great-gatsby-cp1252.txt")
_CACHE: dict[str, Book] = {}


def _book(name: str) -> Book:
    if name not in _CACHE:
        _CACHE[name] = load_book(DATA / name)
    return _CACHE[name]


def _letters(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z\u00c0-\u024f]", "", text)


def _source_from(name: str, encoding: str, first_heading: str, nth: int) -> str:
    """The source text from the nth line that is `first_heading` (stripped) to the '*** END OF' line (or the end)."""
    lines = (DATA / name).read_bytes().decode(encoding).replace("\r\n", "\n").split("\n")
    start = [i for i, ln in enumerate(lines) if ln.strip() == first_heading][nth]
    end = next((i for i, ln in enumerate(lines) if ln.strip().startswith("*** END OF")), len(lines))
    return "\n".join(lines[start:end])


def _text_of(book: Book, first_chapter: int = 0) -> str:
    return "\n".join(f"{c.title}\n" + "\n".join(c.paragraphs) for c in book.chapters[first_chapter:])


def _all_text(book: Book) -> str:
    return _text_of(book) + book.meta.title + book.meta.author


# ------------------------------------------------------------------------------------------------ real files
ALICE_TITLES = ["Down the Rabbit-Hole", "The Pool of Tears", "A Caucus-Race and a Long Tale",
                "The Rabbit Sends in a Little Bill", "Advice from a Caterpillar", "Pig and Pepper", "A Mad Tea-Party",
                "The Queen's Croquet-Ground", "The Mock Turtle's Story", "The Lobster Quadrille",
                "Who Stole the Tarts?", "Alice's Evidence"]
ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]


def test_old_header_alice30():
    """The 1994 file: the '*END*THE SMALL PRINT!' licence is the header; centred CHAPTER I / title lines."""
    book = _book(ALICE)
    assert [c.title for c in book.chapters] == [f"CHAPTER {r}. {t}" for r, t in zip(ROMAN, ALICE_TITLES)]
    assert (book.meta.title, book.meta.author, book.meta.language) == ("ALICE'S ADVENTURES IN WONDERLAND",
                                                                       "Lewis Carroll", "en")
    text = _text_of(book)
    for boilerplate in ("SMALL PRINT", "Project Gutenberg", "Etext", "MILLENNIUM FULCRUM"):
        assert boilerplate not in text
    # Nothing lost: every letter from CHAPTER I to the end of the file, in order.
    assert _letters(text) == _letters(_source_from(ALICE, "ascii", "CHAPTER I", 0))


def test_old_alice_paragraphs_are_unwrapped():
    ch1 = _book(ALICE).chapters[0].paragraphs
    # Source lines 269-273, joined by hand: indented first line, hard-wrapped at ~65 columns, two spaces after ':'.
    assert ch1[0] == ("Alice was beginning to get very tired of sitting by her sister on the bank, and of having "
                      "nothing to do: once or twice she had peeped into the book her sister was reading, but it had "
                      "no pictures or conversations in it, `and what is the use of a book,' thought Alice `without "
                      "pictures or conversation?'")
    assert len(ch1) == 24  # the same count as the 2011 edition of the chapter (one paragraph per blank-line block)
    # A hyphen at a line end is the word's own ('WAISTCOAT-' / 'POCKET', 'sheep-' / 'bells'): kept, no space.
    paras = [p for c in _book(ALICE).chapters for p in c.paragraphs]
    assert any("TOOK A WATCH OUT OF ITS WAISTCOAT-POCKET, and looked at it" in p for p in paras)
    assert any("would change to tinkling sheep-bells, and the Queen's shrill cries" in p for p in paras)
    assert not any(re.fullmatch(r"[* ]+", p) for p in paras)  # '* * * * *' scene breaks are not text


def test_modern_header_peter_pan():
    """2021 file: Title/Author/Language header, 'Produced by:', a contents list, 'Chapter I.' / title line."""
    book = _book(PETER)
    titles = ["PETER BREAKS THROUGH", "THE SHADOW", "COME AWAY, COME AWAY!", "THE FLIGHT", "THE ISLAND COME TRUE",
              "THE LITTLE HOUSE", "THE HOME UNDER THE GROUND"]
    # The contents list names 17 chapters; the file holds 7 (see the README): the list is not read as chapters.
    assert [c.title for c in book.chapters] == [f"Chapter {r}. {t}" for r, t in zip(ROMAN, titles)]
    assert (book.meta.title, book.meta.author, book.meta.language) == ("Peter Pan", "James M. Barrie", "en")
    assert book.meta.encoding == "utf-8-sig"
    text = _all_text(book)
    for boilerplate in ("Project Gutenberg", "Duncan Research", "Produced by", "Contents", "copyright",
                        "THE MERMAIDS", "START OF", "END OF"):
        assert boilerplate not in text, boilerplate
    assert _letters(_text_of(book)) == _letters(_source_from(PETER, "utf-8-sig", "Chapter I.", 0))
    p = book.chapters[0].paragraphs
    assert p[0].startswith("All children, except one, grow up. They soon know that they will grow up, and the way "
                           "Wendy knew was this. One day when she was two years old she was playing in a garden,")
    assert p[1] == ("Of course they lived at 14, and until Wendy came her mother was the chief one. She was a lovely "
                    "lady, with a romantic mind and such a sweet mocking mouth. Her romantic mind was like the tiny "
                    "boxes, one within the other, that come from the puzzling East, however many you discover there "
                    "is always one more; and her sweet mocking mouth had one kiss on it that Wendy could never get, "
                    "though there it was, perfectly conspicuous in the right-hand corner.")


def test_arabic_chapters_letters_and_cp1252_frankenstein():
    book = _book(FRANKENSTEIN)
    assert [c.title for c in book.chapters] == [f"Letter {i}" for i in range(1, 5)] + [f"Chapter {i}"
                                                                                        for i in range(1, 8)]
    assert book.meta.encoding == "cp1252" and book.meta.language == "en"
    assert book.meta.title == "Frankenstein; Or, The Modern Prometheus"
    letter1 = book.chapters[0].paragraphs
    # '_To Mrs. Saville, England._' (italics markup gone), the date line, then the letter.
    assert letter1[:2] == ("To Mrs. Saville, England.", "St. Petersburgh, Dec. 11th, 17—.")
    assert letter1[2].startswith("You will rejoice to hear that no disaster has accompanied the commencement of an "
                                 "enterprise which you have regarded with such evil forebodings.")
    text = _text_of(book)
    assert "the route which the dæmon, as he called him, had pursued" in text  # cp1252, not cp1250's 'dćmon'
    assert "Salêve" in text and "Cæsar" in text
    assert _letters(text) == _letters(_source_from(FRANKENSTEIN, "cp1252", "Letter 1", 1).replace("_", ""))


def test_bare_roman_headings_and_front_matter_gatsby():
    """Chapters headed by a centred 'I', 'II'; the dedication and epigraph before them are read (the title page
    with them), the contents list of bare numerals is not."""
    book = _book(GATSBY)
    assert [c.title for c in book.chapters] == ["The Great Gatsby", "I", "II"]
    front = book.chapters[0].paragraphs
    assert front == ("The Great Gatsby by F. Scott Fitzgerald", "Once again to Zelda",
                     "Then wear the gold hat, if that will move her; If you can bounce high, bounce for her too, "
                     "Till she cry “Lover, gold-hatted, high-bouncing lover, I must have you!”",
                     "Thomas Parke d’Invilliers")
    assert book.chapters[1].paragraphs[0] == ("In my younger and more vulnerable years my father gave me some "
                                              "advice that I’ve been turning over in my mind ever since.")
    assert _letters(_text_of(book, 1)) == _letters(_source_from(GATSBY, "cp1252", "I", 1))
    assert (book.meta.author, book.meta.language) == ("F. Scott Fitzgerald", "en")


# ------------------------------------------------------------------------------------------------ forms and layouts
def _read(tmp_path, text: str, name: str = "book.txt") -> Book:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return load_book(p)


_PARA = ("It was a dark and stormy night; the rain fell in torrents, except at occasional\n"
         "intervals, when it was checked by a violent gust of wind which swept up the\n"
         "streets.\n")


@pytest.mark.parametrize("line,ok", [
    ("CHAPTER I.", True), ("Chapter 1", True), ("CHAPTER THE FIRST", True), ("Chapter Twenty-One", True),
    ("BOOK II", True), ("PART ONE", True), ("STAVE I:  MARLEY'S GHOST", True), ("Chapter I The Bertolini", True),
    ("CHAPTER I. Down the Rabbit-Hole", True), ("Letter 4", True),
    ("Chapter and verse were quoted,", False), ("Book of the dead", False), ("Part of the problem", False),
    ("Chapter 1 was the longest one,", False), ("I", False),
])
def test_heading_forms(line, ok):
    assert (heading_text(line) is not None) == ok


def test_part_heading_joins_the_chapter_title_and_language_from_the_text(tmp_path):
    text = ("MY BOOK\n\nby A. Writer\n\n\nPART ONE\n\n\nCHAPTER THE FIRST\n\nThe Storm\n\n" + _PARA +
            "\nCHAPTER THE SECOND\n\n" + _PARA)
    book = _read(tmp_path, text)
    assert [c.title for c in book.chapters] == ["PART ONE. CHAPTER THE FIRST. The Storm", "CHAPTER THE SECOND"]
    assert (book.meta.title, book.meta.author) == ("MY BOOK", "A. Writer")
    assert book.meta.language == "en"  # no Gutenberg header: from the text (tasks.book.book_language)
    assert book.chapters[0].paragraphs[0] == _PARA.replace("\n", " ").strip()


def test_unwrapped_file_has_a_paragraph_per_line(tmp_path):
    long = _PARA.replace("\n", " ").strip()
    book = _read(tmp_path, f"Chapter 1\n\n{long} One.\n{long} Two.\n\nChapter 2\n\n{long} Three.\n")
    assert [len(c.paragraphs) for c in book.chapters] == [2, 1]
    assert book.chapters[0].paragraphs[1].endswith("Two.")


def test_indented_paragraphs_without_blank_lines(tmp_path):
    text = ("CHAPTER I\n\n    First paragraph begins here and is wrapped at a narrow width so\n"
            "that it runs on to a second line.\n    Second paragraph begins here.\n"
            "    How doth the little crocodile\n        Improve his shining tail!\n\nCHAPTER II\n\n" + _PARA)
    paras = _read(tmp_path, text).chapters[0].paragraphs
    assert paras == ("First paragraph begins here and is wrapped at a narrow width so that it runs on to a second "
                     "line.", "Second paragraph begins here. How doth the little crocodile Improve his shining tail!")


def test_chinese_text_stays_chinese(tmp_path):
    book = _read(tmp_path, "第一回　開端\n\n　　話說天下大勢，分久必合，合久必分。Chapter 1 在此。\n\n"
                           "第二回　結局\n\n　　後來的事。\n")
    assert [c.title for c in book.chapters] == ["第一回　開端", "第二回　結局"]
    assert book.meta.language == "zh"


def test_contents_list_with_blank_lines_and_roman_titled_headings(tmp_path):
    """The War of the Worlds' layout: a contents list whose BOOK lines stand between blank lines, then
    `BOOK ONE` / title and `I.` / `THE EVE OF THE WAR.` headings (an all-capitals title may end in a stop)."""
    text = ("THE WAR OF THE WORLDS\n\nBy H. G. Wells\n\n\n BOOK ONE.—THE COMING OF THE MARTIANS\n\n"
            " I. THE EVE OF THE WAR.\n II. THE FALLING STAR.\n\n BOOK TWO.—THE EARTH UNDER THE MARTIANS\n\n"
            " I. UNDER FOOT.\n II. WHAT WE SAW FROM THE RUINED HOUSE.\n\n\nBOOK ONE\nTHE COMING OF THE MARTIANS\n\n\n"
            "I.\nTHE EVE OF THE WAR.\n\n" + _PARA +
            "\n\nII.\nTHE FALLING STAR.\n\n" + _PARA + "\n\nIII. ON HORSELL COMMON.\n\n" + _PARA)
    book = _read(tmp_path, text)
    assert [c.title for c in book.chapters] == ["BOOK ONE. THE COMING OF THE MARTIANS. I. THE EVE OF THE WAR.",
                                                "II. THE FALLING STAR.", "III. ON HORSELL COMMON."]
    assert (book.meta.title, book.meta.author) == ("THE WAR OF THE WORLDS", "H. G. Wells")
    assert all(c.paragraphs == (_PARA.replace("\n", " ").strip(),) for c in book.chapters)


def test_one_line_paragraphs_are_not_double_spacing_but_a_blank_after_every_wrapped_line_is(tmp_path):
    """Dialogue, one line a paragraph, one blank line apart, stays paragraphs; a copy with a blank line after
    every line (CR CR LF saved as two line ends) is unwrapped: there the lines before the blanks end mid-sentence."""
    replies = "".join(f"“Reply number {i}, said quickly,” he answered.\n\n" for i in range(30))
    book = _read(tmp_path, f"CHAPTER I\n\n{replies}CHAPTER II\n\n{_PARA}", "dialogue.txt")
    assert len(book.chapters[0].paragraphs) == 30
    book = _read(tmp_path, ("CHAPTER I\n\n\n\n" + (_PARA + "\n\n") * 12).replace("\n", "\r\r\n"), "crcrlf.txt")
    assert book.chapters[0].paragraphs == (_PARA.replace("\n", " ").strip(),) * 12


def test_titled_numerals_are_chapters_and_bare_numerals_inside_them_are_text(tmp_path):
    """The Adventures of Sherlock Holmes: `I. A SCANDAL IN BOHEMIA` heads a story whose parts are `I.`, `II.`."""
    story = f"I.\n\n{_PARA}\nII.\n\n{_PARA}\n"
    book = _read(tmp_path, f"I. A SCANDAL IN BOHEMIA\n\n{story}\nII. THE RED-HEADED LEAGUE\n\n{story}")
    assert [c.title for c in book.chapters] == ["I. A SCANDAL IN BOHEMIA", "II. THE RED-HEADED LEAGUE"]
    assert book.chapters[0].paragraphs[:2] == ("I.", _PARA.replace("\n", " ").strip())


def test_unnumbered_chapters_named_by_the_contents_list(tmp_path):
    """Jekyll and Hyde: chapters with titles only, found as the lines that repeat the contents list's entries."""
    text = ("The Strange Case Of Dr. Jekyll And Mr. Hyde\n\nby Robert Louis Stevenson\n\n\nContents\n\n\n"
            " STORY OF THE DOOR\n\n SEARCH FOR MR. HYDE\n\n\nSTORY OF THE DOOR\n\n" + _PARA +
            "\nSEARCH FOR MR. HYDE\n\n" + _PARA + "\nSTORY OF THE DOOR\n\nis also what this line says.\n")
    book = _read(tmp_path, text)
    assert [c.title for c in book.chapters] == ["STORY OF THE DOOR", "SEARCH FOR MR. HYDE"]
    assert book.chapters[1].paragraphs[-2:] == ("STORY OF THE DOOR", "is also what this line says.")
    assert (book.meta.title, book.meta.author) == ("The Strange Case Of Dr. Jekyll And Mr. Hyde",
                                                   "Robert Louis Stevenson")


def test_titles_wrapped_in_capitals_and_a_contents_list_of_them(tmp_path):
    """Don Quixote: chapter titles in capitals over two lines, listed the same way (blank lines between the
    entries) in a contents list: the list's entries have no prose under them and their numbers come again."""
    contents = ("CHAPTER I WHICH TREATS OF THE CHARACTER AND\nPURSUITS OF THE FAMOUS GENTLEMAN DON QUIXOTE\n\n"
                "CHAPTER II WHICH TREATS OF THE FIRST SALLY THE INGENIOUS\nDON QUIXOTE MADE FROM HOME\n\n\n")
    body = ("CHAPTER I.\nWHICH TREATS OF THE CHARACTER AND PURSUITS OF THE FAMOUS GENTLEMAN\nDON QUIXOTE\n\n" + _PARA +
            "\nCHAPTER II.\nWHICH TREATS OF THE FIRST SALLY THE INGENIOUS DON QUIXOTE MADE FROM HOME\n\n" + _PARA)
    book = _read(tmp_path, "DON QUIXOTE\n\n\n" + contents + body)
    assert [c.title for c in book.chapters] == [
        "CHAPTER I. WHICH TREATS OF THE CHARACTER AND PURSUITS OF THE FAMOUS GENTLEMAN DON QUIXOTE",
        "CHAPTER II. WHICH TREATS OF THE FIRST SALLY THE INGENIOUS DON QUIXOTE MADE FROM HOME"]
    assert all(c.paragraphs == (_PARA.replace("\n", " ").strip(),) for c in book.chapters)
