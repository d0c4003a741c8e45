"""tasks/voice/cast.py: the cast file, who voices a segment, the cast report of `inspect --cast`."""
from __future__ import annotations

import pytest

from tasks.errors import BookError
from tasks.voice.cast import Cast, CastVoices, cast_report, load_cast

GOOD = '''narrator = "seed:2222"
dialogue = "seed:3"
[characters]
"宝玉" = "seed:11"
"黛玉" = "seed:12"
'''


def _cast(tmp_path, text: str = GOOD):
    f = tmp_path / "cast.toml"
    f.write_text(text, encoding="utf-8")
    return f


def test_a_cast_file_loads_and_names_match_in_either_script(tmp_path):
    cast = load_cast(_cast(tmp_path))
    assert cast.narrator.seed == 2222 and cast.dialogue.seed == 3
    assert [(n, s.seed) for n, s in cast.characters] == [("宝玉", 11), ("黛玉", 12)]
    assert cast.character("寶玉") == "宝玉" and cast.character("宝玉") == "宝玉" and cast.character("賈母") is None
    assert cast.part("dialogue", "寶玉") == "宝玉"
    assert cast.part("dialogue", "賈母") == cast.part("dialogue", "") == "dialogue"
    assert cast.part("narrator", "寶玉") == "narrator"          # narration is the narrator's, whoever it names


@pytest.mark.parametrize("text, problem", [
    ("narrator = seed:1", "not a TOML cast file"),
    ("[characters]\n宝玉 = \"seed:1\"", "a name is quoted"),
    ("narator = \"seed:1\"", "unknown key 'narator'"),
    ("dialogue = 7", "dialogue: the voice must be a string"),
    ("dialogue = \"seed:x\"", "dialogue: voice 'seed:x': the seed must be an integer"),
    ("characters = \"宝玉\"", "characters must be a table"),
    ("[characters]\n\"宝玉\" = \"seed:1\"\n\"寶玉\" = \"seed:2\"", "'宝玉' and '寶玉' are the same name"),
    ("[characters]\n\"黛玉\" = \"voices/none.txt\"", "characters.黛玉: voices/none.txt: no such voice file"),
])
def test_a_bad_cast_file_is_one_line_naming_it(tmp_path, text, problem):
    f = _cast(tmp_path, text)
    with pytest.raises(BookError) as e:
        load_cast(f)
    assert str(e.value).startswith(f"{f}: ") and problem in str(e.value) and "\n" not in str(e.value)


def test_a_missing_cast_file(tmp_path):
    with pytest.raises(BookError, match="no such cast file"):
        load_cast(tmp_path / "none.toml")


def test_each_part_speaks_in_its_voice():
    cast = Cast("c.toml", characters=(("宝玉", None),))
    voices = CastVoices(cast, narrator="N", dialogue="D", characters={"宝玉": "B"})
    assert voices.voice_of("narrator", "") == "N"
    assert voices.voice_of("dialogue", "寶玉") == "B"
    assert voices.voice_of("dialogue", "黛玉") == voices.voice_of("dialogue", "") == "D"


def test_cast_report_adds_up_per_part(tmp_path):
    from tasks.text.quotes import Quote

    cast = load_cast(_cast(tmp_path))
    parts = [{"role": "narrator", "speaker": "", "segments": 5, "characters": 500},
             {"role": "dialogue", "speaker": "寶玉", "segments": 2, "characters": 300},
             {"role": "dialogue", "speaker": "賈母", "segments": 1, "characters": 100},
             {"role": "dialogue", "speaker": "", "segments": 1, "characters": 100}]
    quotes = {0: [Quote(0, 1, 4, 9, "“你好。”", "寶玉"), Quote(0, 1, 12, 16, "“好。”", "寶玉"),
                  Quote(0, 2, 0, 4, "“嗯。”", "")]}
    r = cast_report(cast, parts, quotes)
    by = {p["part"]: p for p in r["parts"]}
    assert (by["narrator"]["segments"], by["narrator"]["characters"], by["narrator"]["share"]) == (5, 500, 0.5)
    assert (by["dialogue"]["segments"], by["dialogue"]["characters"], by["dialogue"]["voice"]) == (2, 200, "seed:3")
    assert (by["宝玉"]["segments"], by["宝玉"]["share"]) == (2, 0.3) and by["黛玉"]["segments"] == 0
    assert r["speakers"] == [{"name": "寶玉", "quotes": 2, "part": "宝玉"}]
    assert r["quotes"][2] == {"chapter": 0, "text": "“嗯。”", "speaker": None}


def test_the_readme_example_is_a_cast_file(tmp_path, monkeypatch):
    """README's cast example loads (with a voice file where it names one) and means what the code does."""
    import numpy as np

    from engine.voice import encode_spk_emb
    from tests.conftest import ROOT

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "voices").mkdir()
    (tmp_path / "voices" / "daiyu.txt").write_text(encode_spk_emb(np.linspace(-1, 1, 8)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cast = load_cast(_cast(tmp_path, block))
    assert cast.narrator.seed == 2222 and cast.dialogue.seed == 4099
    assert cast.character("宝玉") == "寶玉" and cast.character("黛玉") == "黛玉"
    assert cast.spec("王熙鳳").speed == 7 and cast.spec("寶玉").speed is None


def test_a_cast_part_may_carry_its_own_speed(tmp_path):
    f = tmp_path / "cast.toml"
    f.write_text('narrator = { voice = "seed:1", speed = 3 }\n[characters]\n"寶玉" = { voice = "seed:2", speed = 8 }\n'
                 '"黛玉" = "seed:4"\n', encoding="utf-8")
    cast = load_cast(f)
    assert (cast.narrator.seed, cast.narrator.speed) == (1, 3)
    assert cast.spec("寶玉").speed == 8 and cast.spec("黛玉").speed is None and cast.spec("dialogue") is None
    for bad, problem in (('narrator = { voice = "seed:1", speed = 10 }', "speed 10 must be 0..9"),
                         ('narrator = { speed = 3 }', "holds voice"),
                         ('narrator = { voice = "seed:1", pace = 3 }', "not 'pace'")):
        f.write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(BookError, match=problem):
            load_cast(f)
