"""TXT ingest: encodings, chapter headings of the Gutenberg corpus, unwrapping, boilerplate, errors."""
from __future__ import annotations

import codecs
import re

import pytest

from tasks.book import Book
from tasks.errors import BookError
from tasks.ingest import load_book
from tasks.ingest.txt_zh import _NUM, _UNIT, numbered_heading
from tests.conftest import corpus_path

_DIGITS = {"零": 0, "〇": 0, "○": 0, "一": 1, "壹": 1, "二": 2, "贰": 2, "貳": 2, "两": 2, "兩": 2, "三": 3, "叁": 3,
           "參": 3, "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6, "七": 7, "柒": 7, "八": 8, "捌": 8,
           "九": 9, "玖": 9}
_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}


def cn_number(s: str) -> int | None:
    """Chinese or arabic numeral to int: 一百二十, 十九, 一二○ (digit by digit), 廿一, 120, １２０ (the tests'
    oracle for heading numbers; ingest keeps headings as written and never needs their value)."""
    s = s.strip()
    if not s:
        return None
    if s.isdigit():
        return int(s)
    if s[0] in "廿卅":
        rest = cn_number(s[1:]) if len(s) > 1 else 0
        return None if rest is None else (20 if s[0] == "廿" else 30) + rest
    if not any(ch in _UNITS for ch in s):
        if not all(ch in _DIGITS for ch in s):
            return None
        n = 0
        for ch in s:
            n = n * 10 + _DIGITS[ch]
        return n
    total, digit = 0, None
    for ch in s:
        if ch in _DIGITS:
            digit = _DIGITS[ch]
        elif ch in _UNITS:
            total += (1 if digit is None else digit) * _UNITS[ch]
            digit = None
        else:
            return None
    return total + (digit or 0)


def heading_number(title: str) -> int | None:
    """The number of a 第X回 heading (第一二○回 -> 120), else None."""
    m = re.match(rf"^\s*第({_NUM})[{_UNIT}]", title)
    return cn_number(m.group(1)) if m else None


_CACHE: dict[tuple[str, ...], Book] = {}


def _book(*parts: str) -> Book:
    """Books are immutable: each corpus file is read once per test session."""
    if parts not in _CACHE:
        _CACHE[parts] = load_book(corpus_path(*parts))
    return _CACHE[parts]


def _check_shape(book: Book) -> None:
    for i, ch in enumerate(book.chapters):
        assert ch.index == i
        assert ch.paragraphs, ch.title
        assert all(p and p == p.strip() for p in ch.paragraphs), ch.title
        assert ch.title and not re.search(r"[\x00-\x1f\x7f]", ch.title)


# ------------------------------------------------------------------------------------------- corpus
NUMBERED_BOOKS = [  # file, chapters, first title starts with, last title starts with
    ("23950-0.txt", 120, "第一回：宴桃園豪傑三結義", "第一二○回：薦杜預老將獻新謀"),
    ("23962-0.txt", 100, "第一回 靈根育孕源流出", "第一○○回 徑回東土"),
    ("24264-0.txt", 120, "第一回\u3000甄士隱夢幻識通靈", "第一二零回\u3000甄士隱詳說太虛情"),
    ("25124-0.txt", 20, "第一回\u3000土不制水歷年成患", "第二十回\u3000浪子金銀伐性斧"),
    ("23865-0.txt", 10, "第一回 訂婚姻掌判代通詞", "第十回 遁空門惘惘悵情天"),
]


@pytest.mark.parametrize("name,count,first,last", NUMBERED_BOOKS)
def test_gutenberg_numbered_chapters(name, count, first, last):
    book = _book("txt", "gutenberg-zh", name)
    _check_shape(book)
    titles = [c.title for c in book.chapters]
    assert len(titles) == count
    assert titles[0].startswith(first)
    assert titles[-1].startswith(last)
    # Every chapter is numbered, in order, with no gap and no duplicate (紅樓夢 repeats 第四十五回).
    assert [heading_number(t) for t in titles] == list(range(1, count + 1))
    assert book.meta.source_format == "txt" and book.meta.encoding == "utf-8"


def test_hongloumeng_body_lines_are_not_headings():
    book = _book("txt", "gutenberg-zh", "24264-0.txt")
    ch1, ch5 = book.chapters[0], book.chapters[4]
    assert ch1.paragraphs[0].startswith("此開卷第一回也")
    assert ch5.paragraphs[0].startswith("第四回中既將薛家母子在榮府內寄居等事略已表明")
    # Headings split over two lines (第三回 / rule / title) get their title.
    assert book.chapters[2].title == "第三回\u3000賈雨村夤緣复舊職\u3000林黛玉拋父進京都"
    assert book.chapters[5].title.endswith("賈寶玉初試云雨情\u3000劉姥姥一進榮國府")
    assert not any(re.fullmatch(r"-+", p) for c in book.chapters for p in c.paragraphs)
    assert any("第二回了．你怎么嘗不出來" in p for c in book.chapters for p in c.paragraphs)


def test_unwrapping_joins_hard_wrapped_lines():
    book = _book("txt", "gutenberg-zh", "24264-0.txt")
    p0 = book.chapters[0].paragraphs[0]
    # The first paragraph runs over 12 source lines; its last line is "\"云云．".
    assert "自欲將已往所賴天恩祖德" in p0 and p0.endswith("云云．")
    # A line that starts with "．" belongs to the previous line (no paragraph of its own).
    assert not any(p in ("．", "。") for c in book.chapters for p in c.paragraphs)
    assert any(p.endswith("亦是此書立意本旨．") for p in book.chapters[0].paragraphs)


NAHAN_TITLES = ["《吶喊》自序", "一件小事", "狂人日記", "鴨的喜劇", "端午節", "故鄉", "孔乙己", "藥", "阿Q正傳",
                "兔和貓", "社戲", "風波", "頭發的故事", "明天", "白光"]
ZHAOHUA_TITLES = ["小引", "狗·貓·鼠", "阿長與山海經", "《二十四孝圖》", "五猖會", "無常", "瑣記", "藤野先生", "范愛農",
                  "后記"]


def test_nahan_title_lines():
    """吶喊: the preface and 14 stories, in this file's order; 阿Q正傳's 第X章 and 狂人日記's 一..十三 are
    sections inside the stories, not chapters."""
    book = _book("txt", "gutenberg-zh", "27166-0.txt")
    _check_shape(book)
    assert [c.title for c in book.chapters] == NAHAN_TITLES
    aq = book.chapters[NAHAN_TITLES.index("阿Q正傳")]
    assert aq.paragraphs[0] == "第一章序" and "第九章大團圓" in aq.paragraphs
    # Double-spaced hard wrapping: a sentence broken over "line / blank / line" is one paragraph.
    preface = book.chapters[0].paragraphs
    assert preface[0].startswith("我在年青時候也曾經做過許多夢") and preface[0].endswith("便成了《吶喊》的來由。")
    assert "使精神的絲縷還牽著己逝的寂寞的時光" in preface[0]
    assert preface[1].startswith("我有四年多，曾經常常，——幾乎是每天，出入于質鋪和藥店里")


def test_zhaohuaxishi_title_lines():
    """朝花夕拾 (this Gutenberg text has no 父親的病): 小引, eight essays, 后記."""
    book = _book("txt", "gutenberg-zh", "25271-0.txt")
    _check_shape(book)
    assert [c.title for c in book.chapters] == ZHAOHUA_TITLES
    assert book.chapters[4].paragraphs[-1] == "五月二十五日"


def test_henhai_html_leftovers_removed():
    book = _book("txt", "gutenberg-zh", "23865-0.txt")
    text = "".join(p for c in book.chapters for p in c.paragraphs)
    assert "<br>" not in text and "&nbsp;" not in text and "<" not in text
    assert book.meta.title == "恨海" and book.meta.author == "吳趼人"
    # <br> at every source line end is hard wrapping, not a paragraph per line.
    assert book.chapters[0].paragraphs[0].startswith("我提起筆來，要敘一段故事。")
    assert "可以叫得做寫情小說" in book.chapters[0].paragraphs[0]


def test_gutenberg_footer_dropped():
    for name in ("23950-0.txt", "25271-0.txt", "23865-0.txt"):
        book = _book("txt", "gutenberg-zh", name)
        assert not any("Gutenberg" in p for c in book.chapters for p in c.paragraphs), name


@pytest.mark.parametrize("transcoded,original,encoding", [
    ("23865-0.gbk.txt", "23865-0.txt", "gb18030"),
    ("25124-0.gb18030.txt", "25124-0.txt", "gb18030"),
    ("27166-0.gb18030.txt", "27166-0.txt", "gb18030"),
])
def test_transcoded_match_utf8(transcoded, original, encoding):
    a = _book("txt", "encodings-transcoded", transcoded)
    b = _book("txt", "gutenberg-zh", original)
    assert a.meta.encoding == encoding
    assert a.chapters == b.chapters


# ------------------------------------------------------------------------------------------- encodings
SAMPLE = "第一回　開端\n\n　　話說天下大勢，分久必合，合久必分。這是一個測試用的段落，內容要足夠長才好判斷編碼。\n\n" \
         "第二回　結尾\n\n　　卻說那人走了，再也沒有回來。眾人都覺得十分奇怪，議論紛紛，直到天明。\n"


@pytest.mark.parametrize("encoding,expect", [
    ("utf-8", "utf-8"), ("utf-8-sig", "utf-8-sig"), ("utf-16", "utf-16"), ("utf-16-le", "utf-16-le"),
    ("gb18030", "gb18030"), ("big5", "big5"),
])
def test_encodings_detected_and_recorded(tmp_path, encoding, expect):
    p = tmp_path / "book.txt"
    data = (SAMPLE * 3).encode(encoding)
    if encoding == "utf-16-le":  # no BOM: detected from the NUL pattern
        assert not data.startswith(codecs.BOM_UTF16_LE)
    p.write_bytes(data)
    book = load_book(p)
    assert book.meta.encoding == expect
    assert [c.title for c in book.chapters] == ["第一回　開端", "第二回　結尾"] * 3
    assert book.chapters[0].paragraphs[0].startswith("話說天下大勢")


def test_undecidable_encoding_is_an_error(tmp_path):
    p = tmp_path / "noise.txt"
    p.write_bytes(bytes(range(128, 256)) * 40 + b"\x81\x30" * 7)
    with pytest.raises(BookError) as ei:
        load_book(p)
    assert ei.value.problem in ("unknown text encoding", "not a text file (binary data)")


@pytest.mark.parametrize("data,problem", [
    (b"", "empty file"),
    (b"   \n\n\t \n", "no readable text"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "not an EPUB or text file (PNG image)"),
    (b"\xff\xfe" + b"\x00\xd8", "unknown text encoding (invalid utf-16 after a byte-order mark)"),
])
def test_bad_text_files(tmp_path, data, problem):
    p = tmp_path / "bad.txt"
    p.write_bytes(data)
    with pytest.raises(BookError) as ei:
        load_book(p)
    assert ei.value.problem == problem
    assert str(p) in str(ei.value) and "\n" not in str(ei.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(BookError, match="file not found"):
        load_book(tmp_path / "nope.txt")
    with pytest.raises(BookError, match="directory"):
        load_book(tmp_path)


def test_dispatch_on_content_not_extension(tmp_path):
    p = tmp_path / "book.epub"  # a text file named .epub
    p.write_text(SAMPLE, encoding="utf-8")
    assert load_book(p).meta.source_format == "txt"


# ------------------------------------------------------------------------------------------- headings
@pytest.mark.parametrize("line,ok", [
    ("第一回", True), ("第十二章 風雪", True), ("第一二○回：薦杜預老將獻新謀", True), ("第３章　開始", True),
    ("第一章序", True), ("第二卷", True), ("第三節 結論", True), ("第〇回", True), ("第零章 起點", True),
    ("第四回中既將薛家母子在榮府內寄居等事略已表明，此回則暫不能寫矣．如", False),
    ("第二回了．你怎么嘗不出來？", False), ("第一次見面", False), ("第一回合他就輸了。", False),
    ("第十章，他走了。", False),
])
def test_numbered_heading(line, ok):
    assert (numbered_heading(line) is not None) == ok


def test_cn_number():
    numerals = ("一百二十", "十九", "一二○", "廿一", "120", "１２０", "一零零", "十", "一百零五")
    assert [cn_number(x) for x in numerals] == [120, 19, 120, 21, 120, 120, 100, 10, 105]
    assert cn_number("甲") is None


def test_special_headings_and_front_matter(tmp_path):
    text = ("我的書\n\n作者某\n\n楔子\n\n　　很久以前，有一座山。\n\n第一章 開始\n\n　　故事從這裡開始。\n\n"
            "第二章 經過\n\n　　然後發生了很多事。\n\n尾聲\n\n　　最後大家都走了。\n\n後記\n\n　　寫完了。\n")
    p = tmp_path / "b.txt"
    p.write_text(text, encoding="utf-8")
    book = load_book(p)
    assert [c.title for c in book.chapters] == ["楔子", "第一章 開始", "第二章 經過", "尾聲", "後記"]
    assert book.meta.title == "我的書" and book.meta.author == "作者某"


def test_control_characters_stripped_from_titles(tmp_path):
    p = tmp_path / "b.txt"
    p.write_text("第一章 開\x07始\x1b[31m\n\n　　內容一。\n\n第二章 二\n\n　　內容二。\n", encoding="utf-8")
    book = load_book(p)
    assert book.chapters[0].title == "第一章 開始[31m"
    assert not re.search(r"[\x00-\x1f]", "".join(p for c in book.chapters for p in c.paragraphs))


def test_pg_header_and_footer(tmp_path):
    text = ("The Project Gutenberg EBook of Test, by Somebody\n\nTitle: 測試書\n\nAuthor: 某人\n\n"
            "*** START OF THIS PROJECT GUTENBERG EBOOK TEST ***\n\nProduced by Someone and the Online Distributed "
            "Proofreading Team at http://www.pgdp.net (This file was produced from images).\n\n"
            "第一回 甲\n\n　　正文一。\n\n第二回 乙\n\n"
            "　　正文二。\n\n*** END OF THIS PROJECT GUTENBERG EBOOK TEST ***\n\nSection 1. General Terms of Use\n")
    p = tmp_path / "pg.txt"
    p.write_text(text, encoding="utf-8")
    book = load_book(p)
    assert book.meta.title == "測試書" and book.meta.author == "某人"
    assert [c.paragraphs for c in book.chapters] == [("正文一。",), ("正文二。",)]


# ------------------------------------------------------------------------------------------- regressions
def test_utf8_cut_inside_last_character(tmp_path):
    """Fuzz regression: a file cut in the middle of its last UTF-8 character was 'unknown text encoding'."""
    data = SAMPLE.encode("utf-8") + "尾".encode()[:2]
    p = tmp_path / "cut.txt"
    p.write_bytes(data)
    book = load_book(p)
    assert book.meta.encoding == "utf-8"
    assert book.chapters[-1].paragraphs[-1].endswith("直到天明。")


def test_gbk_cut_inside_last_character(tmp_path):
    """Fuzz regression: the same for a GBK file (the detector's sample ended inside a character)."""
    data = (SAMPLE * 20).encode("gbk") + "尾".encode("gbk")[:1]
    p = tmp_path / "cut.txt"
    p.write_bytes(data)
    book = load_book(p)
    assert book.meta.encoding == "gb18030" and len(book.chapters) == 40


def test_lightly_damaged_utf8_is_reported_not_misdetected(tmp_path):
    data = bytearray((SAMPLE * 20).encode("utf-8"))
    data[200] = 0xFF  # one bad byte
    p = tmp_path / "damaged.txt"
    p.write_bytes(bytes(data))
    book = load_book(p)
    assert re.fullmatch(r"utf-8 \([12] invalid byte sequences replaced\)", book.meta.encoding)
    assert book.chapters[0].title == "第一回　開端"


def test_title_and_author_from_gutenberg_footer():
    book = _book("txt", "gutenberg-zh", "23950-0.txt")
    assert (book.meta.title, book.meta.author) == ("Romance of the Three Kingdoms", "Guanzhong Luo")


def test_lines_of_complete_sentences_are_not_unwrapped(tmp_path):
    """Equal-length lines that each end a sentence are not hard wrapping."""
    p = tmp_path / "s.txt"
    p.write_text("\n".join(["這是一行完整的句子。"] * 50), encoding="utf-8")
    assert len(load_book(p).chapters[0].paragraphs) == 50


def test_web_novel_indented_headings(tmp_path):
    """Web-novel TXT: every line, headings included, starts with two ideographic spaces."""
    body = "　　他走進了房間，看見桌上放著一封信，信封上寫著他的名字，字跡非常熟悉。\n"
    text = "".join(f"　　第{n}章　標題{n}\n\n{body * 3}\n" for n in "一二三")
    p = tmp_path / "web.txt"
    p.write_text(text, encoding="utf-8")
    book = load_book(p)
    assert [c.title for c in book.chapters] == ["第一章　標題一", "第二章　標題二", "第三章　標題三"]
    assert all(len(c.paragraphs) == 3 for c in book.chapters)


def test_english_chapter_headings(tmp_path):
    text = ("CHAPTER I.\n\nThe Beginning\n\nIt was a dark night.\n\nCHAPTER II. The End\n\nIt was over.\n\n"
            "Chapter 3 was not written.\n")
    p = tmp_path / "en.txt"
    p.write_text(text, encoding="utf-8")
    book = load_book(p)
    assert [c.title for c in book.chapters] == ["CHAPTER I. The Beginning", "CHAPTER II. The End"]
    assert book.chapters[1].paragraphs == ("It was over.", "Chapter 3 was not written.")


def test_front_matter_labels(tmp_path):
    p = tmp_path / "web.txt"
    p.write_text("书名：《长夜》\n作者：无名氏\n\n第一章 开始\n\n　　夜很长。\n\n第二章 结束\n\n　　天亮了。\n",
                 encoding="utf-8")
    book = load_book(p)
    assert (book.meta.title, book.meta.author) == ("长夜", "无名氏")
    assert [c.title for c in book.chapters] == ["第一章 开始", "第二章 结束"]


def test_not_a_regular_file(tmp_path):
    import os

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(BookError, match="not a regular file"):
        load_book(fifo)
    with pytest.raises(BookError, match="not a regular file"):
        load_book("/dev/zero")


def test_html_leftovers_only_known_tags(tmp_path):
    p = tmp_path / "h.txt"
    p.write_text("第一回 甲<br>\n<p>他說&nbsp;1<2且3>2，<<書名>>&amp;<i>好</i>。</p>\n\n第二回 乙\n\n完。\n",
                 encoding="utf-8")
    book = load_book(p)
    assert book.chapters[0].title == "第一回 甲"
    assert book.chapters[0].paragraphs == ("他說 1<2且3>2，<<書名>>&好。",)


def test_short_dialogue_lines_are_not_titles(tmp_path):
    """A flush-left novel with blank lines between paragraphs: 嗯 / 走吧 are text, not essay titles."""
    paras = ["他看著她，很久沒有說話，窗外的雨一直下著，屋裡只有鐘聲。", "嗯", "她低下頭，手指在桌上輕輕敲著。",
             "走吧", "於是兩人一起出了門，消失在雨夜裡。"]
    for sep in ("\n\n", "\n\n\n"):
        p = tmp_path / "novel.txt"
        p.write_text(sep.join(paras * 10), encoding="utf-8")
        book = load_book(p)
        assert len(book.chapters) == 1 and len(book.chapters[0].paragraphs) == 50, sep


@pytest.mark.parametrize("text,encoding,expect", [
    ("第一章 你好\n\n內容。\n", "gbk", "gb18030"),              # charset-normalizer alone says cp949
    ("Hello 中文 world\n", "gbk", "gb18030"),                   # ... or big5
    ("我們說了很多話，他不知道。", "big5", "big5"),
    ("我们说了很多话，他不知道。", "gb2312", "gb18030"),
])
def test_short_chinese_files_detected(tmp_path, text, encoding, expect):
    p = tmp_path / "short.txt"
    p.write_bytes(text.encode(encoding))
    book = load_book(p)
    assert book.meta.encoding == expect
    assert "".join(c.title + "".join(c.paragraphs) for c in book.chapters).replace(" ", "") \
        .find(text.split("\n")[0].replace(" ", "")) >= 0


def test_tiny_books_without_headings_are_read(tmp_path):
    p = tmp_path / "one.txt"
    p.write_text("一句話。", encoding="utf-8")
    assert load_book(p).chapters[0].paragraphs == ("一句話。",)
    p.write_text("abc", encoding="utf-16")
    assert load_book(p).chapters[0].paragraphs == ("abc",)
