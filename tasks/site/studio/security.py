"""The studio's protections, each independent of the routes:

- Guard (ASGI middleware): a request whose Host is not the studio's own is refused (DNS rebinding: another site
  resolving its name to 127.0.0.1 cannot read the studio); with an access token (any --host but loopback),
  every request must carry it — the printed URL's `?token=` (answered with a cookie and a redirect to the same
  URL without it), the cookie, or `Authorization: Bearer` — else 401; a request that changes anything (POST, PUT,
  PATCH, DELETE) must come from the studio's own origin (its Origin header, else its Referer's), else 403 (CSRF:
  a page on another site cannot make the browser start, fix or upload).  Every answer says nosniff, no framing.
- confined(folder, relative): the path a client names inside a folder, or None — never outside it: no absolute
  path, no `..`, no NUL, and no symlink leading out (the path is resolved and must stay under the folder).
"""
from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

TOKEN_PARAM = "token"                     # the printed URL's query parameter
TOKEN_COOKIE = "chattts_studio"           # HttpOnly, SameSite=Strict
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin")]


def new_token() -> str:
    """A fresh access token (32 random bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers the studio answers: its bind address with the port, and the loopback names when it is
    bound to loopback or to every address."""
    names = {f"[{host}]" if ":" in host and not host.startswith("[") else host}
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        names |= set(LOOPBACK)
    return frozenset(f"{n}:{port}" for n in names) | (frozenset(names) if port == 80 else frozenset())


class Guard:
    """ASGI middleware: Host, token and Origin checks (module docstring).  `hosts`: allowed Host values (None:
    any, for a bind address the studio cannot name, such as 0.0.0.0 reached by its LAN name: the token guards it
    then); `token`: None on loopback."""

    def __init__(self, app, hosts: frozenset[str] | None, token: str | None):
        self.app, self.hosts, self.token = app, hosts, token

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.hosts is not None and host.lower() not in self.hosts:
            return await _refuse(send, 421, f"unknown host {host!r}: open the studio by the address it printed")
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get(TOKEN_PARAM)
            if given is not None and secrets.compare_digest(given, self.token) and scope["method"] == "GET":
                rest = urlencode([(k, v) for k, v in parse_qsl(scope["query_string"].decode("latin-1"))
                                  if k != TOKEN_PARAM])
                where = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
                return await _respond(send, 303, b"", [(b"location", where.encode("latin-1")),
                                                        (b"set-cookie", _cookie(self.token))])
            if not any(secrets.compare_digest(t, self.token) for t in _tokens(headers)):
                return await _refuse(send, 401, "access token required: open the URL the studio printed")
        if scope["method"] in UNSAFE_METHODS and not _same_origin(headers, scope, host):
            return await _refuse(send, 403, "refused: the request did not come from the studio's own pages")

        async def send_secured(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": list(message.get("headers", [])) + SECURITY_HEADERS}
            await send(message)

        return await self.app(scope, receive, send_secured)


def _tokens(headers: dict[str, str]) -> list[str]:
    """The tokens a request carries: its cookie's and its Authorization header's."""
    out = []
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == TOKEN_COOKIE and value:
            out.append(value)
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        out.append(auth[7:].strip())
    return out


def _cookie(token: str) -> bytes:
    return f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/".encode("latin-1")


def _same_origin(headers: dict[str, str], scope, host: str) -> bool:
    """The request's Origin (else its Referer's origin) is this server's own scheme://host."""
    own = f"{scope.get('scheme', 'http')}://{host}".lower()
    origin = headers.get("origin")
    if origin is None and headers.get("referer"):
        u = urlsplit(headers["referer"])
        origin = f"{u.scheme}://{u.netloc}"
    return origin is not None and origin.lower() == own


async def _refuse(send, status: int, text: str) -> None:
    await _respond(send, status, (text + "\n").encode("utf-8"), [(b"content-type", b"text/plain; charset=utf-8")])


async def _respond(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": headers + SECURITY_HEADERS + [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def confined(folder: Path, relative: str) -> Path | None:
    """`folder`/`relative` when it stays inside `folder` once resolved (symlinks followed), else None: an absolute
    path, `..`, a backslash or NUL, or a link out of the folder is refused.  The path need not exist."""
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        return None
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    base = Path(folder).resolve()
    path = (base / relative).resolve()
    return path if path == base or path.is_relative_to(base) else None
