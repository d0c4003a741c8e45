"""One book over several workers: which rows each shard renders, and the shard file that lets a sharded
render's shards write into a book their parent holds.  Plain functions; flows/shards.py starts the shards.

    split    the rows still to render, grouped by content key (a repeated sentence is one render, in one
             shard), dealt to N shards largest first, each to the shard with the fewest expected tokens so far
             (engine.units.expected_tokens): deterministic, disjoint, complete, and no shard more than one
             group's tokens above another
    start    the parent, holding the book (its flock, its store lease, its concurrency slot), writes
             OUT/<book>/.shards.json: a fresh token, the plan, each shard's content keys
    shard    a shard run reads it back with the token it was given: a token that is not the file's (a shard
             left over from an earlier render) is refused, so only the current render's shards write
    gather   the parent, once every shard ended: nothing may be left to render; the file goes

Shards commit tagged manifest parts (`part-<seq>-<token>s<i>.parquet`, manifests/store.py), so their parts never
collide, and only the parent compacts, after all of them."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import read_json, write_bytes
from engine.units import expected_tokens
from manifests.status import STATUS_DONE, STATUS_FAILED
from manifests.store import compact, load
from tasks.bookdir import SHARD_FILE
from tasks.errors import RenderFailed
from tasks.fleet.mirror import book_view
from tasks.fleet.storage import Store, is_url
from tasks.ingest import load_book
from tasks.plan.prepare import segment_book
from tasks.plan.rows import to_render
from tasks.synthesize.options import GuardOptions
from tasks.text.segment import SegmentOptions, book_options

MAX_SHARDS = 64               # shards of one book at most
TOKEN_BYTES = 4               # random bytes of a sharded render's token (8 hex characters)


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` of one sharded render: the content keys it renders."""
    token: str
    index: int
    count: int
    keys: frozenset[str]

    @property
    def writer(self) -> str:
        return writer_tag(self.token, self.index)


def writer_tag(token: str, index: int) -> str:
    """Shard `index`'s manifest writer tag (manifests.commit) and scratch folder name; ValueError for a token
    that is not one tasks.fleet.shards.start makes."""
    if not (len(token) == 2 * TOKEN_BYTES and all(c in "0123456789abcdef" for c in token)):
        raise ValueError(f"shard token {token!r}: not a token of a sharded render")
    return f"{token}s{index}"


@dataclass(frozen=True)
class ShardPlan:
    token: str
    plan_id: str
    shards: tuple[tuple[str, ...], ...]      # content keys per shard
    done: int                                # rows already done when the plan was made

    def shard(self, index: int) -> Shard:
        return Shard(self.token, index, len(self.shards), frozenset(self.shards[index]))


def check_count(shards: int) -> int:
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be 1 to {MAX_SHARDS}, not {shards}")
    return shards


def shard_count(segments: int, segments_per_shard: int | None, max_shards: int = MAX_SHARDS) -> int:
    """Shards for a book with `segments` left to render: one per segments_per_shard (None: 1), at most
    max_shards (the nightly's deployment parameters)."""
    if segments_per_shard is None:
        return 1
    if segments_per_shard < 1:
        raise ValueError(f"segments_per_shard must be at least 1, not {segments_per_shard}")
    return max(1, min(check_count(max_shards), -(-segments // segments_per_shard)))


def segments_left(book: Path, book_dir: str | Path, planned: bool) -> int:
    """The segments a render of book into book_dir (a folder, or a book's URL in a store: OUT_URL/<slug>) has
    left: with planned (its manifest plans this very source), its rows still to render; else the book's segments
    (read and segmented with default options, in its reading language as --language auto resolves it)."""
    def left(folder: str | Path) -> int:
        return len(to_render(load(folder).to_pylist()))

    if planned and is_url(book_dir):
        root, slug = str(book_dir).rstrip("/").rsplit("/", 1)
        with book_view(Store(root), slug) as view:
            return left(view)
    if planned and (Path(book_dir) / "manifest").is_dir():
        return left(book_dir)
    whole = load_book(book)
    return len(segment_book(whole, book_options(whole, SegmentOptions()))[0])


def split(rows: list[dict], n: int) -> list[list[str]]:
    """The content keys of rows (each once) dealt to n shards, balanced by expected tokens."""

    weight: dict[str, int] = {}
    for r in rows:
        weight.setdefault(r["content_key"], expected_tokens(r["text"]))
    shards: list[list[str]] = [[] for _ in range(check_count(n))]
    load = [0] * n                                         # expected tokens per shard so far
    for key in sorted(weight, key=lambda k: (-weight[k], k)):
        i = min(range(n), key=lambda j: (load[j], j))
        shards[i].append(key)
        load[i] += weight[key]
    return shards


def start(book_dir: Path, n: int, guard: GuardOptions) -> ShardPlan:
    """Split what is left to render into n shards and write the shard file (a new token)."""
    rows = load(book_dir).to_pylist()
    plan = ShardPlan(secrets.token_hex(TOKEN_BYTES), rows[0]["plan_id"] if rows else "",
                     tuple(tuple(keys) for keys in split(to_render(rows, guard.max_attempts), n)),
                     sum(r["status"] == STATUS_DONE for r in rows))
    data = {"token": plan.token, "plan_id": plan.plan_id, "done": plan.done, "shards": [list(s) for s in plan.shards]}
    write_bytes(Path(book_dir) / SHARD_FILE, json.dumps(data).encode(), durable=True)
    return plan


def shard(book_dir: Path, index: int, token: str) -> Shard:
    """Shard `index` of the book's current sharded render, if `token` is its token (else RenderFailed)."""
    path = Path(book_dir) / SHARD_FILE
    data = read_json(path)                               # {} when missing or unreadable: refused
    if data.get("token") != token:
        raise RenderFailed(str(path), f"shard token {token} is not the book's current sharded render's; "
                                      "this shard's render is over (rerun the parent render)")
    if not 0 <= index < len(data["shards"]):
        raise ValueError(f"shard {index}: the render has {len(data['shards'])} shards")
    return ShardPlan(token, data["plan_id"], tuple(tuple(s) for s in data["shards"]), data["done"]).shard(index)


def gather(book_dir: Path, plan: ShardPlan, guard: GuardOptions) -> dict:
    """After every shard ended: counts for the whole book (RenderFailed when rows are still to render, e.g.
    a shard was refused); the shard file is removed and the manifest compacted."""
    rows = load(book_dir).to_pylist()
    left = to_render(rows, guard.max_attempts)
    if left:
        raise RenderFailed(str(book_dir), f"{len(left)} segments were not rendered by the shards; rerun to "
                                          "render only those")
    (Path(book_dir) / SHARD_FILE).unlink(missing_ok=True)
    compact(book_dir)
    done = sum(r["status"] == STATUS_DONE for r in rows)
    return {"rendered": done - plan.done, "adopted": 0, "already_done": plan.done,
            "failed": sum(r["status"] == STATUS_FAILED for r in rows), "total": len(rows)}
