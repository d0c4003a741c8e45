"""Which engine a book is rendered with: manifest/engine.json, the CPU back-end its first render chose
(engine.api.EngineRecord: path, dtype, kind, the engine version).  Every later run of the book — a resume, each
shard, every fleet worker, `fix` — runs that back-end again (tasks/stages.py book_engine) instead of choosing one,
so one book is one engine whatever the machine, the worker or the moment.  A store mirrors it with the manifest
(tasks/fleet/mirror.py)."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, fields
from pathlib import Path

from engine.api import EngineRecord
from engine.atomic import write_bytes
from manifests.status import STATUS_DONE
from manifests.store import load, manifest_dir

ENGINE_RECORD = "engine.json"          # in the book's manifest dir: the record of the book's CPU engine


def record_engine(book_dir: str | Path, record: EngineRecord) -> bool:
    """Keep `record` as the book's engine (manifest/engine.json, atomically; unchanged: untouched).  Returns
    whether it changed."""
    mdir = manifest_dir(book_dir)
    if read_engine(book_dir) == record:
        return False
    mdir.mkdir(parents=True, exist_ok=True)
    write_bytes(mdir / ENGINE_RECORD, (json.dumps(asdict(record), indent=1) + "\n").encode("utf-8"), durable=True)
    return True


def read_engine(book_dir: str | Path) -> EngineRecord | None:
    """The book's recorded engine; None without one (or an unreadable one: the book then behaves as one rendered
    before records, tasks/stages.py)."""
    try:
        data = json.loads((manifest_dir(book_dir) / ENGINE_RECORD).read_text(encoding="utf-8"))
        return EngineRecord(**{f.name: data[f.name] for f in fields(EngineRecord)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def row_versions(book_dir: str | Path) -> list[str]:
    """The engine versions of the book's manifest rows, those of rows still to render first, most rows first."""
    rows = load(book_dir).to_pylist() if Path(book_dir).is_dir() else []
    todo = Counter(r["engine_version"] for r in rows if r["status"] != STATUS_DONE)
    done = Counter(r["engine_version"] for r in rows if r["status"] == STATUS_DONE)
    return list(dict.fromkeys([v for v, _ in todo.most_common()] + [v for v, _ in done.most_common()]))
