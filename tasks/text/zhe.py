"""著 after Traditional -> Simplified (issue 33): OpenCC's t2s keeps 著 everywhere, but in Traditional text 著 is
also the aspect particle zhe (看著), zháo (睡著) and zhuó (穿著, 著急, 著落), which Simplified writes 着; ChatTTS
reads 著 as zhù.  `simplify_zhe(text)` rewrites 著 to 着 in t2s output except where 著 is zhù (著作, 著名, 所著,
著录, 土著, 素著 ...), decided by the characters around it (`zhu`).  It is for Traditional text only: in Simplified
text 著 is already zhù (tasks/text/normalize.py applies it to a paragraph OpenCC changes).

The rule, measured on every 著 of the corpus's seven Traditional novels (benchmarks/t2s_zhe.py,
tests/data/t2s/zhu.tsv), keeps 著 (zhù) when:
- 所 is before it (所著), or 录/称/述 after it (著录, 著称, 著述), or 土/卓/昭/彰 before it (土著, 卓著);
- 素/显/大/卓/昭/彰 is before it and a mark or the end after it (孝行素著，, 效果显著。, 文明大著，);
- a book title follows a mark (，著《革命军》);
- 作/名/书/者/有 follows and before it is a mark, the start, or one of `_BEFORE_WORD` (已著书, 是著书立说, 和著者,
  最著名, 的著作, ，著有《…》);
- 著作 ends a clause or is followed by 的/等 (药物学著作，), 著名 is followed by anything but 字/号/儿/片/帖/单
  (府著名的, but 叫著名字 -> 叫着名字).
Everything else is 着 (看著 -> 看着, 著急 -> 着急, 閒著作什麼 -> 闲着作什么, 寫著《桃花行》 -> 写着《桃花行》).
"""
from __future__ import annotations

import re

_BEFORE_WORD = "已曾而乃始欲方和与及的之其是最"    # before 著作/著名/著书/著者/著有: the word is zhù
_STATE = "素显大卓昭彰"                            # X著 at a clause end: manifest, renowned (zhù)
_NOT_NAME = "字号儿片帖单"                          # 著名字, 著名号: 着 + 名字


def _mark(c: str) -> bool:
    """A mark, a space or the text's edge: not a Han character, letter or digit."""
    return c == "" or not (c.isalnum() or "\u4e00" <= c <= "\u9fff")


def zhu(prev: str, nxt: str, nxt2: str) -> bool:
    """Is the 著 between `prev` and `nxt` (then `nxt2`; "" at the text's edge) zhù?"""
    if prev == "所" or nxt in ("录", "称", "述") or prev in ("土", "卓", "昭", "彰"):
        return True
    if (prev and prev in _STATE and _mark(nxt)) or (nxt == "《" and _mark(prev)):
        return True
    if nxt and nxt in "作名书者有" and (_mark(prev) or prev in _BEFORE_WORD):
        return nxt != "名" or nxt2 not in _NOT_NAME
    if nxt == "作":
        return _mark(nxt2) or nxt2 in ("的", "等")
    return nxt == "名" and bool(nxt2) and nxt2 not in _NOT_NAME


def simplify_zhe(text: str) -> str:
    """`text` (t2s output of Traditional text) with each 著 that is not zhù written 着; same length."""
    if "著" not in text:
        return text
    return re.sub("著", lambda m: "著" if zhu(text[m.start() - 1:m.start()], text[m.end():m.end() + 1],
                                              text[m.end() + 1:m.end() + 2]) else "着", text)
