"""A render's parameters (flows/params.py): the command line, the Prefect flows, the deployments and RenderOptions
all take them from the one schema; what they become (flows/options.py): defaults, validation naming the conflict."""
from __future__ import annotations

import argparse
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import yaml

from flows.options import options_from_params, render_options
from flows.params import BY_NAME, PARAMS, RenderParams, choices, flag, help_of
from flows.signature import describe
from tests.conftest import ROOT

OWN = {"render-book": {"catalogue", "base_url", "shards", "shard", "shard_token"},       # the flows' own parameters
       "nightly-catalogue": {"catalogue", "deployment", "wait", "base_url", "segments_per_shard", "max_shards"}}


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def test_the_render_command_takes_every_parameter_with_the_schemas_default_choices_and_help(tmp_path):
    from flows.arguments import render_params
    from flows.cli import build_parser

    parser = build_parser()
    book = str(tmp_path / "b.txt")
    assert render_params(parser.parse_args(["render", book])) == asdict(RenderParams(book=book))
    render = {a.option_strings[0]: a for a in _subparser(parser, "render")._actions if a.option_strings}
    old = {f.metadata.get("old") for f in PARAMS} - {None}        # renamed flags' old spellings (hidden)
    assert set(render) - {"-h"} == {flag(f) for f in PARAMS[1:]} | old
    for f in PARAMS[1:]:
        action = render[flag(f)]
        assert (action.help, tuple(action.choices or ())) == (help_of(f), f.metadata["cli"].get("choices", choices(f)))
    given = render_params(parser.parse_args(["render", book, "--no-t2s", "--format", "flac,m4b", "--device", "cuda",
                                             "--guard-attempts", "5", "--no-guard", "--max-batch", "4"]))
    assert {k: v for k, v in given.items() if v != BY_NAME[k].default} == {"book": book,
        "t2s": False, "formats": ("flac", "m4b"), "device": "cuda", "guard_attempts": 5, "guard": False, "max_batch": 4}


def test_a_renamed_flag_still_works_under_its_old_name_with_a_note(tmp_path, capsys):
    """--compile (CUDA graphs) became --cuda-graphs: the old spelling sets the same parameter and says the new name;
    neither is given: False, and nothing is said."""
    from flows.arguments import render_params
    from flows.cli import build_parser

    parser, book = build_parser(), str(tmp_path / "b.txt")
    assert render_params(parser.parse_args(["render", book]))["cuda_graphs"] is False
    assert capsys.readouterr().err == ""
    for argv in (["--cuda-graphs"], ["--compile"]):
        assert render_params(parser.parse_args(["render", book, *argv]))["cuda_graphs"] is True
    err = capsys.readouterr().err
    assert err == "chattts-render: note: --compile is now --cuda-graphs (the old name still works)\n", err
    assert "--compile" not in _subparser(parser, "render").format_help()


@pytest.mark.parametrize("name", ["render_book_flow", "nightly_catalogue_flow"])
def test_the_flows_parameters_as_prefect_sees_them_are_the_schemas(name):
    """Prefect's parameter schema of each flow (what a deployment validates against and the UI shows): every render
    parameter (the nightly's: but the book) with the schema's type, default, choices and help, and the flow's own."""
    import flows.nightly
    import flows.render_book

    fl = getattr(flows.nightly if name.startswith("nightly") else flows.render_book, name)
    props, own = fl.parameters.properties, OWN[fl.name]
    render = [f for f in PARAMS if f.name not in own and (fl.name == "render-book" or f.name != "book")]
    assert set(props) == {f.name for f in render} | own
    assert fl.parameters.required == (["book"] if fl.name == "render-book" else [])
    for f in render:
        p = props[f.name]
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        enum = next((a["enum"] for a in p.get("anyOf", [p]) if "enum" in a), [])
        assert (p.get("default", "required"), enum, p.get("description")) == (
            "required" if f.name == "book" else default, list(choices(f)), describe(f)), f.name
    typed = fl.validate_parameters({"book": "b.txt", "formats": ["m4b"], "max_batch": "4"} if "book" in props
                                   else {"formats": ["m4b"], "max_batch": "4"})
    assert (typed["formats"], typed["max_batch"]) == (("m4b",), 4)
    with pytest.raises(Exception, match="device"):
        fl.validate_parameters({"book": "b.txt", "device": "gpu"} if "book" in props else {"device": "gpu"})


def test_prefect_yaml_sets_only_what_differs_from_the_flows_defaults():
    """The deployments' parameters are their flows' (typed as the flow types them) and each one changes a default:
    the defaults themselves are the schema's, never written twice."""
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    for d in spec["deployments"]:                    # a file's flow (path:name) or a module's (module.name)
        fl = load_flow_from_entrypoint(str(ROOT / d["entrypoint"]) if ":" in d["entrypoint"] else d["entrypoint"])
        assert fl.name in OWN, d["name"]
        props, params = fl.parameters.properties, d.get("parameters") or {}
        assert params and set(params) <= set(props), d["name"]
        assert [k for k, v in params.items() if props[k].get("default") == v] == [], d["name"]
        fl.validate_parameters({**params, **({"book": "b.txt"} if "book" in props else {})})


def test_render_options_read_every_parameter(tmp_path):
    """RenderOptions is made from all of them: a parameter the conversion never reads would be a dead option."""
    read: set[str] = set()

    class Recorded(RenderParams):
        def __getattribute__(self, name):
            if name in BY_NAME:
                read.add(name)
            return super().__getattribute__(name)

    p = Recorded(book=str(tmp_path / "b.txt"), voice="seed:5")
    read.clear()                                     # the validator's reads do not count
    render_options(p)
    assert read == set(BY_NAME)


def test_defaults_and_conflicts(tmp_path):
    o = options_from_params(str(tmp_path / "书 名 (1).epub"))
    assert o.engine.model == "hf" and o.package.formats == ("flac",) and o.book_dir.name == "书-名-1"
    with pytest.raises(ValueError, match="aiff"):
        options_from_params("b.epub", formats=["flac", "aiff"])
    with pytest.raises(ValueError, match="int8=True"):
        options_from_params("b.epub", device="cuda", int8=True)
    with pytest.raises(ValueError, match="seed must be an integer"):
        options_from_params("b.epub", voice="seed:x")
    with pytest.raises(ValueError, match=r"^--device 'gpu': must be one of cpu, cuda, auto$"):
        RenderParams(book="b.epub", device="gpu")
    with pytest.raises(ValueError, match="--clip-text is the transcript"):
        RenderParams(book="b.epub", clip_text="你好")
    assert RenderParams(book="b.epub").qa == "auto"                              # resolved by tasks.stages
    with pytest.raises(ValueError, match=r"^--qa None: must be one of off, suspect, full, auto$"):
        RenderParams(book="b.epub", qa=None)


def test_the_lexicons_reach_the_segment_options(tmp_path, monkeypatch):
    from tasks.text.normalize import normalize

    glob = tmp_path / "global.tsv"
    glob.write_text("银行\t银杭\n长大\t涨大\n", encoding="utf-8")
    book = tmp_path / "novel.txt"
    book.write_text("x", encoding="utf-8")
    (tmp_path / "novel.lexicon.tsv").write_text("长大\t掌大\n", encoding="utf-8")
    extra = tmp_path / "extra.tsv"
    extra.write_text("银行\t因杭\n", encoding="utf-8")
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(glob))
    norm = options_from_params(str(book), lexicon=str(extra)).segment.normalize
    assert normalize("他在银行长大", norm) == "他在因杭掌大"
    monkeypatch.setenv("CHATTTS_RENDER_LEXICON", str(tmp_path / "none.tsv"))
    (tmp_path / "novel.lexicon.tsv").unlink()
    assert options_from_params(str(book)).segment.normalize.lexicon is None


def test_guard_options_from_params_reach_the_synthesize_stage(tmp_path, monkeypatch):
    from tasks import stages
    from tasks.synthesize.options import GuardOptions

    book = tmp_path / "b.txt"
    book.write_text("第一章\n一句话。\n", encoding="utf-8")
    assert options_from_params(str(book)).guard == GuardOptions()
    opts = options_from_params(str(book), guard=False, guard_attempts=1)
    assert opts.guard == GuardOptions(enabled=False, max_attempts=1)
    with pytest.raises(ValueError, match="guard max_attempts"):
        options_from_params(str(book), guard_attempts=0)

    seen = {}
    monkeypatch.setattr(stages, "synthesize_book", lambda d, e, on_done=None, guard=None, shard=None, qa=None,
                        checker=None, schedule="length": seen.update(guard=guard, qa=qa, schedule=schedule)
                        or {"rendered": 0})
    random_model = SimpleNamespace(is_random=True)
    monkeypatch.setattr(stages, "get_engine", lambda o: random_model)
    stages.synthesize(tmp_path, opts)
    assert seen["guard"] is opts.guard and seen["qa"].mode == "off"      # random weights: nothing to hear
    stages.synthesize(tmp_path, options_from_params(str(book), qa="suspect", asr_model="tiny", schedule="chapters"))
    assert (seen["qa"].mode, seen["qa"].asr_model, seen["schedule"]) == ("suspect", "tiny", "chapters")


def test_qa_auto_picks_by_cost_and_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """auto (the default) with real weights: full where Whisper's estimated share fits, suspect where it does not,
    off without the qa extra, each said in one line on stderr before anything renders; random weights: off,
    silently."""
    from tasks import stages
    from tasks.qa import options as qa_opts

    book = tmp_path / "b.txt"
    book.write_text("第一章\n一句话。\n", encoding="utf-8")
    seen, installed = {}, {"yes": True}
    monkeypatch.setattr(stages, "synthesize_book", lambda d, e, on_done=None, guard=None, shard=None, qa=None,
                        checker=None, schedule="length": seen.update(qa=qa) or {"rendered": 0})
    monkeypatch.setattr(stages, "checker_for", lambda qa: SimpleNamespace(available=lambda: installed["yes"]))
    monkeypatch.setattr(qa_opts, "BASE_SHARE", {"cpu": 0.2, "cuda": 0.05})
    real = SimpleNamespace(is_random=False)
    monkeypatch.setattr(stages, "get_engine", lambda o: real)
    said = []
    for asr_model, installed["yes"] in ((None, True), ("small", True), (None, False)):
        stages.synthesize(tmp_path, options_from_params(str(book), asr_model=asr_model))
        said.append((seen["qa"].mode, capsys.readouterr().err))
    assert said[0][0] == "full" and said[0][1] == ("qa auto: full (Whisper base on cpu adds about 0.20 of a "
                                                   "render's time with every take heard, within 0.30)\n")
    assert said[1][0] == "suspect" and "Whisper small on cpu adds about 0.66" in said[1][1]
    assert "over 0.30: only odd takes are transcribed" in said[1][1]
    assert said[2][0] == "off" and said[2][1].startswith("qa auto: off (the qa extra or Whisper base is not installed")
    assert all(err.count("\n") == 1 for _, err in said)
    stages.synthesize(tmp_path, options_from_params(str(book), qa="full"))      # asked for: no line
    assert seen["qa"].mode == "full" and capsys.readouterr().err == ""
    monkeypatch.setattr(stages, "get_engine", lambda o: SimpleNamespace(is_random=True))
    stages.synthesize(tmp_path, options_from_params(str(book)))
    assert seen["qa"].mode == "off" and capsys.readouterr().err == ""


def test_device_cuda_without_a_gpu_is_refused_before_the_book_is_fetched(monkeypatch, tmp_path):
    """A store URL book is not downloaded (nor its store reached) when the device is refused first."""
    import flows.options
    from engine.api import DeviceUnavailable
    from tasks.fleet import storage

    monkeypatch.setattr(flows.options, "cuda_problem", lambda: "no CUDA device is available (test)")
    monkeypatch.setattr(storage, "fetch_book", lambda *a: pytest.fail("the book was fetched"))
    with pytest.raises(DeviceUnavailable, match=r"^--device cuda: no CUDA device is available"):
        options_from_params("s3://books/novel.epub", device="cuda", out=str(tmp_path / "o"))
    with pytest.raises(ValueError, match="int8=True"):                 # a usage error comes first
        options_from_params("s3://books/novel.epub", device="cuda", int8=True)
    monkeypatch.setattr(flows.options, "cuda_problem", lambda: None)   # a GPU here: the book is fetched
    with pytest.raises(pytest.fail.Exception, match="the book was fetched"):
        options_from_params("s3://books/novel.epub", device="cuda")


def test_language_option_from_the_cli_to_the_render_options(tmp_path):
    """--language reaches RenderOptions on every command that segments a book; a bad value is a usage error."""
    from flows.arguments import UsageError, render_params
    from flows.cli import build_parser
    from flows.options import options

    parser = build_parser()
    book = tmp_path / "b.txt"
    book.write_text("第一章\n\n正文。\n", encoding="utf-8")
    assert render_params(parser.parse_args(["render", str(book)]))["language"] == "auto"
    assert render_params(parser.parse_args(["render", str(book), "--language", "en"]))["language"] == "en"
    for argv in (["inspect", str(book)], ["voices", "audition", str(book)], ["fix", str(book), "1.1", "--retake"]):
        assert parser.parse_args([*argv, "--language", "zh"]).language == "zh"
    with pytest.raises(UsageError, match="--language"):
        parser.parse_args(["render", str(book), "--language", "fr"])
    assert options(book=str(book), language="en").language == "en"
    assert options(book=str(book)).language == "auto"
    with pytest.raises(UsageError, match="--language 'fr': must be one of auto, zh, en"):
        options(book=str(book), language="fr")


def test_parameters_are_checked_by_name_without_a_book():
    """flows.params.check: RenderParams' validator over parameters by name (the nightly flow's, checked once for all
    its books: no folder stands in for a book)."""
    from flows.params import check

    check({"out": "o", "device": "cuda", "qa": "full"})
    with pytest.raises(ValueError, match="--device 'gpu': must be one of"):
        check({"device": "gpu"})
    with pytest.raises(ValueError, match="--clip-text"):
        check({"clip_text": "你好"})
    with pytest.raises(ValueError, match="--clip-text"):
        RenderParams(book="b.txt", clip_text="你好")
