"""The studio's render form is the render schema (flows/params.py): a field per parameter with its type, choices,
default and help; a form's values checked by the render's own validators with each error beside the field it names;
and the command line a job runs parses back to the same parameters."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from flows.arguments import render_params
from flows.cli import build_parser
from flows.commands import COMMANDS
from flows.params import PARAMS, RenderParams, flag
from flows.signature import describe
from flows.studio import PRESET, STUDIO_SETS, argv, form_fields, validate
from tests.flows.helpers import SAMPLE


def test_a_field_for_every_render_parameter_but_the_studios_own():
    fields = form_fields()
    assert [f["name"] for f in fields] == [f.name for f in PARAMS if f.name not in STUDIO_SETS]
    by = {f["name"]: f for f in fields}
    assert by["device"]["kind"] == "choice" and "cuda" in by["device"]["choices"]
    assert (by["max_batch"]["kind"], by["max_batch"]["optional"]) == ("int", True)
    assert by["tempo"]["kind"] == "float" and by["t2s"]["kind"] == "bool" and by["formats"]["kind"] == "list"
    assert by["loudness"]["kind"] == "text"                   # LUFS or a preset's name: the validator reads it
    assert by["schedule"]["choices"] == ["length", "chapters"] and PRESET["schedule"] == "chapters"
    for f in PARAMS:
        if f.name in by:
            assert (by[f.name]["flag"], by[f.name]["help"]) == (flag(f), describe(f) or "")


def test_a_forms_values_are_checked_by_the_renders_validators_and_errors_sit_by_their_field(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    ok, errors = validate(root, SAMPLE, {"model": "random-tiny", "max_batch": "2", "t2s": False, "formats": "flac,m4b"})
    assert errors == {} and (ok["max_batch"], ok["t2s"], ok["formats"]) == (2, False, ("flac", "m4b"))
    for values, name, says in [({"max_batch": "0"}, "max_batch", "max_batch 0: must be at least 1"),
                               ({"max_batch": "two"}, "max_batch", "not a whole number"),
                               ({"device": "tpu"}, "device", "must be one of"),
                               ({"formats": "flac,aiff"}, "formats", "aiff"),
                               ({"int8": True, "device": "cuda"}, "int8", "int8=True"),
                               ({"clip_text": "hello"}, "clip_text", "--clip-text"),
                               ({"voice": "seed:x"}, "voice", "the seed must be an integer"),
                               ({"chapters": "3-1"}, "chapters", "--chapters"),
                               ({"lexicon": "words.tsv"}, "lexicon", "not a file under the studio's root")]:
        got, errors = validate(root, SAMPLE, {"model": "random-tiny", **values})
        assert got == {} and set(errors) == {name} and says in errors[name], (values, errors)
    (root / "words.tsv").write_text("银行\tyin2 hang2\n", encoding="utf-8")
    got, errors = validate(root, SAMPLE, {"lexicon": "words.tsv"})
    assert errors == {} and got["lexicon"] == str(root / "words.tsv")


def test_a_jobs_command_line_parses_back_to_the_same_parameters(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    values = {"model": "random-tiny", "max_batch": "3", "t2s": False, "guard": False, "formats": "flac,m4b",
              "schedule": "chapters", "loudness": "-16", "voice": "seed:7", "voice_anchor": True}
    params, errors = validate(root, SAMPLE, values)
    assert errors == {}
    args = build_parser().parse_args(["render", str(SAMPLE), "--out", str(root), *argv(params)])
    assert render_params(args) == asdict(RenderParams(book=str(SAMPLE), out=str(root), **params))
    assert argv(params, "engine") == ["--model", "random-tiny", "--max-batch", "3"]
    assert argv({}) == [] and "--no-t2s" in argv(params) and "--voice-anchor" in argv(params)


@pytest.mark.parametrize("host, token", [("127.0.0.1", False), ("localhost", False), ("0.0.0.0", True),
                                         ("192.0.2.7", True)])
def test_only_loopback_goes_without_a_token(monkeypatch, tmp_path, capsys, host, token):
    """cmd_studio's choice, the server itself stubbed: the URL it prints, with a token for any other host."""
    import uvicorn

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(kw, app=app))
    monkeypatch.setattr("flows.studio._check_port", lambda host, port: None)      # (192.0.2.7 is not here)
    args = build_parser().parse_args(["studio", "--root", str(tmp_path / "r"), "--host", host, "--port", "9"])
    assert COMMANDS[args.run](args) == 0
    out = capsys.readouterr().out
    assert served["host"] == host and served["port"] == 9
    assert ("?token=" in out) == token and (served["app"].token is not None) == token
    if token:
        assert served["app"].token in out
