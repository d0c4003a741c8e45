"""Locating and running ffmpeg/ffprobe: bit-exact encodes fed from numpy, decodes back to numpy, probes.

ffmpeg comes from the system (`apt-get install ffmpeg`); `$FFMPEG` / `$FFPROBE` override the PATH lookup.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from tasks.errors import ToolMissing

CHUNK_SAMPLES = 1 << 20            # samples per pipe write/read (4 MiB of float32)
BITEXACT = ["-fflags", "+bitexact", "-flags:a", "+bitexact"]


class FFmpegFailed(RuntimeError):
    """ffmpeg exited non-zero; the message carries its last stderr lines."""


def find_tool(name: str) -> str:
    """Path of `ffmpeg` or `ffprobe`: $FFMPEG/$FFPROBE, then beside $FFMPEG, then PATH."""
    env = os.environ.get(name.upper())
    if env:
        if shutil.which(env):
            return shutil.which(env)  # type: ignore[return-value]
        raise ToolMissing(env, f"${name.upper()} does not name an executable {name}")
    if name == "ffprobe" and os.environ.get("FFMPEG"):
        sibling = Path(os.environ["FFMPEG"]).with_name("ffprobe")
        if shutil.which(str(sibling)):
            return str(sibling)
    found = shutil.which(name)
    if not found:
        raise ToolMissing(name, f"{name} not found on PATH; install it (apt-get install ffmpeg) "
                                f"or set ${name.upper()}")
    return found


def _tail(stderr: bytes, lines: int = 3) -> str:
    text = stderr.decode("utf-8", errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) if text else "(no message)"


def run_ffmpeg(args: Sequence[str], pcm: Iterable[np.ndarray] | None = None) -> None:
    """Run `ffmpeg -v error <args>`, feeding float32 chunks to stdin when `pcm` is given."""
    cmd = [find_tool("ffmpeg"), "-hide_banner", "-nostats", "-v", "error", "-y", *args]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if pcm is not None else subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
        broken = False
        if pcm is not None:
            assert proc.stdin is not None
            try:
                for chunk in pcm:
                    proc.stdin.write(np.ascontiguousarray(chunk, dtype="<f4").tobytes())
            except BrokenPipeError:
                broken = True
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    broken = True
        rc = proc.wait()
        if rc != 0 or broken:
            err.seek(0)
            raise FFmpegFailed(f"ffmpeg failed (exit {rc}): {_tail(err.read())}")


def pcm_input(sample_rate: int) -> list[str]:
    """ffmpeg arguments for mono float32 little-endian PCM on stdin."""
    return ["-f", "f32le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0"]


def chunks(audio: np.ndarray, scale: float = 1.0) -> Iterator[np.ndarray]:
    """`audio` (or a memmap of it) in CHUNK_SAMPLES pieces, multiplied by `scale` in float32."""
    s = np.float32(scale)
    for i in range(0, len(audio), CHUNK_SAMPLES):
        c = np.asarray(audio[i:i + CHUNK_SAMPLES], dtype=np.float32)
        yield c if scale == 1.0 else c * s


def probe(path: Path) -> dict:
    """ffprobe's JSON for `path`: format, streams and chapters."""
    cmd = [find_tool("ffprobe"), "-v", "error", "-show_format", "-show_streams", "-show_chapters",
           "-of", "json", str(path)]
    res = subprocess.run(cmd, capture_output=True)
    if res.returncode != 0:
        raise FFmpegFailed(f"ffprobe failed on {path}: {_tail(res.stderr)}")
    return json.loads(res.stdout)


def decode(path: Path, sample_rate: int | None = None) -> tuple[int, Iterator[np.ndarray]]:
    """(sample_rate, float32 mono chunks) of the first audio stream of `path`: at `sample_rate` when the
    caller knows the stream's rate (no probe), else at the rate ffprobe reports."""
    sr = sample_rate
    if sr is None:
        info = probe(path)
        audio = [s for s in info.get("streams", []) if s.get("codec_type") == "audio"]
        if not audio:
            raise FFmpegFailed(f"{path}: no audio stream")
        sr = int(audio[0]["sample_rate"])
    cmd = [find_tool("ffmpeg"), "-hide_banner", "-nostats", "-v", "error", "-i", str(path),
           "-map", "0:a:0", "-f", "f32le", "-ac", "1", "-ar", str(sr), "pipe:1"]

    def gen() -> Iterator[np.ndarray]:
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            assert proc.stdout is not None
            rest = b""
            while True:
                buf = proc.stdout.read(CHUNK_SAMPLES * 4)
                if not buf:
                    break
                buf = rest + buf
                cut = len(buf) - len(buf) % 4
                rest = buf[cut:]
                yield np.frombuffer(buf[:cut], dtype="<f4").astype(np.float32)
            rc = proc.wait()
            if rc != 0:
                err.seek(0)
                raise FFmpegFailed(f"ffmpeg could not decode {path}: {_tail(err.read())}")

    return sr, gen()


def ffmetadata_escape(value: str) -> str:
    """A value for an FFMETADATA1 file: `= ; # \\` and newlines backslash-escaped."""
    out = []
    for c in value:
        if c in "=;#\\\n":
            out.append("\\" + c)
        elif c == "\r":
            continue
        else:
            out.append(c)
    return "".join(out)
