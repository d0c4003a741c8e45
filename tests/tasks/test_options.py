"""RenderOptions from plain parameters: defaults, validation naming the conflict, chapters, lexicons."""
from types import SimpleNamespace

import pytest

from tasks.bookdir import book_slug
from tasks.options import lexicon_paths, options_from_params, parse_chapters
from tasks.text.normalize import normalize


def test_defaults_and_conflicts(tmp_path):
    o = options_from_params(str(tmp_path / "书 名 (1).epub"))
    assert o.engine.model == "hf" and o.package.formats == ("flac",) and o.book_dir.name == "书-名-1"
    with pytest.raises(ValueError, match="aiff"):
        options_from_params("b.epub", formats=["flac", "aiff"])
    with pytest.raises(ValueError, match="int8=True"):
        options_from_params("b.epub", device="cuda", int8=True)
    with pytest.raises(ValueError, match="seed must be an integer"):
        options_from_params("b.epub", voice="seed:x")


def test_parse_chapters():
    assert parse_chapters("1-3,7, 2") == (1, 2, 3, 7)
    for bad in ("0", "3-1", "a", "1-"):
        with pytest.raises(ValueError, match="--chapters"):
            parse_chapters(bad)


def test_slug_is_safe():
    from pathlib import Path

    assert book_slug(Path("../../etc/passwd")) == "passwd"
    assert book_slug(Path("...")) == "book"


def test_lexicons_global_then_book_then_explicit(tmp_path, monkeypatch):
    glob = tmp_path / "global.tsv"
    glob.write_text("银行\t银杭\n长大\t涨大\n", encoding="utf-8")
    book = tmp_path / "novel.txt"
    book.write_text("x", encoding="utf-8")
    (tmp_path / "novel.lexicon.tsv").write_text("长大\t掌大\n", encoding="utf-8")
    extra = tmp_path / "extra.tsv"
    extra.write_text("银行\t因杭\n", encoding="utf-8")
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(glob))
    assert lexicon_paths(book, str(extra)) == [glob, tmp_path / "novel.lexicon.tsv", extra]
    lex = options_from_params(str(book), lexicon=str(extra)).segment.lexicon
    assert normalize("他在银行长大", lexicon=lex) == "他在因杭掌大"
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(tmp_path / "none.tsv"))
    (tmp_path / "novel.lexicon.tsv").unlink()
    assert options_from_params(str(book)).segment.lexicon is None


def test_guard_options_from_params_reach_the_synthesize_stage(tmp_path, monkeypatch):
    from tasks import stages
    from tasks.synthesize.guard import GuardOptions

    book = tmp_path / "b.txt"
    book.write_text("第一章\n一句话。\n", encoding="utf-8")
    assert options_from_params(str(book)).guard == GuardOptions()
    opts = options_from_params(str(book), guard=False, guard_attempts=1)
    assert opts.guard == GuardOptions(enabled=False, max_attempts=1)
    with pytest.raises(ValueError, match="guard max_attempts"):
        options_from_params(str(book), guard_attempts=0)

    seen = {}
    monkeypatch.setattr(stages, "synthesize_book", lambda d, e, on_done=None, guard=None, shard=None, qa=None,
                        checker=None: seen.update(guard=guard, qa=qa) or {"rendered": 0})
    random_model = SimpleNamespace(loaded=SimpleNamespace(is_random=True))
    monkeypatch.setattr(stages, "get_engine", lambda o: random_model)
    stages.synthesize(tmp_path, opts)
    assert seen["guard"] is opts.guard and seen["qa"].mode == "off"      # random weights: nothing to hear
    stages.synthesize(tmp_path, options_from_params(str(book), qa="suspect", asr_model="tiny"))
    assert (seen["qa"].mode, seen["qa"].asr_model) == ("suspect", "tiny")


def test_cli_guard_flags_become_params(tmp_path):
    from flows.cli import build_parser
    from flows.commands import render_params

    parser = build_parser()
    p = render_params(parser.parse_args(["render", str(tmp_path / "b.txt"), "--no-guard", "--guard-attempts", "5"]))
    assert p["guard"] is False and p["guard_attempts"] == 5
    p = render_params(parser.parse_args(["render", str(tmp_path / "b.txt")]))
    assert p["guard"] is True and p["guard_attempts"] is None


def test_device_cuda_without_a_gpu_is_refused_before_the_book_is_fetched(monkeypatch, tmp_path):
    """A store URL book is not downloaded (nor its store reached) when the device is refused first."""
    import tasks.options
    from engine.api import DeviceUnavailable
    from tasks.fleet import storage

    monkeypatch.setattr(tasks.options, "cuda_problem", lambda: "no CUDA device is available (test)")
    monkeypatch.setattr(storage, "fetch_book", lambda *a: pytest.fail("the book was fetched"))
    with pytest.raises(DeviceUnavailable, match="^--device cuda: no CUDA device is available"):
        options_from_params("s3://books/novel.epub", device="cuda", out=str(tmp_path / "o"))
    with pytest.raises(ValueError, match="int8=True"):                 # a usage error comes first
        options_from_params("s3://books/novel.epub", device="cuda", int8=True)
    monkeypatch.setattr(tasks.options, "cuda_problem", lambda: None)   # a GPU here: the book is fetched
    with pytest.raises(pytest.fail.Exception, match="the book was fetched"):
        options_from_params("s3://books/novel.epub", device="cuda")


def test_language_option_from_the_cli_to_the_render_options(tmp_path):
    """--language reaches RenderOptions on every command that segments a book; a bad value is a usage error."""
    from flows.arguments import UsageError, options
    from flows.cli import build_parser
    from flows.commands import render_params

    parser = build_parser()
    book = tmp_path / "b.txt"
    book.write_text("第一章\n\n正文。\n", encoding="utf-8")
    assert render_params(parser.parse_args(["render", str(book)]))["language"] == "auto"
    assert render_params(parser.parse_args(["render", str(book), "--language", "en"]))["language"] == "en"
    for argv in (["inspect", str(book)], ["voices", "audition", str(book)], ["fix", str(book), "1.1", "--retake"]):
        assert parser.parse_args([*argv, "--language", "zh"]).language == "zh"
    with pytest.raises(UsageError, match="--language"):
        parser.parse_args(["render", str(book), "--language", "fr"])
    assert options(str(book), language="en").language == "en"
    assert options(str(book)).language == "auto"
    with pytest.raises(UsageError, match="--language 'fr': must be one of auto, zh, en"):
        options(str(book), language="fr")
