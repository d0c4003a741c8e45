"""The QA page, `OUT/<book>/qa.html`, and report.json's "qa" object: what the checks (tasks/qa) found.

Both come from one function, qa_summary(rows) over the manifest's rows, so the page and the report agree:
segments checked, passed, re-taken (a take after the first kept, or more than one tried), still flagged,
inconclusive and not checked; the kept takes' CER and, per voice, their speaker similarity as histograms; and
every flagged or re-taken segment.  The page adds, for each of those, its takes' audio, the intended text, what
the ASR heard with the differences marked (tasks.qa.compare's ops: <del> intended but not heard, <ins> heard
but not intended) and the `chattts-render fix` commands that re-take it or choose a take.

A segment is named `C.S` wherever a user sees it (1-based chapter and segment, segment_name).  The fix commands
name the book as book.json's `source_path` has it (the path the render was given, so they run from where the
render ran); the page's script (static/fix.js) adds `--out` with the folder the page lies in when it is opened
from a file (the output root; over http(s) it is not known and the page says so).  Static and offline like the
player: one self-contained file, relative links to the takes' audio in segments/, its bytes a function of the
book dir alone (the same book rendered into two output roots writes the same page).
"""
from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

from engine.atomic import write_bytes
from manifests.store import load
from tasks.audio.names import inside
from tasks.book import segment_name as book_segment_name
from tasks.bookdir import PAGE_NAME, QA_PAGE, READING_LANGUAGE, read_book_json
from tasks.plan.rows import said
from tasks.qa.compare import compare
from tasks.site.html import document, esc, href

FIX = "chattts-render fix"
CER_RANGE = (0.0, 1.0)            # the CER histogram's span; a CER above 1 (insertions) counts in the last bar
CER_BINS = 10
SIMILARITY_RANGE = (0.0, 1.0)     # cosine similarity to the voice's reference; below 0 counts in the first bar
SIMILARITY_BINS = 20
DIGITS = 4                        # decimals of a CER or a similarity in report.json
SHOWN_DIGITS = 3                  # and on the page
PASS, FLAG, INCONCLUSIVE = "pass", "flag", "inconclusive"
HIST_W, HIST_H, HIST_LABEL_H = 240, 56, 14      # px: an SVG histogram's plot area and its axis labels


def segment_name(row: dict) -> str:
    """A segment's name as the player, this page and `fix` show it: chapter.segment, both 1-based."""
    return book_segment_name(row["chapter"], row["segment"])


def takes_of(row: dict) -> list[dict]:
    """The takes tried for a row, in take order (the manifest's `takes` JSON)."""
    return json.loads(row.get("takes") or "[]")


def is_retaken(row: dict) -> bool:
    """A take after the first is kept, or more than one take was tried."""
    return (row.get("take") or 0) > 1 or len(takes_of(row)) > 1


def kept_take(row: dict) -> dict:
    """The `takes` entry of the take kept ({} when the row lists none)."""
    return next((t for t in takes_of(row) if t.get("take") == row.get("take")), {})


def _round(v: float | None) -> float | None:
    return None if v is None else round(float(v), DIGITS)


def _histogram(values: list[float], span: tuple[float, float], bins: int) -> dict:
    """n, min, median, max and the counts of `bins` equal bars over `span` (values outside it in the end bars)."""
    lo, hi = span
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / (hi - lo) * bins)))] += 1
    return {"n": len(values), "min": _round(min(values)) if values else None,
            "median": _round(statistics.median(values)) if values else None,
            "max": _round(max(values)) if values else None, "lo": lo, "hi": hi, "counts": counts}


def _voice_label(rows: list[dict]) -> str:
    """Who speaks with a voice: its rows' roles and speakers, in reading order ("narrator", "张三", "dialogue")."""
    labels: list[str] = []
    for r in rows:
        role = r.get("role") or "narrator"
        label = r.get("speaker") or role
        if label not in labels:
            labels.append(label)
    return ", ".join(labels)


def qa_summary(rows: list[dict]) -> dict:
    """What the checks found in a book (rows: manifests.load(...).to_pylist(), in reading order): the counts,
    the kept takes' CER histogram, the similarity histogram per voice, and every flagged or re-taken segment
    (C.S, verdict, cer, similarity, take kept, takes tried, reason).  report.json's "qa" and qa.html's summary."""
    verdicts = [r.get("qa") or "" for r in rows]
    by_voice: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("similarity") is not None:
            by_voice.setdefault(r["voice_id"], []).append(r)
    listed = [r for r in rows if r.get("qa") == FLAG or is_retaken(r)]
    return {
        "total": len(rows),
        "checked": sum(v != "" for v in verdicts),
        "passed": verdicts.count(PASS),
        "retaken": sum(is_retaken(r) for r in rows),
        "flagged": verdicts.count(FLAG),
        "inconclusive": verdicts.count(INCONCLUSIVE),
        "not_checked": verdicts.count(""),
        "cer": _histogram([r["cer"] for r in rows if r.get("cer") is not None], CER_RANGE, CER_BINS),
        "similarity": [{"voice": v, "label": _voice_label(rs),
                        **_histogram([r["similarity"] for r in rs], SIMILARITY_RANGE, SIMILARITY_BINS)}
                       for v, rs in by_voice.items()],
        "segments": [{"segment": segment_name(r), "verdict": r.get("qa") or "", "cer": _round(r.get("cer")),
                      "similarity": _round(r.get("similarity")), "take": r.get("take") or 0,
                      "takes": len(takes_of(r)), "reason": kept_take(r).get("reason") or ""} for r in listed],
    }


def qa_line(book_dir: Path, rows: list[dict]) -> str:
    """The line a render with --qa ends with: what the checks found, and where to look."""
    q = qa_summary(rows)
    return (f"{book_dir}: qa: {q['checked']} segments checked, {q['passed']} passed, {q['retaken']} re-taken, "
            f"{q['flagged']} still flagged, {q['inconclusive']} inconclusive; see {Path(book_dir) / QA_PAGE}")


def fix_command(book: str, names: list[str], option: str = "") -> str:
    """`chattts-render fix BOOK C.S... [option]`, the book's path shell-quoted (the page's script adds --out)."""
    return " ".join([FIX, shlex.quote(book), *names, *([option] if option else [])])


def fix_book(book_dir: Path) -> str:
    """The book file `fix` is given: book.json's source_path ("BOOK" when book.json does not say)."""
    return read_book_json(book_dir).get("source_path") or "BOOK"


def compare_language(language: str) -> str:
    """tasks.qa.compare's language for a book's language tag (English by words, anything else as Chinese)."""
    return "en" if (language or "").lower().startswith("en") else "zh"


def marked_transcript(intended: str, transcript: str, language: str) -> str:
    """The transcript as HTML with the differences from the intended text marked (<del> intended but not heard,
    <ins> heard but not intended); the plain transcript when the comparison is not available.  The ops cover
    what is compared (syllables, words), not the punctuation and spaces between them: each op's heard text is
    found in the transcript after the previous one, and what lies between is kept as it is."""
    if not transcript:
        return esc(transcript)
    try:
        ops = compare(intended, transcript, language).ops
    except Exception:  # noqa: BLE001 — a comparison that cannot run here (its extra missing) leaves plain text
        return esc(transcript)
    out, at = [], 0
    for op, ref, hyp in ops:
        found = transcript.find(hyp, at) if hyp else -1
        if found >= 0:
            out.append(esc(transcript[at:found]))
            at = found + len(hyp)
        if op == "equal":
            out.append(esc(hyp))
        else:
            out.append((f"<del>{esc(ref)}</del>" if ref and op in ("sub", "del") else "")
                       + (f"<ins>{esc(hyp)}</ins>" if hyp and op in ("sub", "ins") else ""))
    return "".join(out) + esc(transcript[at:])


# ----------------------------------------------------------------------------------------------- the page

def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.{SHOWN_DIGITS}f}"


def histogram_svg(h: dict, label: str) -> str:
    """A histogram (qa_summary's) as a small inline SVG: one bar per bin, each with its range and count."""
    bins = len(h["counts"])
    width = HIST_W / bins
    top = max(h["counts"]) or 1
    step = (h["hi"] - h["lo"]) / bins
    bars = "".join(
        f'<rect x="{i * width + 1:.1f}" y="{HIST_H - c / top * HIST_H:.1f}" width="{width - 2:.1f}" '
        f'height="{c / top * HIST_H:.1f}"><title>{h["lo"] + i * step:.2f}–{h["lo"] + (i + 1) * step:.2f}: {c}'
        "</title></rect>" for i, c in enumerate(h["counts"]))
    y = HIST_H + HIST_LABEL_H - 3
    return (f'<svg class="hist" viewBox="0 0 {HIST_W} {HIST_H + HIST_LABEL_H}" width="{HIST_W}" '
            f'height="{HIST_H + HIST_LABEL_H}" role="img" aria-label="{esc(label)}: {h["n"]} segments">'
            f'{bars}<line x1="0" y1="{HIST_H}" x2="{HIST_W}" y2="{HIST_H}"></line>'
            f'<text x="0" y="{y}">{h["lo"]:g}</text><text x="{HIST_W}" y="{y}" text-anchor="end">{h["hi"]:g}</text>'
            "</svg>")


def _distribution(h: dict, title: str, note: str) -> str:
    stats = (f'n = {h["n"]} · min {_num(h["min"])} · median {_num(h["median"])} · max {_num(h["max"])}'
             if h["n"] else "nothing measured")
    return (f'<figure class="dist"><figcaption>{esc(title)} <span class="muted">({note})</span></figcaption>'
            f'{histogram_svg(h, title)}<p class="muted">{stats}</p></figure>\n')


COUNTS = (("checked", "checked"), ("passed", "passed"), ("retaken", "re-taken"), ("flagged", "still flagged"),
          ("inconclusive", "inconclusive"), ("not_checked", "not checked"))


def _copy(command: str) -> str:
    """A fix command and its copy button (static/qa.js adds --out to both: static/fix.js)."""
    return (f'<code class="cmd" data-fix="{esc(command)}">{esc(command)}</code> '
            f'<button type="button" class="copy" data-fix="{esc(command)}">copy</button>')


OUT_NOTE = ('<p class="keys">The commands run where the render ran (the book path is the one it was given); opened '
            "from a file they name this output folder (--out). Served over http(s), add <code>--out OUT</code> "
            "when the book was not rendered into ./output.</p>\n")


def _segment(row: dict, language: str, book: str, folder: Path) -> str:
    """One flagged or re-taken segment: its fields, texts, transcript, takes and fix commands."""
    name = segment_name(row)
    info = {"verdict": row.get("qa") or "not checked", "CER": _num(_round(row.get("cer"))),
            "similarity": _num(_round(row.get("similarity"))), "take kept": row.get("take") or "none",
            "reason": kept_take(row).get("reason") or ""}
    fields = "".join(f'<tr><th>{esc(k)}</th><td data-field="{esc(k)}">{esc(v)}</td></tr>' for k, v in info.items())
    intended = said(row)                         # the refine pass's text, when it ran; no control tokens
    texts = f'<p><span class="label">intended</span> <span class="intended">{esc(intended)}</span></p>'
    if row["source_text"].strip() != intended.strip():
        texts += f'<p><span class="label">book text</span> <span class="source">{esc(row["source_text"])}</span></p>'
    texts += ('<p><span class="label">heard</span> <span class="heard">'
              f'{marked_transcript(intended, row.get("transcript") or "", language)}</span></p>')
    takes = []
    for t in takes_of(row) or [{"take": row.get("take"), "audio_path": row["audio_path"]}]:
        path = t.get("audio_path") or ""
        audio = (f'<audio controls preload="none" src="{esc(href(*path.split("/")))}"></audio>'
                 if path and (folder / path).is_file() else '<span class="muted">(no audio)</span>')
        kept = t.get("take") == row.get("take")
        action = "kept" if kept else _copy(fix_command(book, [name], f"--take {t.get('take')}"))
        heard = marked_transcript(intended, t.get("transcript") or "", language)
        takes.append(f'<tr class="take{" kept" if kept else ""}" data-take="{esc(t.get("take"))}">'
                     f'<td>{esc(t.get("take"))}</td><td>{audio}</td><td>{esc(t.get("verdict") or "")}</td>'
                     f'<td class="num">{_num(_round(t.get("cer")))}</td>'
                     f'<td class="num">{_num(_round(t.get("similarity")))}</td>'
                     f'<td class="heard">{heard}</td><td>{esc(t.get("reason") or "")}</td><td>{action}</td></tr>')
    return (f'<section class="qa-seg" id="seg-{esc(name)}" data-segment="{esc(name)}" '
            f'data-verdict="{esc(row.get("qa") or "")}">\n'
            f'<h3>{esc(name)} <span class="muted">{esc(row["chapter_title"])}</span> '
            f'<span class="verdict verdict-{esc(row.get("qa") or "none")}">{esc(info["verdict"])}</span></h3>\n'
            f'<table class="fields">{fields}</table>\n{texts}\n'
            '<table class="takes"><thead><tr><th>take</th><th>listen</th><th>verdict</th><th class="num">CER</th>'
            '<th class="num">similarity</th><th>heard</th><th>reason</th><th>choose it</th></tr></thead>\n<tbody>'
            f'{"".join(takes)}</tbody></table>\n'
            f'<p class="retake">re-take it: {_copy(fix_command(book, [name], "--retake"))}</p>\n</section>\n')


def qa_page(book_dir: Path) -> str:
    """qa.html of a book (see the module docstring)."""
    book_dir = Path(book_dir)
    info = read_book_json(book_dir)
    rows = load(book_dir).to_pylist()
    s = qa_summary(rows)
    title = info.get("title") or book_dir.name
    language = compare_language(info.get(READING_LANGUAGE) or info.get("language", ""))
    book = fix_book(book_dir)
    counts = "".join(f'<div data-count="{k}"><dt>{label}</dt><dd>{s[k]}</dd></div>' for k, label in COUNTS)
    head = (f'<header class="qa"><h1>Quality checks — {esc(title)}</h1>\n'
            f'<p class="muted"><a href="{PAGE_NAME}">the player</a> · {s["total"]} segments</p></header>\n'
            f'<dl class="qa-counts">{counts}</dl>\n')
    if not s["checked"]:
        head += ('<p id="no-checks">No segment of this book has been checked: render it with the checks on '
                 '(--qa) to have every segment heard.</p>\n')
    dists = _distribution(s["cer"], "CER of the kept takes", "0: as intended; 1 or more: nothing right")
    for v in s["similarity"]:
        dists += _distribution(v, f"similarity, {v['label']}", f"voice {v['voice']}; 1: the reference itself")
    by_name = {segment_name(r): r for r in rows}
    listed = "".join(_segment(by_name[e["segment"]], language, book, book_dir) for e in s["segments"])
    every = [e["segment"] for e in s["segments"] if e["verdict"] == FLAG]
    batch = (f'<p>re-take every segment still flagged: {_copy(fix_command(book, every, "--retake"))}</p>\n'
             if every else "")
    none = '<p id="none-listed">None.</p>\n'
    body = (f"{head}<section class=\"dists\">\n{dists}</section>\n"
            f'<h2>Flagged or re-taken segments ({len(s["segments"])})</h2>\n'
            f'{OUT_NOTE if s["segments"] else ""}'
            '<p><label for="clipboard">Copied command:</label> <input id="clipboard" readonly value=""></p>\n'
            f"{batch}{listed or none}")
    return document(f"Quality checks — {title}", body, lang=info.get("language", "zh"), scripts=("fix.js", "qa.js"))


def write_qa_page(book_dir: Path) -> Path:
    """Write OUT/<book>/qa.html atomically (left alone when unchanged); its path."""
    path = inside(Path(book_dir), QA_PAGE)
    write_bytes(path, qa_page(book_dir).encode("utf-8"), keep_same=True)
    return path
