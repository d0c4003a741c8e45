"""Real recorded speech from the corpus (../shared/corpus/speech, its MANIFEST.md) as chapters to package: each clip
read, mixed to mono and resampled to 24 kHz, assembled as a render's segments are (tasks.audio.assemble), its cue
text the clip's exact transcript (transcripts.tsv)."""
from __future__ import annotations

from functools import cache

import numpy as np

from tasks.audio.assemble import ChapterAudio, assemble_arrays
from tasks.audio.encode import resample
from tests.conftest import corpus_path

SR = 24_000
# Chinese clips of one sentence each, clean (not the 0 dB noise copy), with their exact transcripts.
CLIPS = ("zh_thchs30_test_1.wav", "zh_aishell1_S0764_W0121.wav", "zh_thchs30_test_2.wav",
         "zh_aishell1_S0724_W0121.wav", "zh_thchs30_test_3.wav", "zh_aishell1_S0764_W0122.wav",
         "zh_thchs30_D4_751.wav", "zh_aishell1_S0002_W0122.wav", "zh_cosyvoice_zero_shot_prompt.wav")


@cache
def transcripts() -> dict[str, str]:
    rows = corpus_path("speech", "transcripts.tsv").read_text(encoding="utf-8").splitlines()
    return dict(line.split("\t", 1) for line in rows if "\t" in line)


@cache
def clip(name: str) -> np.ndarray:
    """(samples,) float32 at 24 kHz."""
    import soundfile as sf

    x, sr = sf.read(str(corpus_path("speech", name)), dtype="float32", always_2d=True)   # (n, channels)
    return resample(x.mean(axis=1), sr, SR)


def speech_chapter(names: tuple[str, ...], pauses: tuple[str, ...] | None = None) -> ChapterAudio:
    """The clips as one chapter's segments (their transcripts as the cues' texts)."""
    return assemble_arrays([clip(n) for n in names], list(pauses or ("sentence",) * len(names)),
                           [transcripts()[n] for n in names])
