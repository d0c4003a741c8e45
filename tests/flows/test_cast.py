"""End to end: a cast (`--cast FILE`) on a real two-chapter dialogue book (random-tiny, CPU): voices per part,
changing one character's voice, `inspect --cast`, bad cast files, and nothing changed without a cast (against
a manifest that main wrote before the feature: tests/data/cast/main-manifest.parquet, engine version 2; an
engine version bump changes every content key, and its resume holds while the engine adopts version 2)."""
from __future__ import annotations

import json
import re
import shutil

import pyarrow.parquet as pq
import soundfile as sf

import manifests
from flows.cli import main
from tasks.audio.assemble import AssembleOptions, expected_length, trim_bounds
from tasks.text.quotes import fold
from tests.conftest import ROOT
from tests.flows.helpers import chapter_files

DATA = ROOT / "tests" / "data" / "cast"
BOOK = DATA / "dialogue.txt"
CAST = '''narrator = "seed:2222"
dialogue = "seed:3"
[characters]
"熙凤" = "seed:11"
"王夫人" = "{wang}"
"闰土" = "seed:13"
'''
SAME_AS_MAIN = ("chapter", "segment", "text", "source_text", "pause_after", "seed", "spk_emb", "voice_id",
                "samples")                      # content_key, audio_path: from the engine version (ours2 there)


def _render(out, capsys, *extra) -> tuple[list[dict], int]:
    assert main([str(BOOK), "--model", "random-tiny", "--out", str(out), *extra]) == 0
    line = capsys.readouterr().out
    return manifests.load(out / "dialogue").to_pylist(), int(re.search(r"\((\d+) rendered", line).group(1))


def _cast_file(tmp_path, wang="seed:12"):
    f = tmp_path / "cast.toml"
    f.write_text(CAST.format(wang=wang), encoding="utf-8")
    return f


def test_a_cast_voices_each_part_and_one_new_voice_rerenders_only_its_segments(tmp_path, capsys):
    out = tmp_path / "out"
    rows, rendered = _render(out, capsys, "--cast", str(_cast_file(tmp_path)))
    assert rendered == len(rows) and all(r["status"] == "done" for r in rows)
    voice = {}
    for r in rows:
        part = r["role"] if r["role"] == "narrator" else fold(r["speaker"]) or "dialogue"
        voice.setdefault(part, set()).add(r["voice_id"])
    assert set(voice) == {"narrator", "dialogue", "熙凤", "王夫人", "闰土", "母亲", "二舅母"}
    assert all(len(v) == 1 for v in voice.values())                 # one voice per part ...
    assert voice["母亲"] == voice["二舅母"] == voice["dialogue"]     # ... uncast speakers: the dialogue voice
    assert len({*voice["narrator"], *voice["dialogue"], *voice["熙凤"], *voice["王夫人"], *voice["闰土"]}) == 5

    # the chapter files: trimmed segments, pauses (at least voice_change_pause_s where the voice changes)
    opts = AssembleOptions()
    for f, ch in zip(chapter_files(out / "dialogue"), (0, 1)):
        seg = [r for r in rows if r["chapter"] == ch]
        lengths = []
        for r in seg:
            audio, sr = sf.read(out / "dialogue" / r["audio_path"], dtype="float32")
            a, b = trim_bounds(audio, sr, opts)
            lengths.append(b - a)
        assert sf.info(str(f)).frames == expected_length(lengths, [r["pause_after"] for r in seg], opts,
                                                         [r["voice_id"] for r in seg])

    # Acceptance 4: a new voice for 王夫人 re-renders 王夫人's segments and nothing else
    again, rendered = _render(out, capsys, "--cast", str(_cast_file(tmp_path, wang="seed:99")))
    wang = [r for r in again if fold(r["speaker"]) == "王夫人"]
    changed = [b for a, b in zip(rows, again) if a["content_key"] != b["content_key"]]
    assert rendered == len(wang) == len(changed) >= 1 and changed == wang


def test_without_a_cast_segments_keys_and_a_main_manifest_are_unchanged(tmp_path, capsys):
    """No --cast: the same segments and content keys as main before the cast feature, and main's manifest
    (18 columns, no role/speaker, engine version 2, which this engine adopts) resumes without rendering anything
    or re-planning — but for the segments whose text has changed since: their 著 is read 着 now (issue 33,
    tasks/text/zhe.py), so they alone get a new text, seed and key and are rendered again."""
    from tasks.plan.rows import content_key

    out = tmp_path / "out"
    rows, _ = _render(out, capsys)
    old = pq.read_table(DATA / "main-manifest.parquet").to_pylist()
    zhe = [i for i, (r, o) in enumerate(zip(rows, old)) if r["text"] != o["text"]]
    assert len(rows) == len(old) and 1 <= len(zhe) < len(rows)
    assert all(rows[i]["text"] == old[i]["text"].replace("著", "着") != old[i]["text"] for i in zhe)
    same = [i for i in range(len(rows)) if i not in zhe]
    assert [[rows[i][k] for k in SAME_AS_MAIN] for i in same] == [[old[i][k] for k in SAME_AS_MAIN] for i in same]
    from engine.api import EngineOptions
    from engine.engine import Engine

    engine = Engine.load(EngineOptions(model="random-tiny"))       # the CLI's engine (auto: this CPU's path)
    assert {r["engine_version"] for r in rows} == {engine.version}
    assert {r["engine_version"] for r in old} <= set(engine.adopts)          # main's (ours2, fp32): adopted
    assert [r["content_key"] for r in rows] == [content_key(r["text"], r["voice_id"], r["seed"],
                                                            r["engine_version"]) for r in rows]
    assert {(r["role"], r["speaker"]) for r in rows} == {("narrator", "")}

    for new, was in zip(rows, old):        # main's audio: the same lengths (forced counts), other bits
        (out / "dialogue" / was["audio_path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / "dialogue" / new["audio_path"], out / "dialogue" / was["audio_path"])
    for i in zhe:                          # main never rendered the changed texts
        (out / "dialogue" / rows[i]["audio_path"]).unlink()
    mdir = out / "dialogue" / "manifest"
    shutil.rmtree(mdir)
    mdir.mkdir()
    part = mdir / "part-00000001.parquet"
    shutil.copyfile(DATA / "main-manifest.parquet", part)
    resumed, rendered = _render(out, capsys)
    assert rendered == len(zhe)                                                 # the changed segments alone
    for k in ("content_key", "audio_path", "engine_version"):                  # main's rows adopted as they were
        assert [resumed[i][k] for i in same] == [old[i][k] for i in same], k
    assert [resumed[i]["content_key"] for i in zhe] == [rows[i]["content_key"] for i in zhe]


def test_inspect_shows_the_cast_and_the_speakers_found(tmp_path, capsys):
    cast = _cast_file(tmp_path)
    assert main(["inspect", str(BOOK), "--cast", str(cast), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["cast"]
    assert c["file"] == str(cast)
    parts = {p["part"]: p for p in c["parts"]}
    assert list(parts) == ["narrator", "dialogue", "熙凤", "王夫人", "闰土"]
    assert parts["王夫人"]["voice"] == "seed:12" and parts["王夫人"]["segments"] == 1
    assert abs(sum(p["share"] for p in c["parts"]) - 1) < 1e-3
    assert {s["name"]: (s["quotes"], s["part"]) for s in c["speakers"]} == {
        "熙鳳": (2, "熙凤"), "閏土": (2, "闰土"), "母親": (2, "dialogue"), "二舅母": (1, "dialogue"),
        "王夫人": (1, "王夫人")}
    assert len(c["quotes"]) == 9 and set(c["quotes"][0]) == {"chapter", "text", "speaker"}
    assert c["quotes"][0] == {"chapter": 0, "text": "“月錢放過了不曾？\"", "speaker": "二舅母"}
    assert {q["speaker"] for q in c["quotes"] if q["chapter"] == 0} == {"二舅母", "熙鳳", "王夫人", None}

    assert main(["inspect", str(BOOK), "--cast", str(cast)]) == 0
    text = capsys.readouterr().out
    assert f"Cast:      {cast}" in text and re.search(r"王夫人 +seed:12 +1 ", text)
    assert "the text names 5 speakers in 8 of 9 quotes" in text


def test_a_bad_cast_is_exit_2_one_line_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "fresh"
    bad = tmp_path / "bad.toml"
    bad.write_text('[characters]\n"寶玉" = "seed:-1"\n', encoding="utf-8")
    conflict = _cast_file(tmp_path)
    for args, says in [(["--cast", str(bad)], f"{bad}: characters.寶玉: voice 'seed:-1': the seed must be in"),
                       (["--cast", str(tmp_path / "none.toml")], "no such cast file"),
                       (["--cast", str(conflict), "--voice", "seed:5"], "keep one")]:
        assert main([str(BOOK), "--model", "random-tiny", "--out", str(out), *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
        assert not out.exists()
