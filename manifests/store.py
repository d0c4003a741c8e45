"""Manifest storage: Arrow schema, atomic part-file commits, latest-state reads, compaction."""
from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.atomic import atomic_path
from engine.units import estimate_seconds
from manifests.crashpoints import crashpoint
from manifests.status import STATUS_DONE, STATUS_FAILED, STATUS_PENDING  # noqa: F401 — manifests.STATUS_* for scripts

MANIFEST_DIRNAME = "manifest"
# part-<seq>.parquet, or part-<seq>-<writer>.parquet for one of several concurrent writers (shards): seq is one
# more than the highest part the writer sees, so two writers may pick the same seq; the writer tag keeps their
# names apart (locally and in a store) and orders them after the untagged part of that seq.
PART_RE = re.compile(r"^part-(\d{8})(?:-([0-9a-z]+))?\.parquet$")
WRITER_RE = re.compile(r"^[0-9a-z]+$")

SCHEMA = pa.schema([
    ("plan_id", pa.string()),          # the plan this row belongs to (a new plan replaces the segment set)
    ("chapter", pa.int32()),           # chapter index, 0-based, reading order
    ("chapter_title", pa.string()),
    ("segment", pa.int32()),           # segment index within the chapter, 0-based
    ("text", pa.string()),             # normalized text the engine speaks
    ("source_text", pa.string()),      # the original text (subtitles)
    ("pause_after", pa.string()),      # clause | sentence | paragraph | chapter (+ "@seconds" a direction set)
    ("content_key", pa.string()),      # hash(text, voice, seed, engine version[, controls]): names the audio file
    ("status", pa.string()),           # pending | done | failed
    ("audio_path", pa.string()),       # relative to the book dir
    ("samples", pa.int64()),           # at SAMPLE_RATE
    ("duration_s", pa.float64()),
    ("voice_id", pa.string()),
    ("spk_emb", pa.string()),          # the voice itself (ChatTTS speaker embedding string)
    ("seed", pa.int64()),
    ("engine_version", pa.string()),
    ("error", pa.string()),
    ("attempts", pa.int32()),
    ("role", pa.string()),             # narrator | dialogue (a cast); the row's voice is voice_id/spk_emb
    ("speaker", pa.string()),          # dialogue: the speaker the text names, "" when none
    # proof (tasks/qa): the take kept and what the checks heard.  Every take's audio and check result live beside
    # each other in segments/ (tasks/bookdir.take_relpath, check_relpath); `takes` lists them without embeddings
    ("take", pa.int32()),              # the take whose audio is audio_path, 1-based (0: none yet)
    ("takes", pa.string()),            # JSON list, one object per take tried: take, seed, audio_path, samples,
                                       #   checks, transcript, cer, similarity, verdict, reason
    ("qa", pa.string()),               # the kept take's verdict: pass | flag | inconclusive | "" (not checked)
    ("qa_checks", pa.string()),        # the checks run on the kept take, comma-separated: duration,asr,drift
    ("transcript", pa.string()),       # what the ASR heard in the kept take ("" when not transcribed)
    ("cer", pa.float64()),             # the kept take's error rate against `text` (null: not transcribed)
    ("similarity", pa.float64()),      # its speaker-embedding cosine to the voice's reference (null: not measured)
    # controls (--speed, --refine, a direction file: tasks/plan/direction.py)
    ("controls", pa.string()),         # engine.api.Controls.key(): the settings that differ from the defaults ("")
    ("refined", pa.string()),          # the refine pass's text the engine spoke ("" : not refined)
])
# Columns added after the first manifests, and the value a part written without them means.  A done row of a
# manifest before takes is take 1 (its audio is audio_relpath(content_key)): load() fills `take` from status.
COLUMN_DEFAULTS = {"role": "narrator", "speaker": "", "takes": "[]", "qa": "", "qa_checks": "", "transcript": "",
                   "controls": "", "refined": ""}


def manifest_dir(book_dir: str | Path) -> Path:
    return Path(book_dir) / MANIFEST_DIRNAME


def part_order(name: str) -> tuple[int, str] | None:
    """A part file name's place in the manifest's order, (seq, writer); None for anything else."""
    m = PART_RE.match(name)
    return (int(m.group(1)), m.group(2) or "") if m else None


def _parts(mdir: Path) -> list[tuple[tuple[int, str], Path]]:
    if not mdir.is_dir():
        return []
    return sorted((order, p) for p in mdir.iterdir() if (order := part_order(p.name)) is not None)


def _as_table(rows: Iterable[Mapping]) -> pa.Table:
    cols: dict[str, list] = {f.name: [] for f in SCHEMA}
    for r in rows:
        for name in cols:
            cols[name].append(r.get(name, COLUMN_DEFAULTS.get(name)))
    return pa.table(cols, schema=SCHEMA)


def commit(book_dir: str | Path, rows: Iterable[Mapping], writer: str = "") -> Path | None:
    """Append the new state of some rows as one new part file. Returns its path (None when rows is empty).
    writer: "" for the book's one writer, else a tag ([0-9a-z]+) unique to one of several writers that commit
    disjoint rows at the same time (shards, tasks/fleet/shards.py)."""
    if writer and not WRITER_RE.match(writer):
        raise ValueError(f"manifest writer tag {writer!r}: use lowercase letters and digits")
    table = rows if isinstance(rows, pa.Table) else _as_table(rows)
    if table.num_rows == 0:
        return None
    mdir = manifest_dir(book_dir)
    mdir.mkdir(parents=True, exist_ok=True)
    parts = _parts(mdir)
    seq = parts[-1][0][0] + 1 if parts else 1
    dest = mdir / (f"part-{seq:08d}-{writer}.parquet" if writer else f"part-{seq:08d}.parquet")
    # fsynced (a committed row is never rendered again); killed between write and rename: a `.tmp-` file
    # that PART_RE ignores and the next render removes
    with atomic_path(dest, durable=True, before_replace=lambda: crashpoint("commit")) as tmp:
        pq.write_table(table.cast(SCHEMA), str(tmp), compression="zstd")
    listener = _listeners.get(os.path.abspath(book_dir))
    if listener is not None:
        listener(dest)
    return dest


_listeners: dict[str, Callable[[Path], None]] = {}     # abspath(book_dir) -> called with each new part


@contextmanager
def on_commit(book_dir: str | Path, listener: Callable[[Path], None]):
    """Call listener(part) after each part committed into book_dir, while the block runs (the store's
    publisher, tasks/fleet/mirror.py: a part is published as soon as it is in place)."""
    key = os.path.abspath(book_dir)
    _listeners[key] = listener
    try:
        yield
    finally:
        _listeners.pop(key, None)


def _read_parts(mdir: Path) -> list[tuple[tuple[int, str], pa.Table]]:
    out = []
    for seq, path in _parts(mdir):
        try:
            out.append((seq, _with_defaults(pq.read_table(path, schema=SCHEMA))))
        except (OSError, pa.ArrowException) as e:
            warnings.warn(f"{path}: unreadable manifest part skipped ({e})", RuntimeWarning, stacklevel=3)
    return out


def _with_defaults(table: pa.Table) -> pa.Table:
    """A part written before a column existed reads it as nulls: give them the value they mean."""
    for name, value in COLUMN_DEFAULTS.items():
        i = table.schema.get_field_index(name)
        if table.column(i).null_count:
            table = table.set_column(i, name, pc.fill_null(table.column(i), value))
    i = table.schema.get_field_index("take")
    if table.column(i).null_count:         # before takes: a done row's audio is its one take
        done = pc.cast(pc.equal(table.column("status"), STATUS_DONE), pa.int32())
        table = table.set_column(i, "take", pc.fill_null(table.column(i), done))
    return table


def load(book_dir: str | Path) -> pa.Table:
    """One row per segment of the latest plan, each in its latest state, sorted by (chapter, segment).

    The latest plan is the plan_id of the newest readable part of the book's one writer (untagged: plans
    and compactions; a shard's tagged parts only update rows, so a shard left over from an older plan cannot
    bring that plan back); rows of older plans are history."""
    parts = _read_parts(manifest_dir(book_dir))
    parts = [(order, t) for order, t in parts if t.num_rows]
    if not parts:
        return SCHEMA.empty_table()
    newest = next((t for (_, writer), t in reversed(parts) if not writer), parts[-1][1])
    plan_id = newest.column("plan_id")[0].as_py()
    latest: dict[tuple[int, int], dict] = {}
    for _, table in parts:
        for r in table.to_pylist():
            if r["plan_id"] == plan_id:
                latest[(r["chapter"], r["segment"])] = r
    return _as_table(latest[k] for k in sorted(latest))


def compact(book_dir: str | Path) -> Path | None:
    """Fold every part into one new part holding the latest state, then drop the old parts.  Only while no
    other writer commits (the book's one render, or a sharded render's parent once its shards ended)."""
    mdir = manifest_dir(book_dir)
    old = _parts(mdir)
    if len(old) <= 1:
        return old[0][1] if old else None
    table = load(book_dir)
    dest = commit(book_dir, table)
    for _, p in old:
        p.unlink(missing_ok=True)
    return dest


def summary(table: pa.Table) -> list[dict]:
    """Per chapter: title, segments done / pending / failed, rendered and remaining audio seconds (estimated)."""

    chapters: dict[int, dict] = {}
    for r in table.to_pylist():
        c = chapters.setdefault(r["chapter"], {"chapter": r["chapter"], "title": r["chapter_title"], "done": 0,
                                               "pending": 0, "failed": 0, "done_s": 0.0, "remaining_s": 0.0})
        c[r["status"]] = c.get(r["status"], 0) + 1
        if r["status"] == STATUS_DONE:
            c["done_s"] += r["duration_s"] or 0.0
        else:
            c["remaining_s"] += estimate_seconds(r["text"])
    return [chapters[k] for k in sorted(chapters)]
