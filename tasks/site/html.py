"""What every page we write shares: one self-contained HTML document (the stylesheet and any script inline, no
network, no CDN, so it works from file:// and behind `python -m http.server`), escaping, relative links."""
from __future__ import annotations

import html
import json
from pathlib import Path
from urllib.parse import quote

STATIC = Path(__file__).with_name("static")     # site.css and the players's script, inlined into each page
GENERATOR = "chattts-render"


def esc(value) -> str:
    """Text or an attribute value, escaped for HTML."""
    return html.escape(str(value), quote=True)


def href(*parts: str) -> str:
    """A relative URL from path parts (file names with spaces, CJK, `#` or `%` stay links to themselves)."""
    return "/".join(quote(p, safe="") for p in parts)


def json_script(element_id: str, data) -> str:
    """`data` as an inline JSON script element (`</` escaped so no string can close the element)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def document(title: str, body: str, *, lang: str = "zh", scripts: tuple[str, ...] = ()) -> str:
    """A whole page: head (charset, viewport, title, site.css, an empty icon so no favicon is fetched), `body`,
    then the named scripts of static/ inline.  The bytes depend only on the arguments."""
    inline = "".join(f"<script>\n{(STATIC / name).read_text(encoding='utf-8')}</script>\n" for name in scripts)
    return (f'<!DOCTYPE html>\n<html lang="{esc(lang or "zh")}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="generator" content="{GENERATOR}">\n<link rel="icon" href="data:,">\n'
            f"<title>{esc(title)}</title>\n<style>\n{(STATIC / 'site.css').read_text(encoding='utf-8')}</style>\n"
            f"</head>\n<body>\n{body}\n{inline}</body>\n</html>\n")
