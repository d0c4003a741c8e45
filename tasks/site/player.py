"""A book's web player: `OUT/<book>/index.html`, written after every packaging (render and `package`).

One static page that works offline from file://: the chapters, one audio player, the chapter's original text with
the sentence being spoken highlighted, and the segments to re-take (a flag per sentence, the `chattts-render fix`
command for them).  Nothing is measured again: its cues, text and audio are the packaging's (report.json, text.json,
the chapter files).  What it shows and where each number comes from: docs/modules.md, "The book's web player".
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import write_bytes
from engine.units import hms
from manifests.status import STATUS_DONE
from manifests.store import load
from tasks.audio.encode import MEDIA_TYPES
from tasks.audio.names import inside
from tasks.audio.readalong import load_text, read_along
from tasks.audio.subtitles import TimedText, by_sentence, split_sentences
from tasks.bookdir import PAGE_NAME, QA_PAGE, read_book_json, read_report
from tasks.site.html import document, esc, href, json_script
from tasks.site.qa import FLAG, INCONCLUSIVE, fix_book, fix_command, kept_take, qa_summary, segment_name
from tasks.site.status import book_table

STORAGE_PREFIX = "chattts-render:"       # localStorage key of a book's position: prefix + folder + title
FLAGS_SUFFIX = ":flags"                  # + this: the segments flagged on the page (a JSON list of C.S names)
FLAGS_FILE = "{folder}-flagged.txt"      # the flagged list's download, for `fix --from`
FLAGS_OPTION = "--retake"                # what the fix command of the flagged segments asks for
QA_TITLES = {FLAG: "the checks flagged this segment", INCONCLUSIVE: "the checks could not decide on this segment"}


@dataclass(frozen=True)
class Sentence:
    text: str                            # original text; "\n" where a segment runs across a paragraph break
    start_ms: int | None = None          # its cue on the chapter's timeline; None: text no segment speaks
    end_ms: int | None = None
    gap: bool = False                    # the segment was not rendered (--allow-gaps): silence in its place
    segment: str = ""                    # its segment's name, C.S ("" for text no segment speaks)
    qa: str = ""                         # the segment's verdict from the checks (pass | flag | inconclusive | "")
    reason: str = ""                     # why, for flag and inconclusive


@dataclass(frozen=True)
class Paragraph:
    title: bool                          # the chapter title (readalong.Block.title)
    sentences: tuple[Sentence, ...]


@dataclass(frozen=True)
class PlayerChapter:
    title: str
    seconds: float
    offset_s: float                      # where it starts in the M4B
    files: dict                          # format -> file name of this chapter (audio formats only)
    paragraphs: tuple[Paragraph, ...]


def player_chapters(book_dir: Path, report: dict, manifest: list[dict] | None = None) -> list[PlayerChapter]:
    """The packaged chapters in reading order, with their files, M4B offsets and timed sentences (`manifest`:
    the book's rows, when the caller has loaded them)."""
    rows: dict[int, list[dict]] = {}
    for r in manifest if manifest is not None else load(book_dir).to_pylist():   # sorted by (chapter, segment)
        rows.setdefault(r["chapter"], []).append(r)
    files: dict[int, dict] = {}
    for f in report.get("files", []):
        if f.get("chapter") is not None and f["format"] in MEDIA_TYPES:     # (not the EPUB's audio)
            files.setdefault(f["chapter"], {})[f["format"]] = f["file"]
    texts = load_text(Path(book_dir)) or {}
    out, offset = [], 0.0
    for ch in report.get("chapters", []):
        rs = rows.get(ch["index"], [])
        cues = [TimedText(start, end, r["source_text"]) for r, (start, end) in zip(rs, ch["cues_ms"], strict=True)]
        paragraphs = tuple(Paragraph(b.title, tuple(s for run in b.runs for s in _sentences(run, cues, rs)))
                           for b in read_along(ch["title"], texts.get(ch["index"]), cues).blocks())
        out.append(PlayerChapter(ch["title"], ch["seconds"], round(offset, 3), files.get(ch["index"], {}),
                                 paragraphs))
        offset += ch["seconds"]
    return out


def _sentences(run, cues: list[TimedText], rows: list[dict]) -> list[Sentence]:
    """A readalong run as sentences: unspoken text whole; a segment's text cut by split_sentences, each piece
    timed by by_sentence (the sentence subtitles' split of the segment's cue)."""
    if run.segment is None:
        return [Sentence(run.text)]
    row = rows[run.segment]
    cue, gap = cues[run.segment], row["status"] != STATUS_DONE
    qa = row.get("qa") or ""
    reason = (kept_take(row).get("reason") or "") if qa in QA_TITLES else ""
    timed = by_sentence([TimedText(cue.start_ms, cue.end_ms, run.text)])
    return [Sentence(text, t.start_ms, t.end_ms, gap, segment_name(row), qa, reason)
            for text, t in zip(split_sentences(run.text), timed, strict=True)]


def book_page(book_dir: Path) -> str:
    """The player page of a packaged book (see the module docstring)."""
    book_dir = Path(book_dir)
    info, report = read_book_json(book_dir), read_report(book_dir)
    rows = load(book_dir).to_pylist()
    chapters = player_chapters(book_dir, report, rows)
    title, author = info.get("title") or book_dir.name, info.get("author", "")
    total = sum(c.seconds for c in chapters)
    book_files = {f["format"]: f["file"] for f in report.get("files", []) if f.get("chapter") is None}
    silent = "" if any(c.files for c in chapters) or "m4b" in book_files else (
        '<p class="keys" id="no-audio">No audio to play here: the book was packaged as '
        f'{esc(", ".join(report.get("formats", [])))} only; package it with --format flac or m4b too.</p>\n')
    cover = info.get("cover_file")
    head = ('<header class="book">\n'
            + (f'<img class="cover" src="{esc(href(cover))}" alt="">\n' if cover and (book_dir / cover).is_file()
               else "")
            + f'<div><h1>{esc(title)}</h1>\n<p class="author">{esc(author)}</p>\n'
            f'<p class="total">{len(chapters)} chapters · <span id="total">{hms(total)}</span></p>\n'
            f"{_qa_link(book_dir, rows)}</div>\n</header>")
    nav = "".join(f'<li><button type="button" data-chapter="{i}"><span class="title">{esc(c.title)}</span> '
                  f'<span class="duration">{hms(c.seconds)}</span></button></li>\n' for i, c in enumerate(chapters))
    texts = "".join(_chapter_text(i, c) for i, c in enumerate(chapters))
    key = f"{STORAGE_PREFIX}{book_dir.name}:{title}"
    data = {"key": key, "formats": report.get("formats", []),
            "types": MEDIA_TYPES, "book": {k: href(v) for k, v in book_files.items()},
            "chapters": [{"files": {k: href(v) for k, v in c.files.items()}, "offset": c.offset_s,
                          "seconds": c.seconds} for c in chapters],
            "flags": _flags_data(book_dir, title, key)}
    body = (f'{head}\n<main class="player">\n<nav class="chapters" aria-label="chapters"><ol>\n{nav}</ol></nav>\n'
            f'<section class="reader">\n<audio id="audio" controls preload="metadata"></audio>\n{silent}'
            '<p class="keys">space: play / pause · ← →: previous / next sentence · click a sentence to play '
            f'from it · ⚑ after a sentence: flag it for a re-take{_marks_legend(chapters)}</p>\n'
            f'<div id="text">\n{texts}</div>\n'
            f"{FLAGS_PANEL}</section>\n</main>\n"
            f"{_summary(book_table(book_dir))}\n{json_script('player-data', data)}")
    return document(f"{title} — {author}" if author else title, body, lang=info.get("language", "zh"),
                    scripts=("fix.js", "player.js"))


def _qa_link(book_dir: Path, rows: list[dict]) -> str:
    """The header's line linking qa.html (with its counts), when the book has one."""
    if not (book_dir / QA_PAGE).is_file():
        return ""
    s = qa_summary(rows)
    return (f'<p class="qa-link"><a href="{QA_PAGE}">quality checks</a>: {s["checked"]} of {s["total"]} segments '
            f'checked, {s["flagged"]} flagged, {s["retaken"]} re-taken</p>\n')


def _marks_legend(chapters: list[PlayerChapter]) -> str:
    """The keys line's note on the checks' marks, when some sentence carries one."""
    marks = {s.qa for c in chapters for p in c.paragraphs for s in p.sentences if s.qa in QA_TITLES}
    return (" · " + ", ".join(t for q, t in ((FLAG, "red line: flagged by the checks"),
                                             (INCONCLUSIVE, "dashed: the checks could not decide")) if q in marks)
            if marks else "")


def _flags_data(book_dir: Path, title: str, key: str) -> dict:
    """What the page's flag list needs: its storage key, the fix command's head and option (the flagged C.S names
    go between them; static/fix.js adds --out), the download's file name, its first line (a comment naming the
    book) and the command that reads it (fix --from, also a comment line of the file)."""
    book, file = fix_book(book_dir), FLAGS_FILE.format(folder=book_dir.name)
    return {"key": key + FLAGS_SUFFIX, "head": fix_command(book, []), "option": FLAGS_OPTION, "file": file,
            "title": f"# {title}: segments flagged in the player, one C.S per line",
            "from": fix_command(book, [], f"--from {shlex.quote(file)} {FLAGS_OPTION}")}


FLAGS_PANEL = """<section id="flags" aria-labelledby="flags-title">
<h2 id="flags-title">Flagged for a re-take: <span id="flag-count">0</span></h2>
<p id="flags-empty" class="keys">Nothing flagged.  ⚑ after a sentence (or Tab to it and press Enter) flags its segment;
flags stay in this browser.</p>
<ol id="flag-list"></ol>
<div id="flag-actions" hidden>
<p><label for="fix-command">Re-take them all:</label>
<button type="button" id="copy-fix">copy</button></p>
<textarea id="fix-command" readonly rows="2"></textarea>
<p><a id="flags-download" href="#">download the list</a> (for <code>fix --from</code>) ·
<button type="button" id="flags-clear">clear the flags</button></p>
<p class="keys">The command runs where the render ran (the book path is the one it was given); opened from a file
it names this output folder (--out). Served over http(s), add <code>--out OUT</code> when the book was not
rendered into ./output.</p>
</div>
</section>
"""


def _chapter_text(position: int, chapter: PlayerChapter) -> str:
    """The chapter's article: a paragraph per block, a span with its cue times per spoken sentence, then its
    flag button."""
    def html(s: Sentence) -> str:
        text = esc(s.text).replace("\n", "<br>")
        if s.start_ms is None or s.end_ms is None:
            return text
        mark = f" qa-{s.qa}" if s.qa in QA_TITLES else ""
        note = (f' title="{esc(QA_TITLES[s.qa] + (": " + s.reason if s.reason else ""))}"'
                if s.qa in QA_TITLES else "")
        return (f'<span class="s{" gap" if s.gap else ""}{mark}" data-start="{s.start_ms / 1000:.3f}" '
                f'data-end="{s.end_ms / 1000:.3f}" data-seg="{esc(s.segment)}"{note}>{text}</span>'
                f'<button type="button" class="flag" data-seg="{esc(s.segment)}" aria-pressed="false" '
                f'aria-label="flag {esc(s.segment)} for a re-take"></button>')

    paragraphs = "".join(("<p class=\"title\">" if p.title else "<p>") + "".join(html(s) for s in p.sentences)
                         + "</p>\n" for p in chapter.paragraphs)
    return f'<article class="chapter" data-chapter="{position}" hidden>\n{paragraphs}</article>\n'


def _summary(rows: list[dict]) -> str:
    """The per-chapter duration and loudness table (rows: tasks.site.status.book_table)."""

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

    path = inside(Path(book_dir), PAGE_NAME)
    write_bytes(path, book_page(book_dir).encode("utf-8"), keep_same=True)
    return path
