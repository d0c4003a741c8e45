"""Audition (tasks/site/audition.py): `chattts-render voices BOOK` writes one file per candidate, voices.json and an
offline page that works in a real browser; renders are cached like segments; saved and stored voices join."""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from flows.cli import EXIT_USAGE, main
from tests.engine.helpers import write_clip
from tests.flows.helpers import SAMPLE

COUNT = 6


@pytest.fixture(scope="module")
def auditioned(tmp_path_factory):
    """`chattts-render voices examples/daodejing.epub --model random-tiny --count 6` (no saved voices):
    (book dir, stdout of the first run, stdout of a second run, mtimes of voices/ after the first run)."""
    import io
    from contextlib import redirect_stdout

    d = tmp_path_factory.mktemp("audition")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHATTTS_RENDER_VOICES", str(d / "saved"))
        runs = []
        for _ in range(2):
            buf = io.StringIO()
            with redirect_stdout(buf):
                assert main(["voices", str(SAMPLE), "--model", "random-tiny", "--count", str(COUNT),
                             "--out", str(d / "out")]) == 0
            runs.append(buf.getvalue())
            if len(runs) == 1:
                voices = d / "out" / "daodejing" / "voices"
                mtimes = {p.name: p.stat().st_mtime_ns for p in voices.iterdir()}
    return d / "out" / "daodejing", runs[0], runs[1], mtimes


def test_six_candidates_voices_json_and_page(auditioned):
    import soundfile as sf

    book_dir, first, _, _ = auditioned
    voices = book_dir / "voices"
    info = json.loads((voices / "voices.json").read_text(encoding="utf-8"))
    cands = info["candidates"]
    assert [c["name"] for c in cands] == [f"seed:{2222 + i}" for i in range(COUNT)]
    assert sorted(p.name for p in voices.glob("*.flac")) == sorted(c["file"] for c in cands)
    assert len({c["fingerprint"] for c in cands}) == COUNT
    for c in cands:
        frames = sf.info(str(voices / c["file"])).frames
        assert c["samples"] == frames and c["duration_s"] == frames / 24_000 and frames > 0
        assert c["option"] == f"--voice {c['spec']}" and c["seed"] == int(c["spec"][5:]) and c["guard"] == ""
    page = (voices / "index.html").read_text(encoding="utf-8")
    assert page.count("<audio ") == COUNT and "http" not in page              # offline: nothing from a network
    assert info["text"].startswith("前言。道德经") and info["text"] in page
    assert f"{COUNT} voices ({COUNT} rendered, 0 from the cache)" in first


def test_a_second_audition_renders_nothing(auditioned):
    book_dir, _, second, mtimes = auditioned
    assert f"{COUNT} voices (0 rendered, {COUNT} from the cache)" in second
    assert {p.name: p.stat().st_mtime_ns for p in (book_dir / "voices").iterdir()} == mtimes


def test_an_audition_by_an_adopted_engine_version_is_reused(tmp_path, monkeypatch, capsys):
    import engine.engine as E

    monkeypatch.setenv("CHATTTS_RENDER_VOICES", str(tmp_path / "saved"))
    args = ["voices", str(SAMPLE), "--model", "random-tiny", "--count", "2", "--out", str(tmp_path / "out")]
    with monkeypatch.context() as m:
        m.setattr(E, "ENGINE_VERSION", E.ADOPTED_VERSIONS[0])
        assert main(args) == 0
    assert "2 voices (2 rendered, 0 from the cache)" in capsys.readouterr().out
    assert main(args) == 0
    assert "2 voices (0 rendered, 2 from the cache)" in capsys.readouterr().out


def test_audition_page_in_a_real_browser(auditioned, browser, tmp_path):
    """No console errors; one player per candidate, each as long as its file; copy puts the candidate's exact
    --voice option into the page's clipboard field.  Leaves a screenshot (path printed)."""
    from tests.browser import console_errors

    book_dir = auditioned[0]
    info = json.loads((book_dir / "voices" / "voices.json").read_text(encoding="utf-8"))
    browser.get((book_dir / "voices" / "index.html").as_uri())
    durations = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const players = Array.from(document.querySelectorAll("audio"));
        Promise.all(players.map(a => a.readyState >= 1 ? null : new Promise((ok, bad) => {
            a.addEventListener("loadedmetadata", ok, {once: true});
            a.addEventListener("error", () => bad(a.getAttribute("src")), {once: true});
        }))).then(() => done(players.map(a => [a.getAttribute("src"), a.duration])),
                  src => done([["failed to load", src]]));""")
    assert len(durations) == COUNT
    for (src, seconds), c in zip(durations, info["candidates"]):
        assert src == c["file"] and seconds == pytest.approx(c["duration_s"], abs=1e-3), (src, seconds)
    buttons = browser.find_elements("css selector", "button.copy")
    assert len(buttons) == COUNT
    for i in (3, 0):
        buttons[i].click()
        assert browser.find_element("id", "clipboard").get_attribute("value") == info["candidates"][i]["option"]
        assert [b.text for b in buttons] == ["copied" if j == i else "copy" for j in range(COUNT)]   # only the last
    assert console_errors(browser) == []
    shot = Path(os.environ.get("CHATTTS_RENDER_SCREENSHOTS", tmp_path)) / "audition-page.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")


def test_saved_and_stored_voices_join_once(tmp_path, monkeypatch, capsys):
    """The book's stored voice and every saved voice are candidates; a voice that is another candidate's (the
    saved `narrator` is seed:2222) is listed once, under its first name; a saved voice that cannot be used is
    skipped with a note."""
    import manifests
    from engine.loader import load_chattts
    from engine.voice import parse_voice_spec, sample_voice
    from tasks.voice.voices import save_voice

    monkeypatch.setenv("CHATTTS_RENDER_VOICES", str(tmp_path / "saved"))
    stored = sample_voice(load_chattts("random-tiny"), 77)
    manifests.commit(tmp_path / "out" / "daodejing", [{"plan_id": "p", "chapter": 0, "segment": 0, "text": "前言。",
                                                       "status": "pending", "spk_emb": stored}])
    save_voice("narrator", parse_voice_spec("seed:2222"))
    save_voice("calm", parse_voice_spec("seed:9"))
    save_voice("gone", parse_voice_spec(f"clip:{write_clip(tmp_path / 'c.wav')}"))
    (tmp_path / "saved" / "gone.clip.wav").unlink()
    assert main(["voices", str(SAMPLE), "--model", "random-tiny", "--count", "2", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"saved voice gone skipped: .*gone\.clip\.wav: no such recording", out), out
    info = json.loads((tmp_path / "out" / "daodejing" / "voices" / "voices.json").read_text(encoding="utf-8"))
    assert [(c["name"], c["spec"], c["seed"]) for c in info["candidates"]] == [
        ("book", stored, None), ("calm", "calm", 9), ("narrator", "narrator", 2222), ("seed:2223", "seed:2223", 2223)]
    assert info["candidates"][0]["option"] == f"--voice {shlex.quote(stored)}"          # a shell word
    files = sorted(p.name for p in (tmp_path / "out" / "daodejing" / "voices").glob("*.flac"))
    assert files == ["01-book.flac", "02-calm.flac", "03-narrator.flac", "04-seed-2223.flac"]


def test_the_passage(tmp_path):
    from engine.units import estimate_seconds
    from tasks.errors import BookError
    from tasks.ingest import load_book
    from tasks.synthesize.audition import AUDITION_SECONDS, MAX_PASSAGE_SECONDS, passage
    from tasks.text.segment import SegmentOptions

    book = load_book(SAMPLE)
    text = passage(book, SegmentOptions())
    assert AUDITION_SECONDS <= estimate_seconds(text) <= MAX_PASSAGE_SECONDS
    assert text.startswith("前言。") and "老子" in text
    assert passage(book, SegmentOptions(), "2023年，他說：「好！」") == "二零二三年，他说，好。"
    with pytest.raises(BookError, match="nothing to speak"):
        passage(book, SegmentOptions(), "……！")


def test_bad_audition_input_creates_nothing(tmp_path, capsys):
    from tasks.synthesize.options import AuditionOptions

    out = tmp_path / "out"
    for args in ([str(tmp_path / "none.epub")], [str(SAMPLE), "--count", "101"], [str(SAMPLE), "--from-seed", "-1"],
                 [str(SAMPLE), "--text", " "]):
        assert main(["voices", *args, "--model", "random-tiny", "--out", str(out)]) == EXIT_USAGE, args
        assert capsys.readouterr().err.count("\n") == 1 and not out.exists()
    assert main(["voices", "audition", str(SAMPLE), "--model", "random-tiny", "--text", "……", "--out",
                 str(out)]) == EXIT_USAGE
    assert "nothing to speak" in capsys.readouterr().err and not out.exists()
    long = "天地玄黄，宇宙洪荒。" * 30                      # past a segment's length: the engine would refuse it
    assert main(["voices", str(SAMPLE), "--model", "random-tiny", "--text", long, "--out", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the audition passage (--text) reads" in err and not out.exists(), err
    with pytest.raises(ValueError, match="count"):
        AuditionOptions(count=-1)
    with pytest.raises(ValueError, match="from-seed"):
        AuditionOptions(from_seed=2**63 - 3, count=6)

