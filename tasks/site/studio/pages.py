"""The studio's pages: Jinja2 templates (templates/) with autoescaping on — a title, a chapter name or a text with
markup in it is shown as text — and the scripts and style in static/ (no inline script: the pages' policy allows
only the studio's own files).  Data a script needs travels as JSON in a <script type="application/json"> element
(Jinja's tojson escapes <, > and & in it)."""
from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from engine.units import hms

HERE = Path(__file__).parent
STATIC = HERE / "static"
_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters["hms"] = lambda s: hms(float(s or 0))


def render(template: str, **context) -> str:
    return _env.get_template(template).render(**context)


def player_panel(studio: dict) -> tuple[str, str]:
    """What the studio adds to a book's player page (tasks/site/player.py): the fix panel (under the player's list
    of flags), and its data and script (before </body>)."""
    data = json.dumps(studio, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")
    panel, script = render("player_panel.html", data=data).split("<!-- script -->")
    return panel, script
