"""Telephone numbers and codes inside Chinese text, read digit by digit in their groups (issue 33).

`find_codes(text, start, end, say)` returns `(start, end, reading)` for every telephone number or code in
text[start:end], before the number windows of tasks/text/normalize.py see them.  Only shapes that are nothing else
are taken, and what a decision depends on is inside the span, so a segment cut between spans reads the same alone;
`say` renders the plain text a span takes in as the rest of the paragraph is.  The conventions and the shapes, in
order of precedence: docs/modules.md, "Telephone numbers and codes".
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from tasks.text import rules

# Words after which a number is an identifier read digit by digit (up to 3 characters between: 电话是, 号码为, 邮编：).
_KEYWORDS = ("电话|号码|热线|分机|传真|编号|工号|学号|代码|车次|房间|门牌|序号|分辨率|"
             "邮编|邮政编码|邮政区码|区号|地址码|账号|帐号|账户|帐户|卡号|身份证号|QQ号|QQ群号|QQ群|QQ|群号")
# Words whose numbers may be written in groups (`1125 0101 0400 1012 9`).
_GROUPED = ("账号", "帐号", "账户", "帐户", "卡号")
# Dial verbs: the number right after them (拨打911, 致电0451-12345), not a count after them (拨打了3次, 拨打100多次).
_DIAL = "拨打|致电|呼叫"
_NOT_A_COUNT = "多余次个遍人万亿元块倍岁"      # after a number: a count or an amount (拨打100多次, 电话费为2000元)
_EXPRESSION = "×xX*:：/.%％"                        # after a number: it goes on (分辨率1920×1080 is a product)
_BETWEEN = r"(?:\s*[^\d\s，。！？；!?;\n+＋]){0,3}?\s*"      # up to 3 characters (spaces free) after a keyword
PLUS = "加"                                          # the + of a country code, as a Chinese reader says it
_FW_DIGITS = str.maketrans({chr(0xFF10 + i): str(i) for i in range(10)})

_RE_KEYWORD = re.compile(rf"(?P<kw>{_KEYWORDS})(?P<mid>{_BETWEEN})(?=\+?\d)|(?P<dial>{_DIAL})(?=\d)")
# A telephone candidate: an optional +, digits joined by dashes, single spaces and brackets; ends on a digit.
_RE_PHONE = re.compile(
    r"(?<![0-9A-Za-z.,+\-‐－/%])(?:\+\s?)?(?:[(（]\s?)?\d"
    r"(?:\d|[-‐－](?=\d)|\s?[)）]\s?(?=[\d(（])|\s?[(（](?=\d)|\s(?=\d))*"
    r"(?![0-9A-Za-z%‰]|[.\-‐－/]\d)")
_RE_EXTENSION = re.compile(r"转(\d{1,5})(?!\d)")
_RE_LONG = re.compile(r"(?<![0-9A-Za-z.])\d{17,}[Xx]?(?![0-9A-Za-z.])")          # ID and bank-card numbers
_RE_LEADING_ZERO = re.compile(r"(?<![0-9A-Za-z.,:：/\-−+])0\d{2,}(?![0-9A-Za-z.,:：/\-%‰％])")
_RE_POSTCODE = re.compile(r"(?<=[\u4e00-\u9fff]) ([1-8]\d{5})(?=[)）])")
_RE_CODE_PAIR = re.compile(r"(?<![A-Za-z0-9])([A-Z])(\d{2,4})/([A-Z]?)(\d{2,4})(?![\d/])")
_RE_CODE_RANGE = re.compile(r"(?<![A-Za-z0-9])([A-Z]{1,2})(\d{1,5})\s?[-–~～]\s?\1(\d{1,5})(?![\d])")
_RE_GROUPED = re.compile(r"\d+(?:[ \-]\d+)*")
_RE_DIGITS = re.compile(r"\d+[Xx]?")
# Room and flat numbers: a door (3-5 digits, a letter after it) before a room word; a range of doors before 室; a door
# that ends an address after its building, unit or floor, with no measure word or unit after it.
# The room word and the building word are inside the span (a cut between spans reads the same).
_ROOM_WORD = r"室(?![内外友温])|号房|房间|寝室|号寝|房(?![子屋产价租东客贷源型地])"
_RE_ROOM = re.compile(rf"(?<![\d.,A-Za-z共约近逾达超])(\d{{3,5}})(?:\s?([A-Za-z]))?\s?({_ROOM_WORD})")
_RE_ROOM_RANGE = re.compile(r"(?<![\d.,])(\d{3,5})\s?[-–~～]\s?(\d{3,5})(\s?室)")
_RE_DOOR = re.compile(r"([栋幢座楼]|单元|大厦)(\d{3,5})"
                      r"(?![\d.,:：/\-%％‰A-Za-z]|\s?[层楼号米平方元万千百亿年月日天人个次户套间栋幢期多余位名])")

Say = Callable[[str], str]


def _mobile(d: str) -> bool:
    return len(d) == 11 and d[0] == "1" and d[1] in "3456789"


@lru_cache(maxsize=1024)
def service_number(d: str) -> bool:
    """Is `d` a service number wetext's grammar reads with 幺 (110, 120, 12306, 12345, 10086, 95511 ...)?  None
    starts with 0 (`0110`, the last group of `+65 6509 0110`, is no service number)."""
    return 3 <= len(d) <= 5 and d[0] != "0" and "幺" in rules.wetext_zh().normalize(d)


def read_digits(d: str) -> str:
    """One identifier digit by digit: 1 is 幺 in a mobile or a service number, else 一; an ID card's X stays."""
    d = d.translate(_FW_DIGITS)
    out = rules.digits_zh(d)
    return out.replace("一", "幺") if _mobile(d) or service_number(d) else out


def _read_groups(groups: list[str]) -> str:
    """Groups of one number: a mobile that the groups from some point on spell (`138 0013 8000`, `10-13812345678`)
    or a last group that is a service number (`0451-12345`) takes 幺, the rest 一."""
    for i in range(len(groups)):
        if _mobile("".join(groups[i:])):
            return rules.digits_zh("".join(groups[:i])) + read_digits("".join(groups[i:]))
    return rules.digits_zh("".join(groups[:-1])) + read_digits(groups[-1])


def _amount_shaped(d: str) -> bool:
    return "000" in d or d.endswith("00")


def _phone_reading(cand: str) -> str | None:
    """The reading of a telephone candidate, or None when its shape is not a telephone number's."""
    cand = cand.translate(_FW_DIGITS)
    groups = re.findall(r"\d+", cand)
    seps = re.findall(r"(?<=\d)[^\d]+(?=\d)", cand)
    digits = "".join(groups)
    bracketed = re.match(r"\+?\s?[(（]", cand) is not None
    if cand.startswith("+"):
        cc = groups[0]
        if len(groups) == 1:                                   # +8613921234567: the country code glued on
            cc = next((c for c in ("86", "1") if cc.startswith(c) and 6 <= len(cc) - len(c) <= 13), "")
            if not cc:
                return None
            groups = [cc, digits[len(cc):]]
        national = digits[len(cc):]
        if not (len(cc) <= 3 and 6 <= len(national) <= 13):
            return None
        return PLUS + rules.digits_zh(cc) + _read_groups(groups[1:])
    if len(groups) < 2 and not re.fullmatch(r"[48]00\d{7}", digits):
        return None
    if len(groups) == 1:                                       # a bare 400/800 number, unless shaped like an amount
        return None if _amount_shaped(digits[3:]) else rules.digits_zh(digits)
    first, rest = groups[0], "".join(groups[1:])
    if first[0] == "0" and len(first) in (3, 4):               # an area code (or 00 / 011: an international prefix)
        dash = seps[0].strip() in ("-", "‐", "－")
        if (len(rest) in (7, 8) and all(len(g) >= 3 for g in groups[1:])) or _mobile(rest) \
                or (dash and len(groups) == 2 and len(rest) >= 5) \
                or ((first.startswith("00") or first == "011") and 8 <= len(rest) <= 13):
            return _read_groups(groups)
        return None
    lens = [len(g) for g in groups]
    if bracketed and lens[:1] == [3] and first[0] != "0" and lens[1:] in ([3, 4], [7]):
        return rules.digits_zh(digits)                         # (212) 555-0199
    if lens == [3, 3, 4] and (all(s in "-‐－" for s in seps) or first in ("400", "800")):
        return rules.digits_zh(digits)                         # 400-810-5888, 555-123-4567
    if lens == [3, 4, 4] and _mobile(digits) and len(set(seps)) == 1:
        return read_digits(digits)                             # 138 0013 8000, 185-0130-1238
    return None


def _marks(s: str, say: Say) -> str:
    """Keywords and the marks between them and a number, rendered as the paragraph renders them (one pause)."""
    return re.sub(r"([，、。])[，、。]+", r"\1", say(s).replace(" ", ""))


def _keyword_code(text: str, m: re.Match, end: int, say: Say) -> tuple[int, int, str] | None:
    """A keyword and the identifier after it (a telephone number, a digit string, grouped for accounts)."""
    at = m.end()
    # 电话(010) 6552-1234: an opening bracket before the digits may be the area code's.
    phone = (m.group("kw") and text[at - 1] in "(（" and _RE_PHONE.match(text, at - 1, end)) \
        or _RE_PHONE.match(text, at, end)
    if phone and (number := _phone_reading(phone.group())) is not None:
        return m.start(), phone.end(), _marks(text[m.start():phone.start()], say) + number
    grouped = _RE_GROUPED if m.group("kw") in _GROUPED else _RE_DIGITS
    d = grouped.match(text, at, end)
    if d is None or len(re.sub(r"\D", "", d.group())) < 3:
        return None
    after = text[d.end():d.end() + 1] if d.end() < end else ""
    if after.isdigit() or (after and after in _NOT_A_COUNT + _EXPRESSION):
        return None
    return m.start(), d.end(), _marks(text[m.start():at], say) + read_digits(re.sub(r"[ \-]", "", d.group()))


def find_codes(text: str, start: int, end: int, say: Say) -> list[tuple[int, int, str]]:
    """(start, end, reading) of the telephone numbers and codes in text[start:end], in order, not overlapping."""
    found: list[tuple[int, int, str]] = []
    for m in _RE_KEYWORD.finditer(text, start, end):
        if (code := _keyword_code(text, m, end, say)) is not None:
            found.append(code)
    for m in _RE_PHONE.finditer(text, start, end):
        if (reading := _phone_reading(m.group())) is not None and not (
                re.fullmatch(r"\d+", m.group()) and text[m.end():m.end() + 1] in tuple(_NOT_A_COUNT)):
            stop = m.end()                           # (a bare 400 number is no amount: 共4008105888元)
            if ext := _RE_EXTENSION.match(text, stop, end):
                reading, stop = reading + "转" + rules.digits_zh(ext.group(1)), ext.end()
            found.append((m.start(), stop, reading))
    found += [(m.start(), m.end(), read_digits(m.group())) for m in _RE_LONG.finditer(text, start, end)]
    found += [(m.start(), m.end(), rules.digits_zh(m.group())) for m in _RE_LEADING_ZERO.finditer(text, start, end)]
    found += [(m.start(1), m.end(1), rules.digits_zh(m.group(1))) for m in _RE_POSTCODE.finditer(text, start, end)]
    found += [(m.start(), m.end(), m.group(1) + rules.digits_zh(m.group(2)) + _marks("/", say) + m.group(3)
               + rules.digits_zh(m.group(4))) for m in _RE_CODE_PAIR.finditer(text, start, end)]
    found += [(m.start(), m.end(), m.group(1) + rules.digits_zh(m.group(2)) + "到" + m.group(1)
               + rules.digits_zh(m.group(3))) for m in _RE_CODE_RANGE.finditer(text, start, end)
              if max(len(m.group(2)), len(m.group(3))) >= 3]
    found += [(m.start(), m.end(),
               rules.digits_zh(m.group(1)) + "到" + rules.digits_zh(m.group(2)) + _marks(m.group(3), say))
              for m in _RE_ROOM_RANGE.finditer(text, start, end)]
    found += [(m.start(), m.end(), rules.digits_zh(m.group(1)) + (m.group(2) or "") + _marks(m.group(3), say))
              for m in _RE_ROOM.finditer(text, start, end)]
    found += [(m.start(), m.end(), _marks(m.group(1), say) + rules.digits_zh(m.group(2)))
              for m in _RE_DOOR.finditer(text, start, end)]
    out: list[tuple[int, int, str]] = []
    for code in sorted(found, key=lambda c: (c[0], -c[1])):
        if not out or code[0] >= out[-1][1]:
            out.append(code)
    return out
