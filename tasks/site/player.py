"""A book's web player: `OUT/<book>/index.html`, written after every packaging (render and `package`).

One static page that works offline from file:// (no server, no network): cover, title, author, total duration,
the chapter list with durations, one audio player, the chapter's original text with the sentence being spoken
highlighted and scrolled into view (click one to play from it; space, ←/→), the position remembered per book
(localStorage), and the per-chapter duration and loudness summary of report.json (tasks.report.book_table).

Where its numbers come from — nothing is measured again:
- the cue of every segment: report.json's `cues_ms` per chapter, the milliseconds the subtitles print
  (tasks.audio.subtitles.timed), split into sentences by tasks.audio.subtitles.by_sentence as the
  sentence subtitles are;
- the text: each segment's original text (`source_text`) from the manifest, a paragraph ending at a segment
  whose pause is a paragraph's or the chapter's;
- the audio: each chapter's file in the first of the book's formats the browser can play, else the M4B at the
  chapter's offset (the sum of the chapter durations before it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tasks.audio.subtitles import TimedText
from tasks.site.html import document, esc, href, json_script

PAGE_NAME = "index.html"
STORAGE_PREFIX = "chattts-render:"       # localStorage key of a book's position: prefix + folder + title
PARAGRAPH_ENDS = ("paragraph", "chapter")   # a segment with this pause after it ends its paragraph


@dataclass(frozen=True)
class Sentence:
    start_ms: int
    end_ms: int
    text: str
    gap: bool = False                    # the segment was not rendered (--allow-gaps): silence in its place


@dataclass(frozen=True)
class PlayerChapter:
    title: str
    seconds: float
    offset_s: float                      # where it starts in the M4B
    files: dict                          # format -> file name of this chapter
    paragraphs: list                     # [[Sentence]]


def book_info(book_dir: Path) -> dict:
    """book.json (title, author, language, cover_file …); {} when missing or unreadable."""
    from tasks.plan import BOOK_JSON

    return _json_object(Path(book_dir) / BOOK_JSON)


def read_report(book_dir: Path) -> dict:
    """report.json; {} when the book was never packaged."""
    from tasks.audio.package import REPORT_NAME

    return _json_object(Path(book_dir) / REPORT_NAME)


def _json_object(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def player_chapters(book_dir: Path, report: dict) -> list[PlayerChapter]:
    """The packaged chapters in reading order, with their files, M4B offsets and timed sentences."""
    from manifests import STATUS_DONE, load
    from tasks.audio.subtitles import by_sentence

    rows: dict[int, list[dict]] = {}
    for r in load(book_dir).to_pylist():                  # sorted by (chapter, segment)
        rows.setdefault(r["chapter"], []).append(r)
    files: dict[int, dict] = {}
    for f in report.get("files", []):
        if f.get("chapter") is not None:
            files.setdefault(f["chapter"], {})[f["format"]] = f["file"]
    out, offset = [], 0.0
    for ch in report.get("chapters", []):
        paragraphs, para = [], []
        for r, (start, end) in zip(rows.get(ch["index"], []), ch["cues_ms"], strict=True):
            gap = r["status"] != STATUS_DONE
            para += [Sentence(t.start_ms, t.end_ms, t.text, gap)
                     for t in by_sentence([TimedText(start, end, r["source_text"])])]
            if r["pause_after"] in PARAGRAPH_ENDS:
                paragraphs.append(para)
                para = []
        paragraphs += [para] if para else []
        out.append(PlayerChapter(ch["title"], ch["seconds"], round(offset, 3), files.get(ch["index"], {}),
                                 paragraphs))
        offset += ch["seconds"]
    return out


def book_page(book_dir: Path) -> str:
    """The player page of a packaged book (see the module docstring)."""
    from tasks.audio.encode import MEDIA_TYPES
    from tasks.report import book_table, hms

    book_dir = Path(book_dir)
    info, report = book_info(book_dir), read_report(book_dir)
    chapters = player_chapters(book_dir, report)
    title, author = info.get("title") or book_dir.name, info.get("author", "")
    total = sum(c.seconds for c in chapters)
    book_files = {f["format"]: f["file"] for f in report.get("files", []) if f.get("chapter") is None}
    cover = info.get("cover_file")
    head = ('<header class="book">\n'
            + (f'<img class="cover" src="{esc(href(cover))}" alt="">\n' if cover and (book_dir / cover).is_file()
               else "")
            + f'<div><h1>{esc(title)}</h1>\n<p class="author">{esc(author)}</p>\n'
            f'<p class="total">{len(chapters)} chapters · <span id="total">{hms(total)}</span></p></div>\n'
            "</header>")
    nav = "".join(f'<li><button type="button" data-chapter="{i}"><span class="title">{esc(c.title)}</span> '
                  f'<span class="duration">{hms(c.seconds)}</span></button></li>\n' for i, c in enumerate(chapters))
    texts = "".join(_chapter_text(i, c) for i, c in enumerate(chapters))
    data = {"key": f"{STORAGE_PREFIX}{book_dir.name}:{title}", "formats": report.get("formats", []),
            "types": MEDIA_TYPES, "book": {k: href(v) for k, v in book_files.items()},
            "chapters": [{"files": {k: href(v) for k, v in c.files.items()}, "offset": c.offset_s,
                          "seconds": c.seconds} for c in chapters]}
    body = (f'{head}\n<main class="player">\n<nav class="chapters" aria-label="chapters"><ol>\n{nav}</ol></nav>\n'
            '<section class="reader">\n<audio id="audio" controls preload="metadata"></audio>\n'
            '<p class="keys">space: play / pause · ← →: previous / next sentence · click a sentence to play '
            f'from it</p>\n<div id="text">\n{texts}</div>\n</section>\n</main>\n'
            f"{_summary(book_table(book_dir))}\n{json_script('player-data', data)}")
    return document(f"{title} — {author}" if author else title, body, lang=info.get("language", "zh"),
                    scripts=("player.js",))


def _chapter_text(position: int, chapter: PlayerChapter) -> str:
    paragraphs = []
    for para in chapter.paragraphs:
        spans = "".join(f'<span class="s{" gap" if s.gap else ""}" data-start="{s.start_ms / 1000:.3f}" '
                        f'data-end="{s.end_ms / 1000:.3f}">{esc(s.text)}</span>' for s in para)
        paragraphs.append(f"<p>{spans}</p>\n")
    return f'<article class="chapter" data-chapter="{position}" hidden>\n{"".join(paragraphs)}</article>\n'


def _summary(rows: list[dict]) -> str:
    """The per-chapter duration and loudness table (rows: tasks.report.book_table)."""
    from tasks.report import hms

    def num(v, unit: str) -> str:
        return "" if v is None else f"{v:.1f} {unit}"

    body = "".join(f"<tr><td>{r['chapter']}</td><td>{esc(r['title'])}</td><td>{hms(r['seconds'] or 0)}</td>"
                   f"<td>{num(r['lufs'], 'LUFS')}</td><td>{num(r['true_peak_dbtp'], 'dBTP')}</td>"
                   f"<td>{r['failed'] or ''}</td></tr>\n" for r in rows)
    return ('<details class="summary"><summary>Duration and loudness per chapter (report.json)</summary>\n'
            "<table><thead><tr><th>#</th><th>chapter</th><th>duration</th><th>loudness</th><th>true peak</th>"
            f"<th>gaps</th></tr></thead>\n<tbody>\n{body}</tbody></table></details>")


def write_book_page(book_dir: Path) -> Path:
    """Write OUT/<book>/index.html atomically (left alone when unchanged); its path."""
    from engine.atomic import write_bytes
    from tasks.audio.names import inside

    path = inside(Path(book_dir), PAGE_NAME)
    write_bytes(path, book_page(book_dir).encode("utf-8"), keep_same=True)
    return path
