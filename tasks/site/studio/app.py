"""The studio's routes (Starlette): pages for people, a JSON API for the pages' scripts, an event stream of jobs
and progress, the books' files.  flows/studio.py builds StudioConfig (the render form from the one render schema,
the command line's argv) and serves the app with uvicorn.

    GET  /                              the library (books, the queue, upload, the books folder)
    GET  /books/{id}/                   a book before its render: inspect's data, voices, the options form
    GET  /books/{id}/render             its render: progress, chapters to play as they finish, jobs, downloads
    GET  /books/{id}/files/{path}       its files (index.html: the player, with the studio's fix panel)
    GET  /books/{id}/preview/{n}.wav|.json   chapter n (1-based) assembled from its segments, and its cues
    GET  /api/events[?book=id]          server-sent events: the jobs, and the book's progress, when they change
    POST /api/upload?name=N  /api/add   a book by upload (the body is the file) or from the books folder
    POST /api/books/{id}/voices|render|resume|fix   jobs; /api/jobs/{job}/pause|resume|cancel
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engine.atomic import read_json
from engine.voice import VoiceError, parse_voice_spec
from tasks.bookdir import PAGE_NAME, QA_PAGE, VOICES_DIRNAME, book_slug, read_book_json, read_report
from tasks.errors import BookError
from tasks.site.player import book_page as player_page
from tasks.site.studio import pages
from tasks.site.studio.books import Library
from tasks.site.studio.jobs import OPEN, Jobs
from tasks.site.studio.progress import Watch, book_progress, chapter_preview, downloads, manifest_rows
from tasks.site.studio.security import Guard, confined
from tasks.site.studio.uploads import MAX_UPLOAD_BYTES, UploadError, receive
from tasks.synthesize.pickups import find_rows, take_entries
from tasks.voice.voices import save_voice, saved_voices

EVENT_EVERY_S = 1.0             # s between the event stream's looks at the jobs and the book's progress
FIX_ACTIONS = ("retake", "take", "text", "seed")
SEGMENT_RE = re.compile(r"^[1-9][0-9]{0,5}\.[1-9][0-9]{0,6}$")      # C.S, as the player names a segment
SEED_VOICE_RE = re.compile(r"^seed:[0-9]{1,19}$")
PAGE_CSP = ("default-src 'self'; img-src 'self' data:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; "
            "script-src 'self'{scripts}; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
            "base-uri 'none'; object-src 'none'")
INLINE_SCRIPT_RE = re.compile(r"<script>(.*?)</script>", re.S)


@dataclass(frozen=True)
class RenderForm:
    """The render options as the studio offers them, made from the one render schema (flows/studio.py)."""
    fields: list[dict]                                    # {name, flag, group, kind, choices, default, help, optional}
    validate: Callable[[Path, dict], tuple[dict, dict]]   # (book file, raw values) -> (params, {field: error})
    argv: Callable[..., list[str]]                        # (params, *groups) -> the command's options for them
    preset: dict = field(default_factory=dict)            # the studio's initial values where they differ


@dataclass(frozen=True)
class StudioConfig:
    root: Path
    cli: tuple[str, ...]                  # the command line: (python, -m, flows.cli)
    form: RenderForm
    books_dir: Path | None = None         # --books: a folder to add books from
    hosts: frozenset[str] | None = None   # the Host headers answered (security.allowed_hosts); None: any
    token: str | None = None              # the access token (any --host but loopback)
    max_upload: int = MAX_UPLOAD_BYTES
    env: dict | None = None               # the children's environment (None: the studio's)


def create_app(config: StudioConfig):
    """The ASGI app: the routes behind the Guard (security.py)."""
    lib = Library(config.root, config.books_dir, config.env)
    jobs = Jobs(lib.state / "logs", config.env)
    watched: dict[str, Watch] = {}
    cli = list(config.cli)

    def book_or_404(request: Request) -> tuple[str, Path]:
        book_id = request.path_params["book"]
        d = lib.book_dir(book_id)
        if d is None or book_id not in lib.ids():
            raise _NotFound(f"no book {book_id!r} in the studio")
        return book_id, d

    def view(template: str, request: Request, **context) -> HTMLResponse:
        html = pages.render(template, token=bool(config.token), **context)
        return HTMLResponse(html, headers={"content-security-policy": PAGE_CSP.format(scripts=""),
                                           "cache-control": "no-store"})

    # ------------------------------------------------------------------------------------------- pages
    async def library(request: Request):
        entries = await run_in_threadpool(lib.entries)
        return view("library.html", request, books=entries, folder=lib.folder_books(),
                    folder_name=str(config.books_dir) if config.books_dir else "", jobs=jobs.snapshot(),
                    max_upload_mb=config.max_upload / 1048576)

    async def book_page(request: Request):
        book_id, d = book_or_404(request)
        entry = await run_in_threadpool(lib.entry, book_id)
        values = {**{f["name"]: f["default"] for f in config.form.fields}, **config.form.preset,
                  **lib.settings(book_id)}
        return view("book.html", request, book=entry, info=lib.inspected(book_id) or {}, fields=config.form.fields,
                    values=values, saved=saved_voices(), data={"book": book_id, "voices": _voices(book_id, d)})

    async def render_page(request: Request):
        book_id, d = book_or_404(request)
        entry = await run_in_threadpool(lib.entry, book_id)
        progress = await run_in_threadpool(book_progress, d)
        return view("render.html", request, book=entry, progress=progress, files=downloads(d),
                    jobs=[j for j in jobs.snapshot() if j["book"] == book_id], data={"book": book_id})

    async def book_file(request: Request):
        book_id, d = book_or_404(request)
        rel = request.path_params["path"]
        path = confined(d, rel)
        if path is None or not path.is_file() or not path.is_relative_to(d.resolve()):
            return _error(404, "no such file")
        if rel == PAGE_NAME:
            return await run_in_threadpool(_player, book_id, d)
        if rel == QA_PAGE:
            return _inline_page(path.read_text(encoding="utf-8"))
        download = request.query_params.get("download") == "1"
        return FileResponse(path, filename=path.name if download else None,
                            content_disposition_type="attachment" if download else "inline",
                            headers={"cache-control": "no-cache"})

    def _player(book_id: str, d: Path) -> Response:
        if not read_report(d):
            return RedirectResponse(f"/books/{quote(book_id, safe='')}/render", 303)
        rows = manifest_rows(d)
        flagged = [{"name": f"{r['chapter'] + 1}.{r['segment'] + 1}", "text": r["source_text"],
                    "reason": "the checks flagged it"} for r in rows if r.get("qa") == "flag"]
        studio = {"book": book_id, "api": f"/api/books/{quote(book_id, safe='')}",
                  "render": f"/books/{quote(book_id, safe='')}/render", "flagged": flagged,
                  "job": _public(jobs.open_job(book_id, "fix"))}
        panel, script = pages.player_panel(studio)
        html = player_page(d).replace("</section>\n</main>", panel + "</section>\n</main>", 1) \
            .replace("</body>", script + "</body>", 1)
        return _inline_page(html)

    async def preview(request: Request):
        _book_id, d = book_or_404(request)
        number, kind = int(request.path_params["number"]), request.path_params["kind"]
        got = await run_in_threadpool(chapter_preview, d, number - 1)
        if got is None:
            return _error(409, f"chapter {number} is not rendered yet")
        audio, cues = got
        if kind == "json":
            return JSONResponse({"chapter": number, "cues": cues})
        return Response(audio, media_type="audio/wav", headers={"cache-control": "no-store"})

    # --------------------------------------------------------------------------------------- adding books
    async def upload(request: Request):
        name = request.query_params.get("name") or "book"
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > config.max_upload:     # said before it is sent
            return _error(413, f"{Path(name).name}: the file is larger than the studio's upload limit "
                               f"({config.max_upload / 1048576:g} MB)")
        try:
            path = await receive(request.stream(), lib.uploads, name, lib.taken(), config.max_upload)
        except UploadError as e:
            return _error(e.status, f"{Path(name).name}: {e}")
        info, problem = await run_in_threadpool(lib.inspect, cli, path, Path(name.replace("\\", "/")).name)
        if info is None:
            path.unlink(missing_ok=True)                  # refused as the command line refuses it: nothing kept
            return _error(422, problem)
        return _added(path)

    async def add(request: Request):
        body = await _json(request)
        path = lib.folder_book(str(body.get("name", "")))
        if path is None:
            return _error(404, "no such book in the books folder")
        if book_slug(path) in lib.ids() and lib.source(book_slug(path)) != path:
            return _error(409, f"{path.name}: another book has the folder {book_slug(path)!r} under the root")
        info, problem = await run_in_threadpool(lib.inspect, cli, path, path.name)
        if info is None:
            return _error(422, problem)
        lib.add(path)
        return _added(path)

    def _added(path: Path) -> JSONResponse:
        book_id = book_slug(path)
        return JSONResponse({"id": book_id, "url": f"/books/{quote(book_id, safe='')}/"})

    # ---------------------------------------------------------------------------------------------- jobs
    async def start_voices(request: Request):
        book_id, _d = book_or_404(request)
        body = await _json(request)
        source = lib.source(book_id)
        if source is None:
            return _error(409, "the book's file is not here: add it again")
        params, errors = await run_in_threadpool(config.form.validate, source, body.get("values") or {})
        if errors:
            return JSONResponse({"errors": errors}, status_code=422)
        try:
            count, first = int(body.get("count", 2)), int(body.get("from_seed", 2222))
        except (TypeError, ValueError):
            return _error(422, "count and from_seed are whole numbers")
        if not 1 <= count <= 24 or not 0 <= first < 2 ** 62:
            return _error(422, "count: 1 to 24 voices; from_seed: 0 or more")
        argv = [*cli, "voices", "audition", str(source), "--out", str(lib.root), "--count", str(count),
                "--from-seed", str(first), *config.form.argv(params, "engine", "text")]
        job = jobs.submit("voices", book_id, argv, params.get("device", "cpu"), f"{count} voices from seed {first}")
        return JSONResponse({"job": job.public()})

    async def reinspect(request: Request):
        book_id, _d = book_or_404(request)
        body = await _json(request)
        source = lib.source(book_id)
        if source is None:
            return _error(409, "the book's file is not here: add it again")
        params, errors = await run_in_threadpool(config.form.validate, source, body.get("values") or {})
        if errors:
            return JSONResponse({"errors": errors}, status_code=422)
        info, problem = await run_in_threadpool(lib.inspect, cli, source, source.name,
                                                config.form.argv(params, "text", "cast"), True)
        return JSONResponse({"ok": True}) if info is not None else _error(422, problem)

    async def voices_json(request: Request):
        book_id, d = book_or_404(request)
        return JSONResponse(_voices(book_id, d))

    async def save_voice_route(request: Request):
        body = await _json(request)
        spec = str(body.get("spec", ""))
        if not SEED_VOICE_RE.match(spec):
            return _error(422, "only a candidate's seed:N voice is saved from here")
        try:
            path = await run_in_threadpool(save_voice, str(body.get("name", "")), parse_voice_spec(spec),
                                           bool(body.get("force")))
        except VoiceError as e:
            return _error(422, str(e).replace(str(Path.home()), "~"))
        return JSONResponse({"saved": Path(path).stem, "voices": saved_voices()})

    async def start_render(request: Request):
        book_id, _d = book_or_404(request)
        body = await _json(request)
        return await _render_job(book_id, body.get("values") or {})

    async def resume(request: Request):
        book_id, _d = book_or_404(request)
        values = {**config.form.preset, **lib.settings(book_id)}
        return await _render_job(book_id, values)

    async def _render_job(book_id: str, values: dict):
        source = lib.source(book_id)
        if source is None:
            return _error(409, "the book's file is not here: add it again")
        if (j := jobs.open_job(book_id, "render")) is not None:
            return _error(409, f"a render of this book is {j.state} already (job {j.id})")
        params, errors = await run_in_threadpool(config.form.validate, source, values)
        if errors:
            return JSONResponse({"errors": errors}, status_code=422)
        lib.save_settings(book_id, {k: v for k, v in values.items() if k in {f["name"] for f in config.form.fields}})
        argv = [*cli, "render", str(source), "--out", str(lib.root), *config.form.argv(params)]
        job = jobs.submit("render", book_id, argv, params.get("device", "cpu"), "render")
        return JSONResponse({"job": job.public(), "url": f"/books/{quote(book_id, safe='')}/render"})

    async def fix(request: Request):
        book_id, d = book_or_404(request)
        body = await _json(request)
        names, action = body.get("segments") or [], body.get("action")
        if action not in FIX_ACTIONS or not names or not all(isinstance(n, str) and SEGMENT_RE.match(n)
                                                              for n in names):
            return _error(422, f"name segments as C.S and one action of {', '.join(FIX_ACTIONS)}")
        try:
            number = str(int(str(body.get("take" if action == "take" else "seed", 0)))) \
                if action in ("take", "seed") else ""
            extra = {"retake": ["--retake"], "take": ["--take", number], "seed": ["--seed", number],
                     "text": ["--text", str(body.get("text") or "")]}[action]
        except (TypeError, ValueError):
            return _error(422, f"{action}: a whole number is needed")
        if action == "text" and not extra[1].strip():
            return _error(422, "text: say what the segment should say")
        source = lib.source(book_id) or Path(read_book_json(d).get("source_path") or f"{book_id}.txt")
        values = {**config.form.preset, **lib.settings(book_id)}
        params, _errors = await run_in_threadpool(config.form.validate, source, values) if source.is_file() \
            else ({}, {})
        argv = [*cli, "fix", str(source), *names, *extra, "--out", str(lib.root),
                *(config.form.argv(params, "engine", "text", "proof") if params else [])]
        job = jobs.submit("fix", book_id, argv, params.get("device", "cpu"), f"fix {' '.join(names)}: {action}")
        return JSONResponse({"job": job.public()})

    async def takes(request: Request):
        book_id, d = book_or_404(request)
        name = request.query_params.get("segment", "")
        if not SEGMENT_RE.match(name):
            return _error(422, "name the segment as C.S")
        try:
            (row,) = find_rows(manifest_rows(d), [name], book_id)
        except BookError as e:
            return _error(404, e.problem)
        base = f"/books/{quote(book_id, safe='')}/files/"
        entries = [{**t, "audio": base + quote(str(t.get("audio_path") or ""))} for t in take_entries(d, row)]
        return JSONResponse({"segment": name, "kept": row.get("take"), "text": row["source_text"], "takes": entries})

    async def job_action(request: Request):
        action = request.path_params["action"]
        try:
            job = {"pause": jobs.pause, "resume": jobs.resume, "cancel": jobs.cancel}[action](
                request.path_params["job"])
        except KeyError:
            return _error(404, "no such job or action")
        return JSONResponse({"job": job.public()})

    async def progress(request: Request):
        book_id, d = book_or_404(request)
        return JSONResponse(await run_in_threadpool(_progress, book_id, d))

    def _progress(book_id: str, d: Path) -> dict:
        p, rate = watched.setdefault(book_id, Watch(d)).read()
        return {"progress": p, "speed": rate, "files": downloads(d) if p and p["packaged"] else []}

    async def events(request: Request):
        book = request.query_params.get("book")
        d = lib.book_dir(book) if book else None

        async def stream():
            last = None
            while not await request.is_disconnected():
                data = {"jobs": jobs.snapshot(), "version": jobs.version}
                if d is not None and book is not None:
                    data.update(await run_in_threadpool(_progress, book, d))
                text = json.dumps(data, ensure_ascii=False, sort_keys=True)
                if text != last:
                    last = text
                    yield f"data: {text}\n\n"
                await asyncio.sleep(EVENT_EVERY_S)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    # ----------------------------------------------------------------------------------------------- app
    def _voices(book_id: str, d: Path) -> dict:
        info = read_json(d / VOICES_DIRNAME / "voices.json")
        base = f"/books/{quote(book_id, safe='')}/files/{VOICES_DIRNAME}/"
        for c in info.get("candidates", []):
            c["url"] = base + quote(c["file"])
        return info

    @asynccontextmanager
    async def lifespan(app):
        jobs.start()
        try:
            yield
        finally:
            await run_in_threadpool(jobs.close)

    routes = [
        Route("/", library),
        Route("/books/{book}/", book_page),
        Route("/books/{book}/render", render_page),
        Route("/books/{book}/player", lambda r: RedirectResponse(f"/books/{quote(r.path_params['book'], safe='')}"
                                                                 f"/files/{PAGE_NAME}", 303)),
        Route("/books/{book}/files/{path:path}", book_file),
        Route("/books/{book}/preview/{number:int}.{kind}", preview),
        Route("/api/upload", upload, methods=["POST", "PUT"]),
        Route("/api/add", add, methods=["POST"]),
        Route("/api/voices/save", save_voice_route, methods=["POST"]),
        Route("/api/books/{book}/voices", voices_json, methods=["GET"]),
        Route("/api/books/{book}/inspect", reinspect, methods=["POST"]),
        Route("/api/books/{book}/voices", start_voices, methods=["POST"]),
        Route("/api/books/{book}/render", start_render, methods=["POST"]),
        Route("/api/books/{book}/resume", resume, methods=["POST"]),
        Route("/api/books/{book}/fix", fix, methods=["POST"]),
        Route("/api/books/{book}/takes", takes),
        Route("/api/books/{book}/progress", progress),
        Route("/api/jobs/{job}/{action}", job_action, methods=["POST"]),
        Route("/api/events", events),
        Mount("/static", StaticFiles(directory=pages.STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={_NotFound: _not_found, 404: _not_found})
    app.state.jobs, app.state.library = jobs, lib
    return Guard(app, config.hosts, config.token)


class _NotFound(Exception):
    pass


async def _not_found(request: Request, exc: Exception):
    return _error(404, str(getattr(exc, "detail", None) or exc) or "not found")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json(request: Request) -> dict:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = {}
    return body if isinstance(body, dict) else {}


def _public(job) -> dict | None:
    return job.public() if job is not None and job.state in OPEN else None


def _inline_page(html: str) -> HTMLResponse:
    """A page we wrote with its scripts inline (the player, the QA page): those exact scripts may run (their
    hashes in the policy), nothing else inline."""
    hashes = " ".join(f"'sha256-{_b64sha(s)}'" for s in INLINE_SCRIPT_RE.findall(html))
    return HTMLResponse(html, headers={"content-security-policy": PAGE_CSP.format(scripts=" " + hashes),
                                       "cache-control": "no-cache"})


def _b64sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
