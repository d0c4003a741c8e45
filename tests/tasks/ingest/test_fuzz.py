"""Fuzzing load_book with mutated real books: flipped/truncated/inserted bytes, rewritten ZIP entries.

Property: load_book returns a Book (every chapter has non-empty paragraphs) or raises a one-line BookError
that is a *diagnosed* problem, never another exception and never an unexpected parser failure converted at
the boundary ("unreadable book (...)"), which would hide a bug.

CI runs a short deterministic pass.  Long run:
    FUZZ_EXAMPLES=10000 python -m pytest tests/tasks/ingest/test_fuzz.py -q
"""
from __future__ import annotations

import io
import os
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tasks.book import Book
from tasks.errors import BookError
from tasks.ingest import load_book
from tests.conftest import CORPUS, corpus_missing

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
LONG_RUN = "FUZZ_EXAMPLES" in os.environ
TXT_SLICE_BYTES = 24_000  # bytes of each TXT seed (small: every example ingests the whole file)

EPUB_SEEDS = ["epubcheck/packed/minimal.epub", "epubcheck/built/epub2-minimal.epub",
              "idpf-epub3-samples/hefty-water.epub", "idpf-epub3-samples/wasteland.epub",
              "gutenberg/pg25288-shanhaijing-zh.epub", "w3c-epub-tests/nav-spine_in-spine-hidden-toc-html.epub",
              "misc/abogen_debug_tts_samples.epub", "epubcheck/built/nav-toc-unordered-spine-warning.epub"]
TXT_SEEDS = ["gutenberg-zh/24264-0.txt", "gutenberg-zh/23865-0.txt", "encodings-transcoded/23865-0.gbk.txt",
             "gutenberg-zh/27166-0.txt"]


def _seeds() -> list[tuple[str, bytes]]:
    out = []
    for rel in EPUB_SEEDS:
        p = CORPUS / "epub" / rel
        if p.exists():
            out.append(("epub:" + rel, p.read_bytes()))
    for rel in TXT_SEEDS:
        p = CORPUS / "txt" / rel
        if p.exists():
            out.append(("txt:" + rel, p.read_bytes()[:TXT_SLICE_BYTES]))
    return out


SEEDS = _seeds()


@pytest.fixture(autouse=True)
def _need_seeds():
    if len(SEEDS) < len(EPUB_SEEDS) + len(TXT_SEEDS):
        corpus_missing(f"fuzz seeds under {CORPUS} ({len(SEEDS)} of {len(EPUB_SEEDS) + len(TXT_SEEDS)} found)")


# ------------------------------------------------------------------------------------------- mutations
def _flip(data: bytes, edits: list[tuple[float, int]]) -> bytes:
    b = bytearray(data)
    for frac, x in edits:
        if b:
            b[min(len(b) - 1, int(frac * len(b)))] ^= x or 1
    return bytes(b)


def _truncate(data: bytes, frac: float) -> bytes:
    return data[: int(frac * len(data))]


def _insert(data: bytes, frac: float, junk: bytes) -> bytes:
    i = int(frac * len(data))
    return data[:i] + junk + data[i:]


def _rewrite_entry(data: bytes, which: float, op: str, frac: float, junk: bytes) -> bytes:
    """Re-zip the archive with one entry's *decompressed* content mutated (so the XML, not the ZIP, breaks)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
        entries = [(i.filename, zf.read(i)) for i in infos]
    except Exception:  # noqa: BLE001 — the seed itself is not a readable ZIP: mutate the raw bytes instead
        return _insert(data, frac, junk)
    if not entries:
        return data
    k = min(len(entries) - 1, int(which * len(entries)))
    name, body = entries[k]
    if op == "truncate":
        body = _truncate(body, frac)
    elif op == "insert":
        body = _insert(body, frac, junk)
    elif op == "duplicate":
        entries.append((name, junk))
    elif op == "drop":
        entries.pop(k)
        body = None
    elif op == "rename":
        name = ("../" if junk[:1] < b"\x80" else "/") + name
    if body is not None and op != "duplicate":
        entries[k] = (name, body)
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
            for n, b in entries:
                w.writestr(n, b)
    return out.getvalue()


JUNK = st.one_of(st.binary(min_size=1, max_size=64),
                 st.sampled_from([b"<", b"&", b"]]>", b"<!ENTITY a 'b'>", b"<p>", b"</html>", b"\x00\x00",
                                  b"\xef\xbb\xbf", b"\xff\xfe", "第一回　".encode(), b"&nbsp;", b"<br>",
                                  b"<!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>", b"\n\n\n",
                                  "\u3000\u3000".encode()]))
FRAC = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)

MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(FRAC, st.integers(0, 255)), min_size=1, max_size=8)),
    st.tuples(st.just("truncate"), FRAC),
    st.tuples(st.just("insert"), FRAC, JUNK),
    st.tuples(st.just("entry"), FRAC, st.sampled_from(["truncate", "insert", "duplicate", "drop", "rename"]),
              FRAC, JUNK),
)


def _mutate(data: bytes, mutations) -> bytes:
    for m in mutations:
        if m[0] == "flip":
            data = _flip(data, m[1])
        elif m[0] == "truncate":
            data = _truncate(data, m[1])
        elif m[0] == "insert":
            data = _insert(data, m[1], m[2])
        else:
            data = _rewrite_entry(data, m[1], m[2], m[3], m[4])
    return data


def check_property(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        book = load_book(path)
    except BookError as e:
        assert "\n" not in str(e), str(e)
        assert not e.problem.startswith("unreadable book ("), f"undiagnosed failure: {e.problem}"
        return
    assert isinstance(book, Book) and book.chapters
    for i, ch in enumerate(book.chapters):
        assert ch.index == i and ch.paragraphs and all(p and p == p.strip() for p in ch.paragraphs)


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "book.bin"


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=not LONG_RUN, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(range(max(1, len(SEEDS)))), mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_books_give_book_or_book_error(fuzz_file, seed, mutations):
    _name, data = SEEDS[seed]
    check_property(fuzz_file, _mutate(data, mutations))


@pytest.mark.parametrize("name,data", SEEDS, ids=[n for n, _ in SEEDS])
def test_unmutated_seeds_ingest(tmp_path, name, data):
    book = load_book(_write(tmp_path, data))
    assert book.chapters


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "seed.bin"
    p.write_bytes(data)
    return p


# ------------------------------------------------------------------------------------------- regressions
def test_regression_nul_before_package_xml(tmp_path):
    """Fuzz find (10k run): a NUL byte before the XML of the last entry made lxml's recovering parser raise
    'Document is empty' -> undiagnosed failure."""
    seed = dict(SEEDS)["epub:epubcheck/packed/minimal.epub"]
    check_property(tmp_path / "b.epub", _mutate(seed, [("entry", 1.0, "insert", 0.0, b"\x00")]))


@pytest.mark.parametrize("entry", ["OEBPS/content.opf", "OEBPS/toc.ncx", "OEBPS/nav.xhtml",
                                   "META-INF/container.xml"])
def test_regression_garbage_package_files(tmp_path, entry):
    from tests.tasks.ingest.epub.helpers import make_epub, zip_bytes

    src = zipfile.ZipFile(io.BytesIO(make_epub([("c.xhtml", "<p>文。</p>")], ncx=True)))
    entries = [(i.filename, b"\x00\x01garbage" if i.filename == entry else src.read(i))
               for i in src.infolist() if i.filename != "mimetype"]
    check_property(tmp_path / "b.epub", zip_bytes(entries))
