"""Hostile input: XML external entities and entity bombs, zip bombs, path traversal, duplicate entries, DRM,
huge single-paragraph text.  Each test fails without its guard."""
from __future__ import annotations

import os
import tracemalloc
import zipfile

import pytest

from tasks.errors import BookError
from tasks.ingest import load_book
from tasks.ingest.epub import archive
from tests.tasks.ingest.epub.helpers import XHTML, all_text, load_bytes, make_epub, zip_bytes

SECRET = "TOP-SECRET-CONTENT-4711"


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "secret.txt"
    p.write_text(SECRET, encoding="utf-8")
    return p


def _xxe_doc(uri: str) -> str:
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html [ <!ENTITY xxe SYSTEM "{uri}"> ]>\n'
            '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>before &xxe; after</p></body></html>')


# ------------------------------------------------------------------------------------------- XML
def test_xxe_in_xhtml_never_resolved(tmp_path, secret_file):
    for uri in (secret_file.as_uri(), "file:///etc/passwd", "http://127.0.0.1:9/evil"):
        data = make_epub([("c.xhtml", "")], raw_docs={"c.xhtml": _xxe_doc(uri)})
        book = load_bytes(tmp_path, data)
        text = all_text(book)
        assert SECRET not in text and "root:" not in text
        assert "before" in text and "after" in text


def test_xxe_in_opf_refused(tmp_path, secret_file):
    data = make_epub([("c.xhtml", "<p>x</p>")], opf_head=f'\n<!DOCTYPE package [ <!ENTITY xxe SYSTEM '
                                                           f'"{secret_file.as_uri()}"> ]>',
                     meta="<dc:title>&xxe;</dc:title>")
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, data)
    assert "entit" in ei.value.problem
    assert SECRET not in str(ei.value)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<html xmlns="http://www.w3.org/1999/xhtml"><body><p>&lol9;</p></body></html>"""


def test_billion_laughs_in_xhtml_refused(tmp_path):
    data = make_epub([("c.xhtml", "")], raw_docs={"c.xhtml": BILLION_LAUGHS})
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, data)
    assert "entity" in ei.value.problem and "c.xhtml" in ei.value.problem


def test_billion_laughs_in_opf_refused(tmp_path):
    head = BILLION_LAUGHS.split("]>")[0].replace('<?xml version="1.0"?>', "").replace("lolz", "package") + "]>"
    data = make_epub([("c.xhtml", "<p>x</p>")], opf_head=head, meta="<dc:title>&lol9;</dc:title>")
    with pytest.raises(BookError, match="entit"):
        load_bytes(tmp_path, data)


def test_billion_laughs_in_ncx_refused(tmp_path):
    data = make_epub([("c.xhtml", "<p>x</p>")], ncx=True, nav=False)
    # Rewrite the NCX with an entity bomb.
    import io
    src = zipfile.ZipFile(io.BytesIO(data))
    entries = []
    for info in src.infolist():
        if info.filename == "mimetype":
            continue
        body = src.read(info)
        if info.filename.endswith(".ncx"):
            head = BILLION_LAUGHS.split("]>")[0].replace("lolz", "ncx") + "]>"
            body = (head + body.decode().split("?>", 1)[1].replace("<text>T</text>", "<text>&lol9;</text>")).encode()
        entries.append((info.filename, body))
    with pytest.raises(BookError, match="entit"):
        load_bytes(tmp_path, zip_bytes(entries))


# ------------------------------------------------------------------------------------------- ZIP
def test_zip_bomb_entry_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_ENTRY_BYTES", 1_000_000)
    body = "<p>" + "啊" * 400_000 + "</p>"  # ~1.2 MB of UTF-8
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert "too large" in ei.value.problem and "c.xhtml" in ei.value.problem


def test_zip_bomb_compression_ratio_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "RATIO_MIN_BYTES", 100_000)
    body = "<p>" + "a" * 2_000_000 + "</p>"  # compresses about 1000:1
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    assert "compression ratio" in ei.value.problem


def test_zip_bomb_total_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", 300_000)
    docs = [(f"c{i}.xhtml", "<p>" + "字" * 30_000 + f"{os.urandom(8).hex()}</p>") for i in range(5)]
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, make_epub(docs))
    assert "too large when decompressed" in ei.value.problem


def test_limits_are_sane_constants():
    assert archive.MAX_ENTRY_BYTES <= archive.MAX_TOTAL_BYTES
    assert 10 <= archive.MAX_RATIO <= 10_000


def test_path_traversal_entries_never_read(tmp_path, secret_file):
    """Entries named ../x or /x and hrefs climbing out of the archive are ignored; nothing is read from or
    written to the file system next to the book."""
    inner = tmp_path / "deep" / "er"
    inner.mkdir(parents=True)
    evil_doc = XHTML.format(title="e", body=f"<p>{SECRET}</p>")
    data = make_epub([("c.xhtml", "<p>正文。</p>"), ("../../secret.txt", ""), ("../../../evil.xhtml", "")],
                     raw_docs={"../../../evil.xhtml": evil_doc},
                     extra=[("../../escape.xhtml", evil_doc), ("/abs.xhtml", evil_doc)])
    before = sorted(p.name for p in tmp_path.rglob("*"))
    book = load_bytes(inner, data)
    assert all_text(book) == "正文。"
    assert SECRET not in repr(book)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(before + ["book.epub"])


def test_duplicate_entries_first_wins(tmp_path):
    data = make_epub([("c.xhtml", "<p>第一份。</p>")],
                     extra=[("OEBPS/c.xhtml", XHTML.format(title="c", body="<p>第二份。</p>"))])
    with zipfile.ZipFile(tmp_path / "x.zip", "w") as _:
        pass
    book = load_bytes(tmp_path, data)
    assert all_text(book) == "第一份。"
    assert load_bytes(tmp_path, data, name="again.epub").chapters == book.chapters  # deterministic


# ------------------------------------------------------------------------------------------- DRM
def _encryption(algorithm: str, uri: str) -> str:
    return f"""<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
 xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod Algorithm="{algorithm}"/>
<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>"""


def test_drm_encrypted_content_refused(tmp_path):
    enc = _encryption("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "OEBPS/c.xhtml")
    data = make_epub([("c.xhtml", "<p>x</p>")], extra=[("META-INF/encryption.xml", enc)])
    with pytest.raises(BookError) as ei:
        load_bytes(tmp_path, data)
    assert ei.value.problem == "EPUB is DRM-encrypted, cannot be read"


@pytest.mark.parametrize("algorithm", ["http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"])
def test_font_obfuscation_is_not_drm(tmp_path, algorithm):
    enc = _encryption(algorithm, "OEBPS/fonts/f.otf")
    data = make_epub([("c.xhtml", "<p>有字體的書。</p>")],
                     extra=[("META-INF/encryption.xml", enc), ("OEBPS/fonts/f.otf", b"\x00obfuscated")])
    assert all_text(load_bytes(tmp_path, data)) == "有字體的書。"


# ------------------------------------------------------------------------------------------- text size
def _big_paragraph(n_chars: int) -> str:
    unit = "天地玄黃，宇宙洪荒。日月盈昃，辰宿列張。"
    return (unit * (n_chars // len(unit) + 1))[:n_chars]


def _ingest_single_paragraph(tmp_path, n_bytes: int):
    text = _big_paragraph(n_bytes // 3)
    p = tmp_path / "big.txt"
    p.write_text(text, encoding="utf-8")
    tracemalloc.start()
    try:
        book = load_book(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(book.chapters) == 1 and book.chapters[0].paragraphs == (text,)
    # Bounded memory: a small multiple of the input (bytes + decoded str + a few copies), not per-line objects.
    assert peak < 12 * n_bytes, peak
    return book


def test_5mb_single_paragraph_txt(tmp_path):
    _ingest_single_paragraph(tmp_path, 5 * 1024 * 1024)


@pytest.mark.slow
def test_50mb_single_paragraph_txt(tmp_path):
    """Run: RUN_SLOW=1 python -m pytest tests/tasks/ingest/test_hostile.py -m slow"""
    _ingest_single_paragraph(tmp_path, 50 * 1024 * 1024)


def test_many_short_lines_txt(tmp_path):
    """100k lines with no headings: linear-time unwrapping (no per-line rescans)."""
    lines = ["這是一行比較短的文字。"] * 100_000
    p = tmp_path / "lines.txt"
    p.write_text("\n".join(lines), encoding="utf-8")
    book = load_book(p)
    assert sum(len(c.paragraphs) for c in book.chapters) == 100_000


@pytest.mark.parametrize("depth", [200, 5000])
def test_deeply_nested_xhtml(tmp_path, depth):
    body = "<div>" * depth + "<p>深</p>" + "</div>" * depth
    try:
        book = load_bytes(tmp_path, make_epub([("c.xhtml", body)]))
    except BookError as e:
        assert depth > 256 and not e.problem.startswith("unreadable book")
    else:
        assert all_text(book) == "深"


def test_billion_laughs_never_expanded_by_the_parser(tmp_path, monkeypatch):
    """Defence in depth: even with the entity-declaration check disabled, lxml (resolve_entities=False)
    does not expand the bomb."""
    monkeypatch.setattr(archive, "_check_entities", lambda *a: None)
    data = make_epub([("c.xhtml", "<p>ok</p>"), ("bomb.xhtml", "")], raw_docs={"bomb.xhtml": BILLION_LAUGHS})
    book = load_bytes(tmp_path, data)
    assert "lol" not in all_text(book) and len(all_text(book)) < 100


def test_character_entity_declarations_are_not_a_bomb(tmp_path):
    raw = ('<?xml version="1.0"?>\n<!DOCTYPE html [ <!ENTITY nbsp "&#160;"> <!ENTITY mdash "&#8212;"> ]>\n'
           '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>甲&#8212;乙</p></body></html>')
    book = load_bytes(tmp_path, make_epub([("c.xhtml", "")], raw_docs={"c.xhtml": raw}))
    assert all_text(book) == "甲—乙"


def test_encrypted_image_only_is_not_drm(tmp_path):
    enc = _encryption("http://www.w3.org/2001/04/xmlenc#aes256-cbc", "OEBPS/img/a.jpg")
    data = make_epub([("c.xhtml", "<p>正文。</p>")], extra=[("META-INF/encryption.xml", enc),
                                                           ("OEBPS/img/a.jpg", b"\x00enc")])
    assert all_text(load_bytes(tmp_path, data)) == "正文。"
