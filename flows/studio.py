"""`chattts-render studio [--root DIR] [--host 127.0.0.1] [--port N] [--books DIR]`: the studio (tasks/site/studio/),
a local web app over an output root, served by uvicorn.  This module is its shell: the command's arguments, the
render options form made from the one render schema (flows/params.py: a field per parameter, its type, choices,
default and help; checked by the same validators as a render's options, flows/options.py), the options a job's
command line gets, and the access token.

It binds 127.0.0.1.  Any other --host gets an access token, printed once with the URL; every request without it
is refused.  Paths in the form (lexicon, cast, a voice file or clip) are files under the root, never outside it."""
from __future__ import annotations

import argparse
import re
import socket
import sys
from functools import partial
from pathlib import Path

from engine.api import DeviceUnavailable, ModelUnavailable
from engine.voice import VoiceError
from flows.arguments import UsageError
from flows.options import options_from_params
from flows.params import PARAMS, TYPES, choices, flag, named, optional
from flows.signature import describe
from tasks.errors import BookError
from tasks.site.studio.security import LOOPBACK, allowed_hosts, confined, new_token

STUDIO_SETS = ("book", "out", "scratch")          # the studio's own: the book it holds, its root, no store
FILE_PARAMS = ("lexicon", "cast", "direction")    # files: under the root
PRESET = {"schedule": "chapters", "formats": "flac,m4b"}   # the studio's choices: listen while it renders, an M4B
VOICE_PATH = re.compile(r"[/\\]|^~|\.[A-Za-z0-9]{1,8}$")   # a voice spec that names a file (engine/voice.py's rule)


def form_fields() -> list[dict]:
    """A form field per render parameter the user sets (not the book, the root, a store's scratch), in the
    schema's order: {name, flag, group, kind (bool, choice, int, float, list, text), choices, default, help,
    optional}."""
    out = []
    for f in PARAMS:
        if f.name in STUDIO_SETS:
            continue
        kinds = set(getattr(TYPES[f.name], "__args__", ())) | {TYPES[f.name]}
        kind = ("bool" if TYPES[f.name] is bool else "choice" if choices(f) else
                "list" if isinstance(f.default, tuple) else "text" if str in kinds else "float" if float in kinds
                else "int" if int in kinds else "text")
        out.append({"name": f.name, "flag": flag(f), "group": f.metadata["group"], "kind": kind,
                    "choices": list(choices(f)), "default": ",".join(f.default) if isinstance(f.default, tuple)
                    else f.default,
                    "help": describe(f) or "", "optional": optional(f)})
    return out


def validate(root: Path, book: Path, raw: dict) -> tuple[dict, dict[str, str]]:
    """(render parameters, {}) from a form's values, or ({}, {field: the problem}): each value read as its type,
    files confined to the root, then checked as a render checks its parameters (RenderParams and the stage
    options' validators, flows/options.py; the error goes beside the field it names)."""
    params, errors = {}, {}
    for f in form_fields():
        value = raw.get(f["name"], f["default"])
        try:
            params[f["name"]] = _read(f, value)
        except ValueError as e:
            errors[f["name"]] = str(e)
    for name in FILE_PARAMS:
        if params.get(name):
            path = confined(root, str(params[name]))
            if path is None or not path.is_file():
                errors[name] = f"{params[name]}: not a file under the studio's root ({root})"
            params[name] = str(path) if path else None
    voice = params.get("voice")
    if voice and (file := _voice_file(voice)) is not None:
        path = confined(root, file)
        if path is None or not path.is_file():
            errors["voice"] = f"{file}: not a file under the studio's root ({root})"
        else:
            params["voice"] = ("clip:" if voice.lower().startswith("clip:") else "") + str(path)
    if errors:
        return {}, errors
    try:
        options_from_params(str(book), out=str(root), **params)
    except (ValueError, VoiceError, BookError, ModelUnavailable, DeviceUnavailable) as e:
        return {}, {_field_of(e): str(e).replace(str(root), "ROOT")}
    return params, {}


def _read(f: dict, value):
    """A form value as its parameter's type (ValueError naming the field)."""
    if f["kind"] == "bool":
        return value is True or str(value).lower() in ("true", "on", "1", "yes")
    if value is None or (isinstance(value, str) and not value.strip()):
        if f["optional"]:
            return None
        if f["kind"] in ("text", "list"):
            return () if f["kind"] == "list" else ""
        raise ValueError(f"{f['flag']}: a value is needed")
    text = str(value).strip()
    if f["kind"] in ("int", "float"):
        try:
            return int(text) if f["kind"] == "int" else float(text)
        except ValueError:
            raise ValueError(f"{f['flag']} {text!r}: not a {'whole number' if f['kind'] == 'int' else 'number'}") \
                from None
    if f["kind"] == "list":
        return tuple(p.strip() for p in text.split(",") if p.strip())
    return text


def _voice_file(spec: str) -> str | None:
    """The file a voice spec names (clip:PATH, or a path to a voice string), or None."""
    s = spec.strip()
    if s.lower().startswith("clip:"):
        return s[5:].strip()
    return s if not s.startswith("{") and not s.lower().startswith("seed:") and VOICE_PATH.search(s) else None


def _field_of(e: Exception) -> str:
    """The form field an error names: by its exception (a voice, the model, the device), else the first flag or
    parameter name in its message (else its singular: "format(s)"); "_form" when it names none."""
    kinds = {VoiceError: "voice", ModelUnavailable: "model", DeviceUnavailable: "device"}
    if type(e) in kinds:
        return kinds[type(e)]
    text = str(e)
    for words in (lambda f: (flag(f), f.name, f.name.replace("_", " ")), lambda f: (f.name.removesuffix("s"),)):
        hits = [(text.find(t), f.name) for f in PARAMS if f.name not in STUDIO_SETS for t in words(f)
                if re.search(rf"(?<![\w-]){re.escape(t)}\b", text)]
        if hits:
            return min(hits)[1]
    return "_form"


def argv(params: dict, *groups: str) -> list[str]:
    """The command line options for `params` (those of `groups`, or all) that differ from their defaults."""
    out: list[str] = []
    for f in named(*groups) if groups else PARAMS:
        if f.name in STUDIO_SETS or f.name not in params or params[f.name] == f.default:
            continue
        value = params[f.name]
        if TYPES[f.name] is bool:
            out.append(flag(f))                   # a bool differs from its default: --flag, or --no-flag
        elif value is not None:
            out += [flag(f), ",".join(value) if isinstance(value, tuple) else str(value)]
    return out


def _check_port(host: str, port: int) -> None:
    """UsageError (one line, exit 2) when the address cannot be listened on (in use, not this machine's)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host.strip("[]"), port))
    except OSError as e:
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


def cmd_studio(a: argparse.Namespace) -> int:
    import uvicorn

    from tasks.site.studio.app import RenderForm, StudioConfig, create_app  # the web stack: for this command only

    root = Path(a.root).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    books = Path(a.books).expanduser() if a.books else None
    if books is not None and not books.is_dir():
        raise BookError(str(books), "no such folder (--books)")
    _check_port(a.host, a.port)
    token = None if a.host in LOOPBACK or a.host == "::1" else new_token()
    hosts = None if a.host in ("0.0.0.0", "::") else allowed_hosts(a.host, a.port)
    form = RenderForm(form_fields(), partial(validate, root.resolve()), argv, PRESET)
    config = StudioConfig(root=root.resolve(), cli=(sys.executable, "-m", "flows.cli"), form=form, books_dir=books,
                          hosts=hosts, token=token, max_upload=int(a.max_upload_mb * 1048576))
    shown = f"[{a.host}]" if ":" in a.host else a.host
    url = f"http://{shown}:{a.port}/" + (f"?token={token}" if token else "")
    print(f"chattts-render studio: {root.resolve()} at {url}" + (" (the token is shown once: keep the URL)"
                                                                  if token else ""), flush=True)
    uvicorn.run(create_app(config), host=a.host, port=a.port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
