"""The audition's files (tasks/synthesize/audition.py renders the candidates): OUT/<book>/voices/ holds each
candidate's audio (NN-<name>.flac), voices.json and index.html, one row per candidate with a player, its seed and
fingerprint, and its --voice option to copy (works offline from file://)."""
from __future__ import annotations

import html
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from engine.atomic import write_bytes
from engine.units import SAMPLE_RATE
from tasks.audio.names import safe_name
from tasks.bookdir import PAGE_NAME, VOICES_DIRNAME, audio_relpath, json_bytes
from tasks.synthesize.audition import Audition, Candidate
from tasks.synthesize.segment_audio import audio_frames, write_segment_audio
from tasks.voice.voices import voice_id

if TYPE_CHECKING:
    import numpy as np

VOICES_JSON = "voices.json"


def write_audition(book_dir: Path, a: Audition) -> dict:
    """voices/: each candidate's audio, voices.json and the page.  Returns {dir, candidates, rendered, cached,
    notes}."""
    entries = _write_files(book_dir, a.picked, a.failed)
    write_page(book_dir / VOICES_DIRNAME, {"book": a.book, "text": a.text, "engine": a.engine, "candidates": entries})
    return {"dir": book_dir / VOICES_DIRNAME, "candidates": len(entries), "rendered": a.rendered,
            "cached": len(a.picked) - a.rendered, "notes": a.notes}


def _write_files(book_dir: Path, picked: list[tuple[str, Candidate, str]],
                 failed: dict[str, tuple[np.ndarray, str]]) -> list[dict]:
    """Copy each candidate's audio into voices/ as NN-<name>.flac (a guard failure: its last rendering); remove
    the files of candidates no longer listed.  Returns the voices.json entries."""
    folder = book_dir / VOICES_DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (voice, c, key) in enumerate(picked, 1):
        dest = folder / f"{i:02d}-{safe_name(c.name.replace(':', '-'), max_bytes=60)}.flac"
        audio, reason = failed.get(key, (None, ""))
        if audio is not None:
            write_segment_audio(dest, audio, SAMPLE_RATE)
        else:
            write_bytes(dest, (book_dir / audio_relpath(key)).read_bytes(), keep_same=True)
        frames = audio_frames(dest) or 0
        entries.append({"name": c.name, "spec": c.flag, "option": f"--voice {shlex.quote(c.flag)}",
                        "seed": c.seed, "fingerprint": voice_id(voice), "file": dest.name,
                        "duration_s": frames / SAMPLE_RATE, "samples": frames, "guard": reason})
    listed = {e["file"] for e in entries}
    for p in folder.glob("*.flac"):
        if p.name not in listed:
            p.unlink()
    return entries


def write_page(folder: Path, info: dict) -> None:
    """voices.json and index.html (self-contained: inline style and script, relative audio links)."""
    write_bytes(folder / VOICES_JSON, json_bytes(info), keep_same=True)
    write_bytes(folder / PAGE_NAME, page_html(info).encode("utf-8"), keep_same=True)


PAGE_STYLE = """body{font:15px/1.5 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#222}
.passage{background:#f5f5f0;padding:.8em 1em;border-left:4px solid #b9a;font-size:17px}
table{border-collapse:collapse;width:100%}th,td{padding:.4em .6em;border-bottom:1px solid #ddd;text-align:left;
vertical-align:middle}audio{width:18em}code{font-size:13px}.opt{display:inline-block;max-width:24em;
overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:middle}#clipboard{width:40em}
.guard{color:#a30}"""
PAGE_SCRIPT = """document.querySelectorAll("button.copy").forEach(function (b) {
  b.addEventListener("click", function () {
    var box = document.getElementById("clipboard");
    box.value = b.dataset.option;
    box.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(b.dataset.option).catch(function () {});
    } else {
      try { document.execCommand("copy"); } catch (e) {}
    }
    document.querySelectorAll("button.copy").forEach(function (o) { o.textContent = "copy"; });
    b.textContent = "copied";
  });
});"""


def page_html(info: dict) -> str:
    """The audition page: one row per candidate with a player, the seed, the fingerprint and its --voice
    option with a copy button (the option lands in the #clipboard field and, where allowed, the clipboard)."""
    e = html.escape
    rows = []
    for i, c in enumerate(info["candidates"], 1):
        note = f' <span class="guard" title="{e(c["guard"])}">(guard)</span>' if c["guard"] else ""
        rows.append(
            f'<tr data-file="{e(c["file"])}"><td>{i}</td><td>{e(c["name"])}{note}</td>'
            f'<td><audio controls preload="metadata" src="{e(c["file"])}"></audio></td>'
            f'<td>{c["duration_s"]:.1f} s</td><td>{"" if c["seed"] is None else c["seed"]}</td>'
            f'<td><code>{e(c["fingerprint"])}</code></td>'
            f'<td><code class="opt" title="{e(c["option"])}">{e(c["option"])}</code> '
            f'<button type="button" class="copy" data-option="{e(c["option"])}">copy</button></td></tr>')
    return f"""<!doctype html>
<html lang="zh"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Voices — {e(info["book"])}</title><style>{PAGE_STYLE}</style></head>
<body>
<h1>Voices for {e(info["book"])}</h1>
<p class="passage">{e(info["text"])}</p>
<p>Listen, pick a voice, copy its option and render with it:
<code>chattts-render BOOK --voice …</code>; keep it with <code>chattts-render voices save NAME --voice …</code>.
Engine <code>{e(info["engine"])}</code>.</p>
<p><label for="clipboard">Copied option:</label> <input id="clipboard" readonly value=""></p>
<table><thead><tr><th>#</th><th>voice</th><th>listen</th><th>length</th><th>seed</th><th>fingerprint</th>
<th>use it</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<script>{PAGE_SCRIPT}</script>
</body></html>
"""
