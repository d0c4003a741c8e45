"""ACX's limits (tasks/audio/acx.py) and the measures they are written in (tasks/audio/loudness.py Meter): checked
against numpy on known signals, then on books of real speech packaged with and without the `acx` preset, read back
from report.json and by `chattts-render check --acx`."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from flows.cli import main
from tasks.audio.acx import NOISE_FLOOR_MAX_DBFS, PEAK_MAX_DBFS, RMS_MAX_DBFS, RMS_MIN_DBFS, check_audio, check_report
from tasks.audio.ffmpeg import decode
from tasks.audio.loudness import Meter
from tasks.audio.options import LOUDNESS_PRESETS, PackageOptions, loudness_preset
from tasks.audio.package import package_book
from tasks.book import BookMeta
from tests.conftest import corpus_path
from tests.tasks.audio.corpus_speech import CLIPS, speech_chapter

needs_ffmpeg = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="ffmpeg not installed (apt-get install ffmpeg)")
SR = 24_000


def acx_by_numpy(x: np.ndarray, sr: int) -> tuple[float, float, float]:
    """(RMS, sample peak, noise floor) in dBFS, the plain way: the floor is the lowest RMS of every 0.4 s window
    starting on a 0.1 s step."""
    x = x.astype(np.float64)
    step, width = round(0.1 * sr), round(0.4 * sr)
    floors = [np.sqrt(np.mean(x[s:s + width] ** 2)) for s in range(0, len(x) - width + 1, step)]
    with np.errstate(divide="ignore"):
        return (20 * np.log10(np.sqrt(np.mean(x ** 2))), 20 * np.log10(np.abs(x).max()), 20 * np.log10(min(floors)))


def test_the_meter_measures_what_acx_check_measures():
    rng = np.random.default_rng(7)
    t = np.arange(5 * SR) / SR
    x = (0.4 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 0.5 * t)) / 2).astype(np.float32)
    x[2 * SR:3 * SR] = (0.002 * rng.standard_normal(SR)).astype(np.float32)      # 1 s of quiet noise
    m = Meter(SR)
    for i in range(0, len(x), 7_919):                                            # chunks across step edges
        m.feed(x[i:i + 7_919])
    rms, peak, floor = acx_by_numpy(x, SR)
    assert m.rms_dbfs() == pytest.approx(rms, abs=1e-6) and m.sample_peak_dbfs() == pytest.approx(peak, abs=1e-6)
    assert m.noise_floor_dbfs() == pytest.approx(floor, abs=1e-3) and -56 < floor < -52
    silent = Meter(SR)
    silent.feed(np.concatenate([x, np.zeros(SR, np.float32)]))
    assert silent.noise_floor_dbfs() == -math.inf                                # digital silence
    assert math.isnan(Meter(SR).noise_floor_dbfs())


def test_presets_and_numbers():
    assert loudness_preset("acx") == (LOUDNESS_PRESETS["acx"].target_lufs, LOUDNESS_PRESETS["acx"].true_peak_dbtp)
    assert loudness_preset(" EBU-R128 ") == (-23.0, -1.0) and loudness_preset("podcast") == (-16.0, -1.0)
    assert loudness_preset(-20) == (-20.0, None) and loudness_preset("-20") == (-20.0, None)
    for bad in ("loud", "nan", float("inf"), ""):
        with pytest.raises(ValueError, match="acx, podcast, ebu-r128"):
            loudness_preset(bad)


def test_a_noisy_recording_misses_the_noise_floor(corpus):
    """Real audio measured now: the 0 dB noise copy of a THCHS-30 clip has its floor far above -60 dBFS."""
    from tasks.qa.recordings import read_recording

    path = corpus("speech", "zh_thchs30_D4_751_noise0dB.wav")
    r = check_audio(str(path), *read_recording(path))
    assert r.noise_floor_dbfs > NOISE_FLOOR_MAX_DBFS + 20 and not r.ok
    assert any(f.startswith("noise floor") for f in r.failures)


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """Two chapters of real speech packaged as FLAC and MP3, once with `--loudness acx`, once at the default."""
    corpus_path("speech", "transcripts.tsv")
    out = {}
    chapters = [(0, "第一章", speech_chapter(CLIPS[:5])), (1, "第二章", speech_chapter(CLIPS[5:]))]
    for name, value in (("acx", "acx"), ("default", PackageOptions.target_lufs)):
        target, ceiling = loudness_preset(value)
        opts = PackageOptions(formats=("flac", "mp3"), subtitles=(), target_lufs=target,
                              true_peak_dbtp=PackageOptions.true_peak_dbtp if ceiling is None else ceiling)
        out[name] = package_book(tmp_path_factory.mktemp(name) / "book", chapters, BookMeta("真书"), opts).book_dir
    return out


@needs_ffmpeg
def test_the_acx_preset_lands_real_speech_inside_acx_limits(books):
    """Every chapter file passes, and the measures report.json holds are those of the decoded final file."""
    report = json.loads((books["acx"] / "report.json").read_text(encoding="utf-8"))
    results = check_report(report)
    assert [(r.chapter, r.file.rsplit(".", 1)[1]) for r in results] == [(0, "flac"), (0, "mp3"), (1, "flac"),
                                                                        (1, "mp3")]
    for r in results:
        assert r.ok, (r.file, r.failures)
        assert RMS_MIN_DBFS < r.rms_dbfs < RMS_MAX_DBFS and r.peak_dbfs <= PEAK_MAX_DBFS
        assert r.noise_floor_dbfs == -math.inf and r.notes                     # pauses are digital silence
        sr, it = decode(books["acx"] / r.file)
        rms, peak, _ = acx_by_numpy(np.concatenate(list(it)), sr)
        assert r.rms_dbfs == pytest.approx(rms, abs=0.01) and r.peak_dbfs == pytest.approx(peak, abs=0.01)


@needs_ffmpeg
def test_the_default_loudness_misses_acxs_peak_limit_and_the_check_says_so(books, capsys):
    results = check_report(json.loads((books["default"] / "report.json").read_text(encoding="utf-8")))
    assert results and all(not r.ok for r in results)
    assert all(r.failures == [f"peak {r.peak_dbfs:.1f} dBFS above -3"] for r in results), [r.failures for r in results]
    assert main(["check", "--acx", str(books["default"])]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "4 file(s): 0 pass, 4 fail" and "FAIL: peak" in out[1]
    assert main(["check", "--acx", str(books["acx"]), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 4 and all(r["ok"] and r["noise_floor_dbfs"] == "-inf" for r in rows)


@needs_ffmpeg
def test_check_acx_on_files_and_its_usage_errors(books, tmp_path, capsys):
    mp3 = sorted(books["acx"].glob("*.mp3"))
    assert main(["check", "--acx", *map(str, mp3)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 file(s): 2 pass, 0 fail"
    assert main(["check", "--acx", str(tmp_path)]) == 2                      # a folder with no report.json
    assert main(["check", "--acx"]) == 2
    assert main(["check", "--acx", str(mp3[0]), "--text", "x"]) == 2
    assert main(["check", str(mp3[0])]) == 2                                  # neither --text nor --acx
    err = capsys.readouterr().err
    assert "report.json" in err and "--text" in err
