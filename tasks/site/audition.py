"""Audition: hear candidate voices read one passage of the book before committing to a 20-hour render.

    result = audition(book, book_dir, AuditionOptions(count=6), get_engine)
    # OUT/<book>/voices/: NN-<name>.flac per candidate, voices.json, index.html (works offline from file://)

The passage is the first ~15 s of the book's first chapter after normalization (or `text`, normalized the same
way).  Candidates: the book's stored voice (when it was rendered into OUT), every saved voice
(tasks/voice/voices.py), then `seed:S` … `seed:S+N-1`; a voice that sounds the same as an earlier one (the same voice
string) is listed once.  Each candidate is rendered like a segment — seed plan.derive_seed(passage, voice),
content key plan.content_key, the quality guard, audio in the book's content-addressed `segments/` — so the
same passage in the same voice is never rendered twice (a segment of the book with the same text is that same
audio).  The voices/ folder holds copies the page plays.
"""
from __future__ import annotations

import html
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.atomic import write_bytes
from engine.units import SAMPLE_RATE, estimate_seconds, speakable_chars
from engine.voice import MAX_SEED, VoiceError, VoiceSpec, parse_voice_spec
from tasks.audio.names import safe_name
from tasks.bookdir import PAGE_NAME, VOICES_DIRNAME, audio_relpath, json_bytes
from tasks.errors import BookError
from tasks.ingest import load_book
from tasks.plan.rows import content_key, derive_seed
from tasks.synthesize.guard import GuardOptions
from tasks.synthesize.render import render_guarded
from tasks.synthesize.segment_audio import audio_frames, write_segment_audio
from tasks.text.normalize import normalize
from tasks.text.segment import SegmentOptions, book_options, segment_chapter
from tasks.voice.voices import saved_voices, voice_id

if TYPE_CHECKING:
    import numpy as np

AUDITION_SECONDS = 15.0            # s: the default passage is the first chapter's pieces up to this long
PIECE_SECONDS = 8.0                # s: the pieces it is packed from (the segmenter's target for the passage)
MAX_PASSAGE_SECONDS = 25.0         # s: never longer than this
DEFAULT_COUNT = 12
DEFAULT_FROM_SEED = 2222           # the default voice (tasks.voice.voices.DEFAULT_VOICE) is the first seed
MAX_COUNT = 100
VOICES_JSON = "voices.json"
BOOK_VOICE_NAME = "book"           # the candidate that is the book's stored voice


@dataclass(frozen=True)
class AuditionOptions:
    count: int = DEFAULT_COUNT               # seed candidates
    from_seed: int = DEFAULT_FROM_SEED       # the first seed candidate
    text: str | None = None                  # the passage; None: the first ~15 s of the first chapter

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if not 0 <= self.count <= MAX_COUNT:
            raise ValueError(f"--count {self.count}: must be in 0..{MAX_COUNT}")
        if not 0 <= self.from_seed <= MAX_SEED - self.count:
            raise ValueError(f"--from-seed {self.from_seed}: seeds must stay in 0..2**63-1")
        if self.text is not None and not self.text.strip():
            raise ValueError("--text is empty")


@dataclass(frozen=True)
class Candidate:
    name: str                      # "seed:2222", a saved voice's name, "book"
    spec: VoiceSpec
    flag: str                      # the --voice value that selects it
    seed: int | None = None        # the voice's seed, for seed candidates


def passage(book, segment, text: str | None = None) -> str:
    """The audition passage, normalized as the book's text is (`segment`: SegmentOptions).  BookError when
    nothing of it can be spoken."""
    if text is not None:
        out = normalize(text, segment.normalize).strip()
    else:
        pieces = segment_chapter(book.chapters[0], opts=replace(segment, target_seconds=PIECE_SECONDS,
                                                                max_seconds=max(PIECE_SECONDS, segment.min_seconds)))
        out = ""
        for p in pieces:
            longer = out + p.text
            if out and (estimate_seconds(longer) > MAX_PASSAGE_SECONDS or len(longer) > segment.max_chars):
                break
            out = longer
            if estimate_seconds(out) >= AUDITION_SECONDS:
                break
    if speakable_chars(out) == 0:
        raise BookError(book.meta.source_path, "the audition passage has nothing to speak"
                        + (" (--text)" if text is not None else " (first chapter)"))
    if text is not None and (estimate_seconds(out) > MAX_PASSAGE_SECONDS or len(out) > segment.max_chars):
        raise BookError(book.meta.source_path, f"the audition passage (--text) reads ~{estimate_seconds(out):.0f} s "
                        f"({len(out)} characters); at most {MAX_PASSAGE_SECONDS:g} s and {segment.max_chars} "
                        "characters")
    return out


def candidates(aud: AuditionOptions, stored: str | None) -> tuple[list[Candidate], list[str]]:
    """(candidates in page order, notes on saved voices that cannot be used)."""

    out, notes = [], []
    if stored:
        out.append(Candidate(BOOK_VOICE_NAME, parse_voice_spec(stored), stored))
    for e in saved_voices():
        if e["problem"]:
            notes.append(f"saved voice {e['name']} skipped: {e['problem']}")
        else:
            spec = parse_voice_spec(e["name"])
            out.append(Candidate(e["name"], spec, e["name"], seed=spec.seed))
    for s in range(aud.from_seed, aud.from_seed + aud.count):
        out.append(Candidate(f"seed:{s}", VoiceSpec(f"seed:{s}", seed=s), f"seed:{s}", seed=s))
    return out, notes


def audition(path: Path, book_dir: Path, aud: AuditionOptions, get_engine, segment: SegmentOptions = SegmentOptions(),
             language: str = "auto", guard: GuardOptions = GuardOptions()) -> dict:
    """Render the audition of the book at `path` into book_dir/voices/ (see the module docstring), its text read as
    a render reads it (`segment`, `language`), each candidate checked by the duration `guard`.  The caller holds the
    book's lock.  Returns {dir, candidates, rendered, cached, notes}."""
    from manifests.store import load

    book = load_book(path)                               # BookError: nothing written yet
    text = passage(book, book_options(book, segment, language), aud.text)   # the book's reading language
    rows = load(book_dir).to_pylist() if book_dir.exists() else []
    cands, notes = candidates(aud, rows[0]["spk_emb"] if rows else None)
    engine = get_engine()
    picked: dict[str, tuple[Candidate, str]] = {}        # voice string -> (candidate, content key)
    todo: dict[str, tuple[str, str, int]] = {}           # content key -> (text, voice, seed): not in the cache
    for c in cands:
        try:
            voice = engine.resolve_voice(c.spec)
        except VoiceError as e:
            notes.append(f"{c.name} skipped: {e}")
            continue
        if voice in picked:
            continue
        seed = derive_seed(text, voice_id(voice))
        keys = [content_key(text, voice_id(voice), seed, v) for v in (engine.version, *engine.adopts)]
        key = next((k for k in keys if (book_dir / audio_relpath(k)).is_file()), keys[0])   # adopted audio too
        picked[voice] = (c, key)
        if not (book_dir / audio_relpath(key)).is_file():
            todo[key] = (text, voice, seed)
    guard_failed: dict[str, tuple[np.ndarray, str]] = {}
    for key, audio, reason, _attempt in render_guarded(engine, todo, guard):
        if reason:                                       # heard on the page, never cached as a segment
            guard_failed[key] = (audio, reason)
        else:
            write_segment_audio(book_dir / audio_relpath(key), audio, SAMPLE_RATE)
    entries = _write_files(book_dir, list(picked.items()), guard_failed)
    info = {"book": book.meta.title, "text": text, "engine": engine.version, "candidates": entries}
    _write_page(book_dir / VOICES_DIRNAME, info)
    return {"dir": book_dir / VOICES_DIRNAME, "candidates": len(entries), "rendered": len(todo),
            "cached": len(picked) - len(todo), "notes": notes}


def _write_files(book_dir: Path, picked: list[tuple[str, tuple[Candidate, str]]],
                 failed: dict[str, tuple[np.ndarray, str]]) -> list[dict]:
    """Copy each candidate's audio into voices/ as NN-<name>.flac (a guard failure: its last rendering); remove
    the files of candidates no longer listed.  Returns the voices.json entries."""
    folder = book_dir / VOICES_DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (voice, (c, key)) in enumerate(picked, 1):
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


def _write_page(folder: Path, info: dict) -> None:
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
