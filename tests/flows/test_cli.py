"""The CLI's shell: quiet without a server, sub-commands, one-line errors with their exit codes."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.flows.helpers import SAMPLE, cli, cli_env, write_txt_book


def test_cli_without_server_is_quiet_and_never_imports_prefect(tmp_path):
    """A successful render without a server: exit 0, nothing on stderr, Prefect never imported."""
    book = write_txt_book(tmp_path / "q.txt", chapters=1, sentences=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "print('PREFECT_IMPORTED' if any(m == 'prefect' or m.startswith('prefect.') for m in sys.modules) "
            "else 'NO_PREFECT'); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, str(book), "--model", "random-tiny", "--out",
                        str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert "NO_PREFECT" in p.stdout and (tmp_path / "out" / "q" / "report.json").is_file()


def test_usage_errors_exit_2(tmp_path):
    r = cli(str(SAMPLE), "--format", "aiff", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "aiff" in r.stderr
    assert not (tmp_path / "o").exists()
    r = cli(str(SAMPLE), "--language", "fr", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--language" in r.stderr and "'fr'" in r.stderr
    r = cli(str(SAMPLE), "--int8", "--device", "cuda", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "int8" in r.stderr
    r = cli(str(SAMPLE), "--model", "random-tiny", "--voice", "x" * 80, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not (tmp_path / "o").exists(), r.stderr


def test_a_model_that_cannot_load_leaves_nothing(tmp_path, monkeypatch):
    """`--model hf` offline with an empty Hugging Face cache: exit 2, one line naming the model, and neither the
    output root nor the book folder is created."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    out = tmp_path / "out"
    r = cli(str(SAMPLE), "--model", "hf", "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "2Noise/ChatTTS" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    out.mkdir()                                                 # an existing output root stays as it was
    r = cli(str(SAMPLE), "--model", str(tmp_path / "no-such-assets"), "--out", str(out))
    assert r.returncode == 2 and "no-such-assets" in r.stderr
    assert list(out.iterdir()) == []


def test_sub_commands_and_the_default_command(tmp_path, capsys):
    """`BOOK` and `render BOOK` are the same command; each command has its own options; errors map to codes."""
    from flows.cli import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_USAGE, build_parser, exit_codes, main
    from tasks.errors import BookError, GapsError, OutputError, ToolMissing

    parser = build_parser()
    assert parser.commands == ("render", "status", "inspect", "package", "voices", "catalogue", "check", "studio",
                               "fix")
    a = parser.parse_args(["render", "b.epub", "--voice", "seed:3"])
    assert a.command == "render" and a.voice == "seed:3"
    assert main(["inspect", str(SAMPLE), "--json"]) == 0 and '"chapters"' in capsys.readouterr().out
    assert main([str(tmp_path / "none.epub"), "--model", "random-tiny"]) == EXIT_USAGE
    assert "none.epub: no such file" in capsys.readouterr().err
    assert main(["status", str(SAMPLE), "--model", "random-tiny"]) == EXIT_USAGE     # a render option
    assert main(["status", str(SAMPLE), "--out", str(tmp_path)]) == EXIT_USAGE       # nothing rendered there
    assert "no render found" in capsys.readouterr().err
    codes = exit_codes()
    assert [codes[c] for c in (BookError, ToolMissing, OutputError)] == [EXIT_USAGE, EXIT_ENVIRONMENT,
                                                                         EXIT_ENVIRONMENT]
    assert next(codes[c] for c in GapsError.__mro__ if c in codes) == EXIT_FAILED


def test_inspect_segments_of_some_chapters(capsys):
    """`inspect BOOK --segments --chapters 2 --json`: that chapter's segments as the manifest will name them, the
    text ChatTTS is given beside the book's; a chapter the book lacks is one line, exit 2."""
    import json

    from flows.cli import EXIT_USAGE, main

    assert main(["inspect", str(SAMPLE), "--segments", "--chapters", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [c["index"] for c in d["chapters"]] == [1] and len(d["segments"]) == d["totals"]["segments"] > 0
    assert {s["chapter"] for s in d["segments"]} == {1}
    assert [s["name"] for s in d["segments"]] == [f"2.{s['segment'] + 1}" for s in d["segments"]]
    assert all(s["text"] and s["source_text"] for s in d["segments"])
    assert main(["inspect", str(SAMPLE), "--segments"]) == 0
    out = capsys.readouterr().out
    assert all(f"{s['name']}  {s['text']}" in out for s in d["segments"])
    assert main(["inspect", str(SAMPLE), "--chapters", "99"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "chapter 99" in err[0]


def test_a_missing_ffmpeg_stops_the_render_before_it_starts(tmp_path):
    """mp3 needs ffmpeg: without it, exit 3 with one line naming the tool, before the model loads or anything is
    written."""
    env = dict(os.environ, FFMPEG=str(tmp_path / "no-ffmpeg"))
    r = subprocess.run([sys.executable, "-m", "flows.cli", str(SAMPLE), "--model", "random-tiny", "--format",
                        "flac,mp3", "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and "no-ffmpeg" in r.stderr and "ffmpeg" in r.stderr
    assert not (tmp_path / "out").exists()


def test_device_cuda_without_a_gpu_is_one_line_exit_3_before_the_book_is_read(tmp_path):
    """`--device cuda` where the driver shows no GPU (none here, or CUDA_VISIBLE_DEVICES="" on a GPU machine):
    exit 3, one line naming the device, before the book is read (a missing book is not even looked at), without
    importing torch (~2 s), and the output folder is not created."""
    code = ("import sys; from flows.cli import main; rc = main(sys.argv[1:]); "
            "print('TORCH' if 'torch' in sys.modules else 'NO_TORCH'); sys.exit(rc)")
    out = tmp_path / "out"
    for book in (SAMPLE, tmp_path / "no-such-book.epub"):
        p = subprocess.run([sys.executable, "-c", code, str(book), "--model", "random-tiny", "--device", "cuda",
                            "--out", str(out)], cwd=tmp_path, env=cli_env(CUDA_VISIBLE_DEVICES=""),
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 3, p.stderr
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("chattts-render: --device cuda: ") \
            and "--device cpu" in p.stderr, p.stderr
        assert "NO_TORCH" in p.stdout and not out.exists()


@pytest.mark.parametrize("args, code, words", [
    (["--max-batch", "0"], 2, "max_batch 0: must be at least 1"),
    (["--threads", "0"], 2, "threads 0: must be at least 1"),
    (["--threads", "two"], 2, "--threads: invalid int value"),
    (["--dtype", "fp16"], 2, 'dtype="fp16" needs device="cuda"'),
    (["--cuda-graphs"], 2, 'cuda_graphs=True needs device="cuda"'),
    (["--int8", "--device", "cuda"], 2, 'int8=True needs device="cpu"'),      # usage first, then the machine
    (["--int8", "--dtype", "bf16"], 2, "int8=True quantizes fp32 linears"),
    (["--cuda-graphs", "--device", "cuda"], 3, "--device cuda: no CUDA device"),
])
def test_engine_option_errors_are_one_line_with_their_exit_code(tmp_path, args, code, words):
    """Every engine setting a user can get wrong: one line, exit 2 (usage) or 3 (the machine), no traceback,
    nothing created — for render and for voices alike."""
    out = tmp_path / "out"
    for command in ([str(SAMPLE)], ["voices", str(SAMPLE)]):
        r = subprocess.run([sys.executable, "-m", "flows.cli", *command, "--model", "random-tiny", *args, "--out",
                            str(out)], cwd=ROOT, env=cli_env(CUDA_VISIBLE_DEVICES=""), capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == code and r.stderr.count("\n") == 1 and words in r.stderr, (command, r.stderr)
        assert "Traceback" not in r.stderr and not out.exists()


def test_threads_above_the_cpu_count_are_named_on_stderr(capsys):
    """--threads N is taken as asked; above the CPUs this process may use, one note says they share them."""
    from engine.api import EngineOptions
    from flows.arguments import note_threads
    from flows.params import cpu_count

    assert cpu_count() >= 1
    note_threads(EngineOptions(threads=cpu_count()))
    note_threads(EngineOptions())
    assert capsys.readouterr().err == ""
    note_threads(EngineOptions(threads=cpu_count() + 1))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--threads {cpu_count() + 1} is more than the {cpu_count()} CPUs" in err


def test_version_prints_the_package_version_and_exits_0(tmp_path, monkeypatch, capsys):
    import tomllib
    from importlib import metadata

    from flows.cli import main, package_version

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    r = subprocess.run([sys.executable, "-m", "flows.cli", "--version"], cwd=tmp_path, env=cli_env(),
                       capture_output=True, text=True, timeout=600)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"chattts-render {package_version()}\n", "")
    assert main(["--version"]) == 0 and capsys.readouterr().out == f"chattts-render {package_version()}\n"

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)     # a checkout that is not installed
    assert package_version() == declared


def test_with_a_server_a_url_book_is_fetched_once(tmp_path, monkeypatch):
    """With a Prefect server the render flow renders the book the command fetched (and checked): a book given as a
    URL is downloaded once, not once by the command and again by the flow."""
    import flows.commands as commands
    import flows.render_book as render_book
    from flows.cli import build_parser
    from flows.options import options_from_params
    from tasks.fleet import storage

    book = write_txt_book(tmp_path / "novel.txt", chapters=1, sentences=2)
    fetched, seen = [], {}

    class Stop(Exception):
        pass

    def flow(**params):                                  # what the flow does first: the params become options
        seen.update(params)
        options_from_params(**params)
        raise Stop

    monkeypatch.setattr(storage, "fetch_book", lambda url, scratch: fetched.append(url) or book)
    monkeypatch.setattr(commands, "prefect_server_configured", lambda: True)
    monkeypatch.setattr(render_book, "render_book_flow", flow)
    args = build_parser().parse_args(["render", "s3://books/novel.txt", "--model", "random-tiny", "--out",
                                      str(tmp_path / "out")])
    with pytest.raises(Stop):
        commands.cmd_render(args)
    assert fetched == ["s3://books/novel.txt"] and seen["book"] == str(book)
