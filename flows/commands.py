"""What each `chattts-render` command does: a thin shell over flows.pipeline and the tasks' plain functions.
Each returns the exit code 0 or raises; flows/cli.py parses the arguments, runs COMMANDS[its name] and turns
errors into exit codes."""
from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import replace
from pathlib import Path

from engine.voice import parse_voice_spec
from flows.arguments import EXIT_OK, note_threads, params_of, render_params, usage
from flows.check import cmd_check
from flows.fix import cmd_fix
from flows.options import book_place, options, package_options
from flows.params import RenderParams
from flows.pipeline import audition, render
from flows.progress import TqdmProgress
from flows.studio import cmd_studio
from manifests.lock import BookLock
from manifests.store import load, summary
from tasks import stages
from tasks.audio.assemble import AssembleOptions
from tasks.errors import BookError
from tasks.fleet import storage
from tasks.fleet.attach import attached, load_manifest
from tasks.ingest import load_book
from tasks.plan.prepare import direct_book, select_chapters
from tasks.site.catalogue import FEED_NAME, PAGE_NAME, SiteOptions, write_catalogue, write_store_catalogue
from tasks.site.qa import qa_line
from tasks.site.status import format_status, summary_line
from tasks.synthesize.options import AuditionOptions
from tasks.text.inspect import format_inspect, inspect_book
from tasks.text.quotes import attribute_book, book_runs
from tasks.text.segment import book_options
from tasks.voice.cast import cast_report
from tasks.voice.voices import format_saved, save_voice, saved_voices


def prefect_server_configured() -> bool:
    """True when a Prefect API URL is set (env or the active profile) — without importing Prefect."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    try:
        profiles = tomllib.loads((home / "profiles.toml").read_text())
    except (OSError, ValueError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return bool(profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL"))


def cmd_render(a) -> int:
    params = render_params(a)
    opts = options(**params)
    note_threads(opts.engine)
    t0 = time.monotonic()
    progress = TqdmProgress()
    try:
        if prefect_server_configured():       # the flow renders the book as fetched here: a URL is fetched once
            from flows.render_book import render_book_flow

            result = {"book_dir": Path(render_book_flow(**{**params, "book": str(opts.book)}))}
        else:
            result = render(opts, on_done=progress)
    finally:
        progress.close()
    book_dir = result["book_dir"]
    print(summary_line(book_dir, summary(load(book_dir)), result, time.monotonic() - t0))
    if "retaken" in result:                             # the render heard its segments (--qa)
        print(qa_line(book_dir, load(book_dir).to_pylist()))
    if "store" in result:
        print(f"{result['store']}: published as it rendered ({result['published']} files, {result['publish_s']:.1f} s "
              f"uploading; {result['pull_s']:.1f} s pulling before the run)")
    return EXIT_OK


def cmd_status(a) -> int:
    p = params_of(a, "status")
    print(format_status(summary(_rendered(a.book, *book_place(a.book, p["out"], p["scratch"])))))
    return EXIT_OK


def cmd_inspect(a) -> int:
    opts = options(book=a.book, **params_of(a, "inspect"))
    book = load_book(opts.book, matter=opts.matter)
    seg = book_options(book, opts.segment, opts.language)                          # from the whole book
    runs = book_runs(book, quotes := attribute_book(book)) if opts.cast else None   # the whole book's names
    if opts.chapters:
        book = select_chapters(book, opts.chapters)
    report = inspect_book(book, seg, runs, segments=a.segments, polyphones=a.polyphones,
                          direct=lambda segs: direct_book(opts.prepare, segs))
    if a.segments:
        rendered(report["segments"], load_manifest(opts.book_dir, opts.store).to_pylist())
    if opts.cast:
        report["cast"] = cast_report(opts.cast, report.pop("parts"), quotes)
    print(json.dumps(report, ensure_ascii=False, indent=1) if a.json else format_inspect(report))
    return EXIT_OK


def rendered(entries: list[dict], rows: list[dict]) -> None:
    """Add to inspect's segment entries what a render of the book holds for them (a row at the same C.S with the
    same book text): its status, and the refine pass's text when it ran."""
    at = {(r["chapter"], r["segment"]): r for r in rows}
    for e in entries:
        r = at.get((e["chapter"], e["segment"]))
        if r is not None and r["source_text"] == e["source_text"]:
            e["status"] = r["status"]
            if r.get("refined"):
                e["refined"] = r["refined"]


def cmd_package(a) -> int:
    with usage():
        p = RenderParams(book=a.book, **params_of(a, "package"))
        pkg = package_options(p)
    book_dir, store = book_place(p.book, p.out, p.scratch)
    _rendered(a.book, book_dir, store)
    with BookLock(book_dir), attached(book_dir, store):
        stages.package(book_dir, AssembleOptions(), pkg, p.allow_gaps)
    print(f"{book_dir}: packaged as {', '.join(pkg.formats)}")
    return EXIT_OK


def cmd_voices(a) -> int:
    """Audition: candidate voices read one passage into OUT/<book>/voices/ (index.html, voices.json)."""
    opts = options(book=a.book, **params_of(a, "voices audition"))
    note_threads(opts.engine)
    with usage():
        aud = AuditionOptions(count=a.count, from_seed=a.from_seed, text=a.text)
    r = audition(opts, aud)
    for note in r["notes"]:
        print(note)
    print(f"{r['dir']}: {r['candidates']} voices ({r['rendered']} rendered, {r['cached']} from the cache); "
          f"open {r['dir'] / 'index.html'}")
    if "store" in r:
        print(f"{r['store']}: published ({r['published']} files)")
    return EXIT_OK


def cmd_voices_save(a) -> int:
    p = params_of(a, "voices save")
    spec = parse_voice_spec(p["voice"], clip_text=p["clip_text"])
    path = save_voice(a.name, spec if p["speed"] is None else replace(spec, speed=p["speed"]), force=a.force)
    print(f"saved voice {a.name} ({path}); render with --voice {a.name}")
    return EXIT_OK


def cmd_voices_list(a) -> int:
    print(format_saved(saved_voices()))
    return EXIT_OK


def _rendered(book: str, book_dir: Path, store: str | None):
    """The book's manifest table (in the store, with one); BookError naming `book` (as given) when it was never
    rendered into this output."""
    table = load_manifest(book_dir, store)
    if table.num_rows == 0:
        raise BookError(str(book), f"no render found in {store or book_dir}")
    return table


def cmd_catalogue(a) -> int:
    """OUT/index.html and OUT/feed.xml; OUT a folder or a store URL (read from the store, written back to it)."""

    with usage():
        site = SiteOptions(base_url=a.base_url)
    if storage.is_url(a.out):
        store = storage.Store(a.out)
        entries = write_store_catalogue(store, site, a.scratch)
        page: str | Path = store.url + "/" + PAGE_NAME
        feed: str | Path = store.url + "/" + FEED_NAME
    else:
        out = Path(storage.local_path(a.out))
        entries = write_catalogue(out, site)
        page, feed = out / PAGE_NAME, out / FEED_NAME
    counts = {s: sum(e.status == s for e in entries) for s in ("done", "partial", "failed")}
    print(f"{page}, {feed}: {len(entries)} books "
          f"({', '.join(f'{n} {s}' for s, n in counts.items())})")
    return EXIT_OK


COMMANDS = {"render": cmd_render, "status": cmd_status, "inspect": cmd_inspect, "package": cmd_package,
            "voices audition": cmd_voices, "voices save": cmd_voices_save, "voices list": cmd_voices_list,
            "catalogue": cmd_catalogue, "check": cmd_check, "fix": cmd_fix,
            "studio": cmd_studio}                    # by flows/cli.py's command names
