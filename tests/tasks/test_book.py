"""tasks/book.py: the language a book is read in."""
import pytest

from tasks.book import Book, BookMeta, Chapter, book_language, speech_language


def _book(text: str, language: str = "") -> Book:
    return Book(BookMeta(title="t", language=language), (Chapter(0, "", (text,)),))


@pytest.mark.parametrize("tag, lang", [("zh", "zh"), ("zh-Hant-TW", "zh"), ("zh_CN", "zh"), ("chi", "zh"),
                                       ("en-GB", "en"), ("EN", "en"), ("eng", "en"), ("la", None), ("und", None),
                                       ("", None)])
def test_speech_language(tag, lang):
    assert speech_language(tag) == lang


ENGLISH = "I was born in the year 1632, in the city of York, of a good family. " * 10
CHINESE = "他说他有3 hours的时间，于是去了New York。" * 10


@pytest.mark.parametrize("text, declared, lang", [
    (ENGLISH, "", "en"), (CHINESE, "", "zh"),                 # no declaration: the text decides
    (ENGLISH, "en", "en"), (CHINESE, "zh-CN", "zh"),
    (CHINESE, "en", "zh"),                                    # a Chinese EPUB tagged "en" by its tool
    (ENGLISH, "zh", "en"),                                    # "zh" on a book without Han characters
    (ENGLISH, "la", "en"), ("12345", "", "zh"),
])
def test_book_language_auto(text, declared, lang):
    assert book_language(_book(text, declared)) == lang


def test_book_language_requested_wins_and_bad_choice_names_itself():
    assert book_language(_book(ENGLISH, "en"), "zh") == "zh"
    assert book_language(_book(CHINESE), "en") == "en"
    with pytest.raises(ValueError, match="language must be one of auto, zh, en, not 'fr'"):
        book_language(_book(CHINESE), "fr")
