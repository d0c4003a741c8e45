"""Tempo after synthesis (`--tempo`): a finished chapter time-stretched with its pitch kept, and its cues moved with
it, for listeners who want it faster than ChatTTS's `[speed_9]` (or slower).

The stretch is ffmpeg's `rubberband` filter (the Rubber Band library, which Debian's ffmpeg is built with:
`--enable-librubberband`), applied to the assembled chapter before it is resampled and loudness-normalized
(tasks.audio.package.prepare_chapter), so every output — chapter files, M4B and its chapter marks, the read-along
EPUB's SMIL clips, subtitles, report.json's cues and the player's sentence times — is built from the stretched
chapter and its moved cues.  Tempo is a packaging option: segments, their content keys and their audio are those of
tempo 1, and a new tempo re-packages without re-rendering.

Rubber Band keeps the length exact (round(samples / tempo)) and maps time linearly within a few tens of
milliseconds (tone bursts measured: onsets 6-12 ms early and ends 10-18 ms late at 1.25-1.5x, onsets up to 24 ms
early at 0.8x; the cues' silent margins are 30 ms before a piece's first loud frame and 80 ms after its last,
tasks.audio.assemble, so 24-37 ms and 53-100 ms after the stretch): a cue at sample s moves to
round(s * samples_out / samples_in).
"""
from __future__ import annotations

import subprocess
from dataclasses import replace
from functools import cache

import numpy as np

from tasks.audio.assemble import ChapterAudio, Cue
from tasks.audio.ffmpeg import BITEXACT, FFmpegFailed, find_tool, pcm_input
from tasks.errors import ToolMissing

FILTER = "rubberband"         # ffmpeg's filter: pitch kept, length exact
# Rubber Band's options: its default "crisp" transients reset phases at every onset it detects, which turns a steady
# 440 Hz tone at 1.25x into a smear (4.7 % of its energy within +-5 Hz of 440); "mixed" transients with independent
# phases keep it (99.98 %) and keep speech's onsets sharp.
FILTER_OPTIONS = "transients=mixed:phase=independent"


@cache
def check_tool() -> None:
    """ToolMissing unless the ffmpeg we run has the rubberband filter (checked once per process)."""
    ffmpeg = find_tool("ffmpeg")
    out = subprocess.run([ffmpeg, "-hide_banner", "-filters"], capture_output=True, text=True).stdout
    if not any(line.split()[1:2] == [FILTER] for line in out.splitlines()):
        raise ToolMissing(ffmpeg, f"--tempo needs ffmpeg's {FILTER} filter (an ffmpeg built with librubberband, "
                                  "as Debian's is: apt-get install ffmpeg)")


def stretch(audio: np.ndarray, sample_rate: int, tempo: float) -> np.ndarray:
    """(round(n / tempo),) float32: `audio` (n,) played `tempo` times as fast, its pitch kept; `audio` itself at 1."""
    x = np.ascontiguousarray(audio, dtype="<f4")
    if tempo == 1.0 or len(x) == 0:
        return x.astype(np.float32, copy=False)
    cmd = [find_tool("ffmpeg"), "-hide_banner", "-nostats", "-v", "error", *pcm_input(sample_rate),
           "-af", f"{FILTER}=tempo={tempo!r}:{FILTER_OPTIONS}", "-threads", "1", *BITEXACT, "-f", "f32le", "-ac", "1",
           "-ar", str(sample_rate), "pipe:1"]
    res = subprocess.run(cmd, input=x.tobytes(), capture_output=True)
    if res.returncode != 0:
        tail = " | ".join(res.stderr.decode("utf-8", errors="replace").strip().splitlines()[-3:])
        raise FFmpegFailed(f"ffmpeg's {FILTER} failed (exit {res.returncode}): {tail or '(no message)'}")
    return np.frombuffer(res.stdout, dtype="<f4").astype(np.float32)


def move(cue: Cue, n_in: int, n_out: int, sample_rate: int) -> Cue:
    """A cue on the stretched timeline: each edge at round(edge * n_out / n_in) (integer arithmetic)."""
    start = (cue.start_sample * n_out + n_in // 2) // n_in
    end = (cue.end_sample * n_out + n_in // 2) // n_in
    return replace(cue, start_s=start / sample_rate, end_s=end / sample_rate, start_sample=start, end_sample=end)


def stretch_chapter(chapter: ChapterAudio, tempo: float) -> ChapterAudio:
    """The chapter at `tempo`, its cues moved with it (the chapter itself at 1)."""
    if tempo == 1.0:
        return chapter
    y = stretch(chapter.audio, chapter.sample_rate, tempo)
    n_in, n_out = len(chapter.audio), len(y)
    return ChapterAudio(y, chapter.sample_rate, [move(c, n_in, max(n_out, 0), chapter.sample_rate)
                                                 for c in chapter.cues] if n_in else [])
