"""Our rules around wetext's Chinese TN FSTs: general fixes for patterns wetext reads wrongly.

`pre(window)` rewrites digit patterns into Chinese before wetext sees them (wetext leaves Chinese alone);
`post(out)` fixes wetext's output.  Each rule is a general pattern, not a per-case patch; the golden sets
(tests/data/tn, scored by benchmarks/tn_score.py) disagree with each other on a few conventions - the choices are
noted per rule and in docs/text-frontend.md.
"""
from __future__ import annotations

import re
from functools import lru_cache

_DIGITS = "零一二三四五六七八九"
_CURRENCY = {"$": "美元", "＄": "美元", "US$": "美元", "€": "欧元", "£": "英镑", "₩": "韩元", "¥": "元", "￥": "元",
             "HK$": "港元", "A$": "澳元"}
_CODES = {"CNY": "人民币", "RMB": "人民币", "USD": "美元", "HKD": "港元", "EUR": "欧元", "GBP": "英镑",
          "JPY": "日元", "KRW": "韩元"}
# Events named by their date read digit by digit: 911事件, 918事变, 512地震, 930新政.
_EVENT_AFTER = "新政|政策|事件|事变|惨案|运动|地震|起义|暴动|大案"
# After "N年", words that make it a duration (二十年后) rather than a year (86年).
_DURATION_AFTER = "后前来内里间多半之以左的中代"
# Before a 2- or 3-digit "N年", characters that make it a year (于86年, 至475年); after any other Chinese character it
# is a count of years (仅用22年, 道光22年, 法国（140年）).  See _short_year.
_YEAR_BEFORE = "于在从自至到是为"
# Latin unit symbols a space may separate from their number (2.5 m -> 2.5m, which wetext reads 二点五米).
_SPACED_UNITS = "km|cm|mm|m|kg|mg|g|ml|mL|L"
# Measure words after which 2 is read 两 (wetext does this for 个/岁 only): 2次 -> 两次, 2枚 -> 两枚.
_MEASURE_WORDS = ("次|遍|趟|位|种|件|本|张|条|只|头|匹|家|天|周|倍|根|把|双|对|层|间|辆|架|艘|座|台|"
                  "部|场|封|篇|首|句|份|名|人|碗|杯|口|声|步|下|眼|样|枚|颗|粒|例|户|所|支|项|批|届|"
                  "轮|集|期|成|株|棵|片|幅|组|套|瓶|盒|"
                  "包|节|块钱|分钟|小时|公里|斤|公斤|吨|里路|点")
# Around an h:mm:ss that make it a duration (用时2:15:08, 以2:01:09夺冠, 2:30:00以内) rather than a clock time with
# seconds (于5:35:36发射, 00:30:00): words just before it, and words right after it.  See _hms.
_DURATION_BEFORE = (r"(?:用时|耗时|历时|费时|成绩|时长|跑出|游出|骑出|仅用|净时|完赛时间|纪录|记录)"
                    r"[为是了：:\s]{0,2}$|以$")
_DURATION_FOLLOWS = ("以内|以下|之内|内|的成绩|的个人|的世界|的全国|的亚洲|的赛会|的纪录|的记录|的时间|"
                     "的好成绩|夺冠|完赛|跑完|夺得|获得|位列|名列|排名")
# Verbs after a score "N-M" / "N:M" (2-1击败, 0-0打平, 91-99负于): the dash or colon is read 比.
_SCORE_VERBS = "击败|战胜|打平|战平|逼平|负于|败给|不敌|小胜|小负|险胜|惜败|完胜|逆转|力克|胜|负|败|赢|输"


def digits_zh(s: str) -> str:
    """Read a digit string one digit at a time: 2024 -> 二零二四."""
    return "".join(_DIGITS[ord(d) - 48] if "0" <= d <= "9" else d for d in s)


def cardinal_zh(s: str) -> str:
    """A non-negative integer as a cardinal with 二 (not 两): 10 -> 十, 102 -> 一百零二, 10000100000 -> 一百亿零十万.

    一十 is kept only in the lowest group after a zero (50010 -> 五万零一十); a 万 group reads 十万."""
    s = s.lstrip("0") or "0"
    if len(s) > 16:
        return digits_zh(s)
    n = int(s)
    if n == 0:
        return "零"
    units = ["", "十", "百", "千"]
    bigs = ["", "万", "亿", "万亿"]
    groups = []
    while n:
        groups.append(n % 10_000)
        n //= 10_000
    out: list[str] = []
    zero_gap = False
    for gi in range(len(groups) - 1, -1, -1):
        g = groups[gi]
        if g == 0:
            zero_gap = bool(out)
            continue
        leading = not out
        if out and (zero_gap or g < 1000):
            out.append("零")
        zero_gap = False
        ds = str(g) if leading else f"{g:04d}"
        part: list[str] = []
        pending_zero = False
        for i, d in enumerate(ds):
            pos = len(ds) - 1 - i
            if d == "0":
                pending_zero = bool(part)
                continue
            if pending_zero:
                part.append("零")
                pending_zero = False
            part.append(_DIGITS[int(d)] + units[pos])
        text = "".join(part)
        if text.startswith("一十") and (leading or gi > 0):
            text = text[1:]
        out.append(text + bigs[gi])
    return "".join(out)


def decimal_zh(s: str, *, drop_trailing_zeros: bool = False) -> str:
    """12.50 -> 十二点五零 (or 十二点五 with drop_trailing_zeros); integers as cardinals."""
    if "." not in s:
        return cardinal_zh(s)
    whole, frac = s.split(".", 1)
    if drop_trailing_zeros:
        frac = frac.rstrip("0")
    return cardinal_zh(whole or "0") + ("点" + digits_zh(frac) if frac else "")


_NUM = r"\d+(?:\.\d+)?"
_NOT_AFTER_NUMBER = r"(?<![\d.%％])"           # a sign here is a minus, not the dash of a range (25-30℃)


def _valid_md(m: str, d: str) -> bool:
    return 1 <= int(m) <= 12 and 1 <= int(d) <= 31


def _date3(m: re.Match) -> str:
    y, mo, d = m.group(1), m.group(2), m.group(3)
    if not _valid_md(mo, d):
        return m.group(0)
    return f"{digits_zh(y)}年{cardinal_zh(mo)}月{cardinal_zh(d)}日"


def _money_scaled(m: re.Match) -> str:
    cur = _CURRENCY.get(m.group(1), "")
    return f"{decimal_zh(m.group(2))}{m.group(3)}{cur}"


def _range(m: re.Match) -> str:
    """A range read with 到 (or the 至/到 written): 45-60日 -> 四十五到六十日, 0.03%-2% -> 百分之零点零三到百分之二,
    2004-2005赛季 -> 二零零四到二零零五赛季 (two 4-digit years digit by digit)."""
    a, pa, sep, b, pb = m.groups()
    years = (len(a) == len(b) == 4 and "1000" <= a < b <= "2099"
             and (a >= "1900" or m.string.startswith("年", m.end())))
    ordinal = m.string[max(0, m.start() - 1):m.start()] == "第"        # 第200-300名: 第二百到三百名
    return (_range_end(a, pa, years, ordinal) + (sep if sep in "至到" else "到")
            + _range_end(b, pb, years, ordinal))


def _range_end(n: str, percent: str, years: bool, ordinal: bool = False) -> str:
    if years:
        return digits_zh(n)
    if percent:
        return "百分之" + decimal_zh(n, drop_trailing_zeros=True)
    zh = decimal_zh(n)                    # a leading 2 before 百/千/万/亿 is 两, as wetext reads 200 alone
    return "两" + zh[1:] if not ordinal and zh[:1] == "二" and zh[1:2] in ("百", "千", "万", "亿") else zh


def _ratio(m: re.Match) -> str:
    """Numbers joined by colons read with 比 when it is not a clock time: a ratio sign ∶ or a decimal in it
    (11∶1 -> 十一比一, 0.4:39.5:60.1 -> 零点四比三十九点五比六十点一)."""
    parts = re.split(r"\s?[:：∶]\s?", m.group(0))
    if "∶" not in m.group(0) and not any("." in p for p in parts):
        return m.group(0)
    return "比".join(decimal_zh(p) for p in parts)


def _short_year(m: re.Match) -> str:
    """A 2- or 3-digit N年 is a year read digit by digit (86年 -> 八六年, 472年 -> 四七二年) at the start, after a mark
    or one of _YEAR_BEFORE, before a month, or in brackets after a reign year (大历十四年（779年）); after other
    words it is a count of years (仅用二十二年, 道光二十二年, 法国（一百四十年）)."""
    before, n = m.group(1), m.group(2)
    if before in ("（", "("):
        year = m.string[m.start(1) - 1:m.start(1)] == "年"
    else:
        year = not before or before in _YEAR_BEFORE or not ("\u4e00" <= before <= "\u9fff")
    year = year or re.match(r"\d{1,2}月|[一二三四五六七八九十]+月", m.string[m.end():]) is not None
    return before + (digits_zh(n) if year else cardinal_zh(n)) + "年"


def _clock(hh: str, mm: str) -> str:
    """15, 15 -> 十五点十五分; 9, 05 -> 九点零五分; 8, 00 -> 八点; 2, 30 -> 两点三十分 (a clock hour 2 is 两点)."""
    minutes = "" if mm == "00" else ("零" + digits_zh(mm[1]) if mm[0] == "0" else cardinal_zh(mm)) + "分"
    return f"{_count(hh)}点{minutes}"


def _count(n: str) -> str:
    """A count as said before a unit: 2 -> 两 (两点, 两小时, 两分), otherwise the cardinal."""
    return "两" if n.lstrip("0") == "2" else cardinal_zh(n)


def _padded(n: str, after: bool) -> str:
    """A two-digit minute or second field: 08 -> 零八 after a larger unit (两小时零八分), 8 alone; 15 -> 十五."""
    if n[0] == "0" and n != "00":
        return ("零" if after else "") + (digits_zh(n[1]) if after else _count(n[1]))
    return cardinal_zh(n)


def _duration(h: str, mm: str, ss: str, frac: str = "") -> str:
    """A clock-style duration: 2:15:08 -> 两小时十五分零八秒, 1:02:03 -> 一小时零二分零三秒, 2:30:00 -> 两小时三十分,
    2:00:35 -> 两小时零三十五秒, 0:45:12 -> 四十五分十二秒; m:ss.ff (h "") 1:53.61 -> 一分五十三秒六一."""
    out = _count(h) + "小时" if h.strip("0") else ""
    if mm != "00" and mm.strip("0"):
        out += _padded(mm, bool(out)) + "分"
    elif out and (ss.strip("0") or frac):
        out += "零"                                       # 两小时零三十五秒: the minutes are silent
    if ss.strip("0") or frac or not out:
        out += (_padded(ss, bool(out)) if ss.strip("0") else "零") + "秒" + digits_zh(frac)
    return out


def _hms(m: re.Match) -> str:
    """h:mm:ss is a duration where the words around it say so (_DURATION_BEFORE / _DURATION_FOLLOWS) or the hours
    cannot be a clock's (over 24); otherwise it is left to wetext, which reads a clock time (于5:35:36发射)."""
    h, mm, ss, frac = m.groups()
    before = m.string[max(0, m.start() - 8):m.start()]
    duration = (int(h) > 24 or re.search(_DURATION_BEFORE, before) is not None
                or re.match(_DURATION_FOLLOWS, m.string[m.end():]) is not None)
    return _duration(h, mm, ss, frac or "") if duration else m.group(0)


def _m_dot_n(m: re.Match) -> str:
    mo, d = m.group(1), m.group(2)
    if len(mo) == 2 and len(d) == 2 and (mo[0] == "0" or d[0] == "0") and _valid_md(mo, d):
        return f"{cardinal_zh(mo)}月{cardinal_zh(d)}日"
    return decimal_zh(m.group(0))


def _m_ok(s: str) -> bool:
    return 1 <= int(s) <= 12


def _era_full(m: re.Match) -> str:
    rest = m.group(2) or ""
    rest = re.sub(r"(\d{1,2})([月日])", lambda k: cardinal_zh(k.group(1)) + k.group(2), rest)
    bc = m.group(3).lower().startswith("b")
    return ("公元前" if bc else "公元") + digits_zh(m.group(1)) + "年" + rest


def _phone_like(s: str) -> bool:
    return len(s) == 11 and s[0] == "1" and s[1] in "3456789"


@lru_cache(maxsize=1)
def wetext_zh():
    """wetext's Chinese TN normalizer (offline FSTs in the wheel), loaded once."""
    from wetext import Normalizer
    return Normalizer(lang="zh", operator="tn")


@lru_cache(maxsize=65_536)
def wetext_zh_normalize(text: str) -> str:
    """wetext's Chinese reading of `text` (cached: a book repeats its number windows)."""
    return wetext_zh().normalize(text)


@lru_cache(maxsize=4096)
def _unit_reading(word: str) -> str:
    """The Latin letters wetext leaves of `word` after a number: "" for a unit it reads whole (km -> 公里)."""
    return "".join(c for c in wetext_zh().normalize("1" + word) if c.isascii() and c.isalpha())


def zh_unit(word: str) -> bool:
    """Is `word` a unit wetext's Chinese grammar reads after a number (km, kg, mph, min)?"""
    return _unit_reading(word) == ""


def _number_before_word(m: re.Match) -> str:
    """A unit must end at a word boundary: wetext reads the first letter of an English word after a number as a
    unit (3 hours -> 三小时ours, 6 sheep -> 六秒heep, 2 men -> 两米en); then the number is read alone."""
    left = _unit_reading(m.group(3))
    if left and left != m.group(3) and m.group(3).endswith(left):
        return decimal_zh(m.group(1)) + m.group(2) + m.group(3)
    return m.group(0)


# (pattern, replacement) in order.  Each rewrites digits into Chinese, so later rules and wetext skip them.
_PRE: list[tuple[re.Pattern, object]] = [
    # A number before an English word that is no unit: 3 hours -> 三 hours (wetext: 三小时ours).
    (re.compile(r"(?<![\d.A-Za-z])(\d+(?:\.\d+)?)( ?)([A-Za-z]{2,})(?![A-Za-z])"), _number_before_word),
    # Era suffixes: 2934ad -> 公元二九三四年, 1234b.c. -> 公元前一二三四年, 1823年3月bc -> 公元前一八二三年三月.
    (re.compile(r"(\d+)(?:年((?:\d{1,2}月)?(?:\d{1,2}日)?))?\s*((?:a\.?d\.?|b\.?c\.?)(?![A-Za-z]))", re.I),
     _era_full),
    # Years in brackets, alone or as a span (life dates in notes): （1854—1923） -> （一八五四到一九二三）.
    (re.compile(r"(?<=[（(])\s*(1\d{3}|20\d{2})\s*(?:[—–\-~～－]{1,2}\s*(1\d{3}|20\d{2})?\s*)?(?=[）)？?])"),
     lambda m: digits_zh(m.group(1)) + ("到" + digits_zh(m.group(2)) if m.group(2) else "")),
    # Thousands separators go: 213,619 -> 213619 (wetext reads the groups apart); so does a space before a unit.
    (re.compile(r"(?<=\d),(?=\d{3}(?!\d))|(?<=\d) (?=(?:" + _SPACED_UNITS + r")(?![A-Za-z]))"), ""),
    # A hyphen between letters or a name and a number is silent: CCTV-6 -> CCTV六, U-17, 礼炮-6号.
    (re.compile(r"(?<=[A-Za-z])[-‐](?=\d)|(?<=[\u4e00-\u9fff])[-‐](?=\d+号)|(?<=\d)[-‐](?=[A-Z]{2})"), ""),   # 3-MCPD
    # Units per unit: 875米/秒 -> 八百七十五米每秒, 21.83亿元/平方公里 (Latin units are wetext's: 10km/h ->
    # 每小时十公里).
    (re.compile(r"(\d\s?[\u4e00-\u9fff]{1,4})/(?=[\u4e00-\u9fff])"), r"\1每"),
    # Negative temperatures: -10°C -> 零下十度 (wetext: 负十摄氏度).
    (re.compile(_NOT_AFTER_NUMBER + r"[-−]\s?(" + _NUM + r")\s?(?:°C|℃|°|度)"),
     lambda m: f"零下{decimal_zh(m.group(1))}度"),
    # Negative fractions and percentages: the sign goes in front (wetext: 三分之负一).
    (re.compile(_NOT_AFTER_NUMBER + r"[-−](\d+)/(\d+)"),
     lambda m: f"负{cardinal_zh(m.group(2))}分之{cardinal_zh(m.group(1))}"),
    (re.compile(_NOT_AFTER_NUMBER + r"[-−](" + _NUM + r")[%％]"),
     lambda m: f"负百分之{decimal_zh(m.group(1), drop_trailing_zeros=True)}"),
    (re.compile(r"[-−](?=百分之|千分之|\d+分之)"), "负"),
    # Scores before a result verb: 2–1击败 -> 二比一击败, 91-99负于, 2:3败给 (wetext: 减, or a clock time).
    (re.compile(r"(?<![\d.])(\d+)\s?[-–—:：]\s?(\d+)(?=\s?(?:" + _SCORE_VERBS + r"))"),
     lambda m: f"{cardinal_zh(m.group(1))}比{cardinal_zh(m.group(2))}"),
    # Ranges before a word: 45-60日, 0.5－1厘米, 20～30公里, 0—14岁, 119至156枚, 0.03%-2%的 -> 到 (wetext: 减, 负, a
    # date or a phone number).  A bare 12-23 is left to the date rules; area codes (010-...) are not ranges.
    (re.compile(r"(?<![\d.A-Za-z/:：\-])(?!0\d\d)(" + _NUM + r")([%％]?)\s?([-–—~～]{1,2}|至|到)\s?(" + _NUM
                + r")([%％]?)(?![\d.:：/\-])(?=\s?[\u4e00-\u9fff])"), _range),
    # ... and between dated words: 10月—11月 -> 十月到十一月.
    (re.compile(r"(?<=[年月日号时])\s?[-–—~～]{1,2}\s?(?=\d{1,4}[年月日号时])"), "到"),
    # Percentages drop trailing decimal zeros: 0.70% -> 百分之零点七.
    (re.compile(r"(" + _NUM + r")[%％]"), lambda m: f"百分之{decimal_zh(m.group(1), drop_trailing_zeros=True)}"),
    # Money: currency symbol before a scaled amount ($1.5万 -> 一点五万美元), ₩, and 元 amounts drop .00.
    (re.compile(r"(US\$|HK\$|A\$|[$＄€£₩¥￥])\s?(" + _NUM + r")([万亿])"), _money_scaled),
    (re.compile(r"₩\s?(" + _NUM + r")"), lambda m: f"{decimal_zh(m.group(1))}韩元"),
    (re.compile(r"(?<![A-Za-z])(" + "|".join(_CODES) + r")\s?(" + _NUM + r")([万亿]?)"),
     lambda m: f"{decimal_zh(m.group(2))}{m.group(3)}{_CODES[m.group(1)]}"),
    (re.compile(r"(\d+\.\d+)(?=元|块|美元|欧元|英镑|港元|日元|韩元)"),
     lambda m: decimal_zh(m.group(1), drop_trailing_zeros=True)),
    # Dates: y/m/d and y.m.d with 2- or 4-digit years, and 2019·2·10.
    (re.compile(r"(?<![\d.])(\d{4}|\d{2})[/.·・](\d{1,2})[/.·・](\d{1,2})(?![\d.])"), _date3),
    # Version numbers left over: 6.5.1 -> 六点五点一 (wetext: 六.五点一); four parts are an address (127.0.0.1).
    (re.compile(r"(?<![\d.])\d+(?:\.\d+){2}(?![\d.])"),
     lambda m: "点".join(map(cardinal_zh, m.group(0).split(".")))),
    # Month and day with leading zeros or 2 (wetext: 零八月, 两日).
    (re.compile(r"(?<![\d.])(\d{1,2})(?=月)"), lambda m: cardinal_zh(m.group(1)) if _m_ok(m.group(1)) else m.group(0)),
    (re.compile(r"(?<=月)(\d{1,2})(?=[日号])"), lambda m: cardinal_zh(m.group(1))),
    (re.compile(r"(?<![\d.])(\d{1,2})(?=[日号](?!元))"),
     lambda m: cardinal_zh(m.group(1)) if 1 <= int(m.group(1)) <= 31 else m.group(0)),
    # Years: 86年 -> 八六年, 公元前202年 -> 公元前二零二年; a count of years stays a number (二十年后, 仅用二十二年).
    (re.compile(r"(公元前?|前)(\d{1,4})年"), lambda m: m.group(1) + digits_zh(m.group(2)) + "年"),
    (re.compile(r"(?<![\d.])(.?)(?<![\d.])(\d{2,3})年(?![" + _DURATION_AFTER + r"])"), _short_year),
    (re.compile(r"(?<![\d.])(\d{5,})(?=年)"), lambda m: cardinal_zh(m.group(1))),   # no year has 5 digits: 一万年
    # Clock-style durations: 用时2:15:08 -> 用时两小时十五分零八秒, 2:30:00以内 (the words around decide: _hms), and
    # sports times with hundredths, m:ss.ff: 1:53.61 -> 一分五十三秒六一 (a clock has no decimals; wetext: a ratio).
    (re.compile(r"(?<![\d.:：∶])(\d{1,3})[:：]([0-5]\d)[:：]([0-5]\d)(?:\.(\d{1,3}))?(?![\d:：∶]|\.\d)"), _hms),
    (re.compile(r"(?<![\d.:：∶比])(\d{1,2})[:：]([0-5]\d)\.(\d{1,3})(?![\d.:：∶])"),
     lambda m: _duration("", m.group(1).zfill(2), m.group(2), m.group(3))),
    # Clock times written with 分: 15:15分 -> 十五点十五分 (wetext reads N:M分 as a score).
    (re.compile(r"(?<![\d.])([01]?\d|2[0-4])[:：]([0-5]\d)分"), lambda m: _clock(m.group(1), m.group(2))),
    # Ratios: 11∶1 -> 十一比一, 0.4:39.5:60.1 -> 零点四比三十九点五比六十点一 (a clock time has no decimals).
    (re.compile(r"(?<![\d.:：∶])" + _NUM + r"(?:\s?[:：∶]\s?" + _NUM + r")+(?![\d.:：∶])"), _ratio),
    # Scores: 比分 17:16 -> 十七比十六.
    (re.compile(r"(比分|比数|战平|战胜|击败|负于|比赛)([^\d，。]{0,6}?)(\d+)[:：](\d+)"),
     lambda m: f"{m.group(1)}{m.group(2)}{cardinal_zh(m.group(3))}比{cardinal_zh(m.group(4))}"),
    # Heights and lengths in metres and centimetres: 2米29 -> 两米二九 (wetext: 两米二十九).
    (re.compile(r"(?<![\d.])(\d)米(\d{2})(?![\d.])"),
     lambda m: f"{'两' if m.group(1) == '2' else cardinal_zh(m.group(1))}米{digits_zh(m.group(2))}"),
    # Hundredths of a second: 10秒25 -> 十秒二五, 9秒83 -> 九秒八三 (wetext: 十秒二十五).
    (re.compile(r"(?<![\d.])(\d+)秒(\d{2})(?!\d)"), lambda m: f"{cardinal_zh(m.group(1))}秒{digits_zh(m.group(2))}"),
    # Products, and plus-minus: 4×100米, 4x100米 -> 四乘一百米 (wetext: 四乘十零), 58.7 ± 0.2 -> 五十八点七正负零点二.
    (re.compile(r"(" + _NUM + r")\s?[×xX]\s?(" + _NUM + r")"),
     lambda m: f"{decimal_zh(m.group(1))}乘{decimal_zh(m.group(2))}"),
    (re.compile(r"\s?±\s?(?=\d)"), "正负"),
    # No.5 -> 五号: "No." abbreviates 号 (No.5香水 is 五号香水).
    (re.compile(r"(?<![A-Za-z])[Nn][Oo]\.\s?(\d+)"), lambda m: cardinal_zh(m.group(1)) + "号"),
    # Country codes: +86 -> 加八六 (then the number itself; tasks/text/codes.py reads most telephone numbers first).
    (re.compile(r"\+(\d{1,3})\s?(?=\d{7,})"), lambda m: "加" + digits_zh(m.group(1))),
    # A flat's unit is named, not counted: 2单元 -> 二单元 (wetext: 两单元); a layout counts rooms: 3室2厅1卫 ->
    # 三室两厅一卫 (wetext: 三室二厅).
    (re.compile(r"(?<![\d.])(\d{1,2})(?=单元)"), lambda m: cardinal_zh(m.group(1))),
    (re.compile(r"(?<![\d.])(\d)室(\d)厅(?:(\d)卫)?"),
     lambda m: f"{_count(m.group(1))}室{_count(m.group(2))}厅" + (f"{_count(m.group(3))}卫" if m.group(3) else "")),
    # Identifiers: numbers before 号 with 3+ digits (not dates) digit by digit; after 电话/编号/… they are codes
    # (tasks/text/codes.py, before the number windows).  Mobile numbers and the words wetext knows (手机, 尾号) are
    # left to wetext, which reads 1 as 幺 there.
    (re.compile(r"(?<![\d.])(\d{3,})(?=[”\"’」』]?号(?!码))"), lambda m: digits_zh(m.group(1))),
    (re.compile(r"(?<![\d.])(\d{3,4})(?=" + _EVENT_AFTER + r")"), lambda m: digits_zh(m.group(1))),
    # Model names: letters (or an upper-case name and a space: IBM 7094, ISO 9660) then 3+ digits read digit by
    # digit (Xbox360 -> Xbox三六零, A320; wetext: 三百六十) - a round number is the number (CDMA2000 -> CDMA两千,
    # GSM 900 -> GSM九百).
    (re.compile(r"(?:(?<=[A-Za-z])|(?<=[A-Z]{2} ))(\d{3,})(?![\d.])"),
     lambda m: "两" + cardinal_zh(m.group(1))[1:] if re.fullmatch(r"2000+", m.group(1))
     else (cardinal_zh(m.group(1)) if re.fullmatch(r"[1-9]00+", m.group(1)) else digits_zh(m.group(1)))),
    # A bare 8-digit number - no unit, word or sign touching it - is a landline number (8 digits in China's
    # big cities), read digit by digit, unless it is shaped like an amount: round (ends in 00) or with a run
    # of zeros (10000000 -> 一千万, 10001111 -> 一千万一千一百一十一).
    (re.compile(r"(?<![\w.,+\-−])([1-9]\d{7})(?![\w.,%％])"),
     lambda m: m.group(1) if re.search(r"000|00$", m.group(1)) else digits_zh(m.group(1))),
    # Grams: 1.2g -> 一点二克.
    (re.compile(r"(" + _NUM + r")\s?g(?![A-Za-z])"), lambda m: decimal_zh(m.group(1)) + "克"),
    # m.n is a decimal, not a date (12.9英寸 -> 十二点九; wetext: 十二月九日) - unless it is written like a
    # date with a leading zero (08.08 -> 八月八日), or money/units follow or precede (wetext reads those).
    (re.compile(r"(?<![\d.$¥￥€£₩A-Za-z\-−])(\d{1,2})\.(\d{1,2})(?![\d.]|日|号|[A-Za-z%°′″])"), _m_dot_n),
    # Leading-dot decimals: .22口径 -> 零点二二.
    (re.compile(r"(?<![0-9A-Za-z.])\.(\d+)"), lambda m: "零点" + digits_zh(m.group(1))),
    # Long plain integers (9-16 digits) that are not phone-shaped: cardinals (wetext reads them digit by digit).
    (re.compile(r"(?<![\d.,+\-])([1-9]\d{8,15})(?![\d.,])"),
     lambda m: m.group(0) if _phone_like(m.group(1)) else cardinal_zh(m.group(1))),
    # Ordinals never take 两: 第2名 -> 第二名, 第200个 -> 第二百个 (wetext: 第两名, 第两百个).  After the 号 rules
    # (第2758号 stays 第二七五八号) and the ranges (第3-5章).
    (re.compile(r"第\s?(\d+)(?![\d.,])"), lambda m: "第" + cardinal_zh(m.group(1))),
    # 2 before a measure word is 两 (wetext does this for 个/岁 but not for 次/遍/天/...): 2次 -> 两次, and a clock
    # hour: 2点 -> 两点 (晚上2点, 2点半).
    (re.compile(r"(?<![\d.第])2(?=(?:" + _MEASURE_WORDS + r"))"), "两"),
    # A minus sign left in front of a verbalized number: 负.
    (re.compile(r"(?<![0-9A-Za-z])[-−](?=[零一二三四五六七八九十两])"), "负"),
]


def pre(text: str) -> str:
    """Rewrite the patterns wetext reads wrongly (run before wetext)."""
    for pat, repl in _PRE:
        if any(c.isdigit() for c in text) or "-" in text:
            text = pat.sub(repl, text)
    return text


_POST: list[tuple[re.Pattern, str]] = [
    (re.compile(r"(?<![一二三四五六七八九十百千点第])二千"), "两千"),  # 2xxx at a number or group start: 两千
    (re.compile(r"两(?=分之)"), "二"),                 # 二分之一, never 两分之一
]


def post(text: str) -> str:
    """Fix wetext's output (run after wetext)."""
    for pat, repl in _POST:
        text = pat.sub(repl, text)
    return text
