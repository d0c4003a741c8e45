"""The voice options end to end: bad clips refused before anything is created, a render with a clip voice
stores the prompt and resumes after kill -9 byte-identically without the recording, an anchored render's
rerun renders nothing, and the `voices` command's place among the sub-commands."""
from __future__ import annotations

import json

import manifests
from flows.cli import EXIT_USAGE, build_parser, main
from tests.engine.helpers import bad_clips, write_clip
from tests.flows.helpers import SAMPLE
from tests.flows.test_reliability_kill import TINY_BOOK, assert_no_temps, assert_not_rerendered, committed, outputs


def test_bad_clips_exit_2_with_one_line_and_create_nothing(tmp_path, capsys):
    """Unreadable, silent, shorter than 3 s, longer than 30 s, no transcript — and a transcript without a clip."""
    cases = bad_clips(tmp_path, garbage_suffix=".mp3", short_s=1.0, long_s=40.0)     # mp3: through ffmpeg
    out = tmp_path / "out"
    for clip, problem in cases.items():
        assert main([str(SAMPLE), "--model", "random-tiny", "--voice", f"clip:{clip}", "--out", str(out)]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(clip) in err and problem in err, err
        assert not out.exists()
    assert main([str(SAMPLE), "--model", "random-tiny", "--clip-text", "你好", "--out", str(out)]) == EXIT_USAGE
    assert "--clip-text" in capsys.readouterr().err and not out.exists()
    assert main(["voices", "save", "x", "--voice", f"clip:{tmp_path / 'short.wav'}"]) == EXIT_USAGE
    assert "lasts 1.0 s" in capsys.readouterr().err


def test_clip_voice_render_resumes_after_kill_9_without_the_clip(fork_server, tmp_path):
    """A render with --voice clip:PATH killed (SIGKILL) right after a segment's audio is written, then resumed
    with the recording deleted and no --voice: the manifest's stored prompt is the voice, nothing committed is
    rendered again, and every output is byte-identical to an uninterrupted clip render."""
    book = tmp_path / "tiny.txt"
    book.write_text(TINY_BOOK, encoding="utf-8")
    clip = write_clip(tmp_path / "me.wav", seconds=3.5)
    args = (str(book), "--model", "random-tiny")
    r = fork_server.run(*args, "--voice", f"clip:{clip}", "--out", str(tmp_path / "ref"))
    assert r["rc"] == 0, r["output"]
    ref = outputs(tmp_path / "ref" / "tiny")

    book_dir = tmp_path / "out" / "tiny"
    r = fork_server.run(*args, "--voice", f"clip:{clip}", "--out", str(tmp_path / "out"),
                        env={"CHATTTS_RENDER_CRASH_AT": "segment-written:2"})
    assert r["rc"] == -9 and not r["killed"], r
    rows = manifests.load(book_dir).to_pylist()
    assert any(r["status"] != "done" for r in rows)
    voice = json.loads(rows[0]["spk_emb"])                        # the prompt voice is stored with the plan
    assert voice["spk_emb"] is None and voice["origin"].startswith("clip:") and voice["spk_smp"]
    assert voice["txt_smp"] == "春眠不觉晓，处处闻啼鸟。"
    before = committed(book_dir)
    clip.unlink()
    clip.with_name("me.wav.txt").unlink()
    r = fork_server.run(*args, "--out", str(tmp_path / "out"))
    assert r["rc"] == 0, r["output"]
    assert_not_rerendered(book_dir, before)
    assert_no_temps(book_dir)
    assert outputs(book_dir) == ref
    assert {r["spk_emb"] for r in manifests.load(book_dir).to_pylist()} == {rows[0]["spk_emb"]}


def test_an_anchored_render_reruns_without_rendering(tmp_path, capsys):
    """--voice-anchor stores the anchored voice; the same command again renders nothing (anchor included),
    and the stored voice stays the book's voice without the option."""
    book = tmp_path / "tiny.txt"
    book.write_text(TINY_BOOK, encoding="utf-8")
    args = [str(book), "--model", "random-tiny", "--out", str(tmp_path / "out"), "--voice", "seed:5"]
    assert main([*args, "--voice-anchor"]) == 0
    assert "4 rendered" in capsys.readouterr().out
    stored = manifests.load(tmp_path / "out" / "tiny").to_pylist()[0]["spk_emb"]
    assert json.loads(stored)["origin"] == "anchor"
    assert main([*args, "--voice-anchor"]) == 0
    assert "0 rendered" in capsys.readouterr().out
    assert main(args[:5]) == 0                                  # no --voice: the stored (anchored) voice
    assert "0 rendered" in capsys.readouterr().out


def test_voices_is_a_command_with_actions(capsys, tmp_path, monkeypatch):
    parser = build_parser()
    assert parser.commands[:6] == ("render", "status", "inspect", "package", "voices", "catalogue")
    a = parser.parse_args(["voices", "audition", "b.epub", "--count", "3"])
    assert (a.action, a.count, a.from_seed, a.text) == ("audition", 3, 2222, None)
    a = parser.parse_args(["render", "b.epub", "--voice", "clip:x.wav", "--clip-text", "你好", "--voice-anchor"])
    assert (a.voice, a.clip_text, a.voice_anchor) == ("clip:x.wav", "你好", True)
    monkeypatch.setenv("CHATTTS_RENDER_VOICES", str(tmp_path / "saved"))
    assert main(["voices", "list"]) == 0 and "no saved voices" in capsys.readouterr().out
    assert main(["voices", "save", "narrator", "--voice", "seed:7"]) == 0
    assert main(["voices", "list"]) == 0 and capsys.readouterr().out.splitlines()[-1].split() == [
        "narrator", "seed", "seed:7"]
    assert main(["voices", "save", "narrator", "--voice", "seed:8"]) == EXIT_USAGE
    assert "exists" in capsys.readouterr().err
