"""The output root's catalogue: `OUT/index.html` (every book with its status, duration, formats and a link to
its player) and `OUT/feed.xml` (the podcast feed, tasks.site.feed).  `chattts-render catalogue OUT`, the
nightly flow and each render-book run it starts write both, atomically, after every book.

Writers take an flock on OUT (blocking) for the scan and the two writes, so that the last one to write is the
last one to have looked: two books finishing together never leave a page that misses one of them.  OUT may be a
store URL (`catalogue s3://…`, write_store_catalogue): the books are read from the store and both files uploaded
back; there is no lock across machines there (two writers at once each upload a whole file; the last one wins)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from engine.atomic import write_bytes
from engine.units import hms
from manifests.lock import BookLock
from tasks.errors import BookError, OutputError, StoreError
from tasks.fleet.mirror import catalogue_view
from tasks.fleet.storage import describe
from tasks.site.feed import FEED_NAME, feed_items, feed_xml
from tasks.site.html import document, esc, href
from tasks.site.library import DONE, FAILED, BookEntry, book_entry, scan_output

PAGE_NAME = "index.html"


@dataclass(frozen=True)
class SiteOptions:
    base_url: str | None = None      # http(s)://host[/path] the output root is served at; None: relative links
    title: str | None = None         # the page's and the feed's title; None: "Audiobooks: <OUT's name>"

    def __post_init__(self) -> None:
        """Raise ValueError naming the problem: every instance is valid."""
        if self.base_url is not None:
            u = urlsplit(self.base_url)
            if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
                raise ValueError(f"--base-url {self.base_url!r} is not an http(s)://host[/path] URL")
        if self.title is not None and not self.title.strip():
            raise ValueError("the catalogue title is empty")

    def link(self, folder: str | None, name: str) -> str:
        """The URL of OUT/[folder/]name: under base_url when set, else relative to OUT."""
        rel = href(*([folder] if folder else []), name)
        return f"{self.base_url.rstrip('/')}/{rel}" if self.base_url else rel


def catalogue_page(entries: list[BookEntry], title: str) -> str:
    """OUT/index.html: one row per book; links are relative (the page works from file:// and over HTTP)."""

    rows = []
    for e in entries:
        name = esc(e.title)
        if e.player:
            name = f'<a href="{esc(href(e.folder, e.player))}">{name}</a>'
        if e.qa:
            name += f' <a class="qa" href="{esc(href(e.folder, e.qa))}">quality checks</a>'
        cover = f'<img src="{esc(href(e.folder, e.cover))}" alt="">' if e.cover else ""
        if e.status == DONE:
            status = "done" + (f" ({esc(e.reason)})" if e.reason else "")
        elif e.status == FAILED:
            status = f"failed: {esc(e.reason)}"
        else:
            status = f"partial {e.percent:g} %" + (" (rendering now)" if e.rendering else "")
        download = f'<a href="{esc(href(e.folder, e.enclosure))}">{esc(e.enclosure_format)}</a>' if e.enclosure else ""
        rows.append(f'<tr class="book" data-folder="{esc(e.folder)}" data-status="{esc(e.status)}"><td>{cover}</td>'
                    f'<td>{name}<br><span class="muted">{esc(e.author)}</span></td>'
                    f'<td class="status status-{esc(e.status)}">{status}</td><td class="num">{hms(e.seconds)}</td>'
                    f'<td>{esc(", ".join(e.formats))}</td><td>{download}</td></tr>\n')
    done = len(feed_items(entries))
    body = (f"<h1>{esc(title)}</h1>\n<p class=\"muted\">{len(entries)} books, {done} finished · "
            f'<a href="{FEED_NAME}" type="application/rss+xml">podcast feed</a></p>\n'
            '<table class="books"><thead><tr><th></th><th>book</th><th>status</th><th class="num">duration</th>'
            f"<th>formats</th><th>download</th></tr></thead>\n<tbody>\n{''.join(rows)}</tbody></table>")
    return document(title, body)


def write_catalogue(out: str | Path, opts: SiteOptions = SiteOptions()) -> list[BookEntry]:
    """Scan OUT and write OUT/index.html and OUT/feed.xml (each left alone when unchanged); the entries.
    BookError when OUT is not a folder (nothing is created), OutputError when it cannot be written."""
    out = Path(out)
    if not out.is_dir():
        raise BookError(str(out), "no such output folder" if not out.exists() else "not a folder")
    title = opts.title or f"Audiobooks: {out.resolve().name}"
    lock = BookLock(out).acquire(wait=True)
    try:
        entries = scan_output(out)
        language = next((e.language for e in entries if e.language), "zh").lower()
        try:
            write_bytes(out / PAGE_NAME, catalogue_page(entries, title).encode("utf-8"), keep_same=True)
            write_bytes(out / FEED_NAME, feed_xml(entries, title, opts.link, language), keep_same=True)
        except OSError as e:
            raise OutputError(str(out), f"cannot write the catalogue ({e.strerror or e})") from None
    finally:
        lock.release()
    return entries


def write_store_catalogue(store, opts: SiteOptions = SiteOptions(), scratch: str | None = None) -> list[BookEntry]:
    """write_catalogue for an output root in a store (a tasks.fleet.storage.Store): each book's manifest, book.json
    and report.json are read from the store (tasks.fleet.mirror.catalogue_view; its lease says whether it renders
    now), and index.html and feed.xml are uploaded to the root, each only when it changed.  StoreError when the
    store cannot be used, BookError when nothing is stored under the root (nothing is uploaded then)."""

    store.check()
    title = opts.title or f"Audiobooks: {store.root.rsplit('/', 1)[-1]}"
    with catalogue_view(store, scratch) as (tmp, books):
        entries = [e for e in (book_entry(d, stat, rendering) for d, stat, rendering in books) if e is not None]
        language = next((e.language for e in entries if e.language), "zh").lower()
        bodies = {PAGE_NAME: catalogue_page(entries, title).encode("utf-8"),
                  FEED_NAME: feed_xml(entries, title, opts.link, language)}
        for name, body in bodies.items():
            key = store.key(name)
            try:
                if store.fs.isfile(key) and store.fs.cat_file(key) == body:
                    continue                                 # unchanged: left alone, as in a folder
                (tmp / name).write_bytes(body)
                store.put(tmp / name, key)
            except Exception as e:  # noqa: BLE001 — every back-end's errors become one line
                raise StoreError(store.url, f"cannot write the catalogue's {name}: {describe(e)}") from None
    return entries
