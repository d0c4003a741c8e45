"""The studio: a local web app over an output root (`chattts-render studio`, flows/studio.py) — the library, a
book before its render (inspect's data, voice candidates, the render options form), renders queued per engine
and run as `chattts-render` child processes (the CLI's own path: resumable from the CLI and back), chapters
playable while the rest renders, fixes from the player, downloads.

    app.py        the routes (Starlette), StudioConfig
    books.py      the books the studio knows: folders under the root, uploads, a books folder, inspect's cache
    jobs.py       the job queue: one engine job at a time per device, child processes, pause / cancel
    progress.py   a book's progress from its manifest (the truth), speed and time left, a chapter's preview
    security.py   the access token, Host and Origin checks (CSRF), paths confined to a folder
    uploads.py    uploads: size limit, type by content, names the server chooses
    pages.py      the Jinja2 pages (templates/, static/)
"""
