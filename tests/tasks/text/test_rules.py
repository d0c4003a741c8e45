"""Each of our TN rules around wetext, pinned by examples (see tasks/text/rules.py for the conventions)."""
from __future__ import annotations

import pytest

from tasks.text.normalize import normalize
from tasks.text.rules import cardinal_zh, decimal_zh, digits_zh


@pytest.mark.parametrize("src, out", [
    # dates
    ("5月2日", "五月二日"),                              # wetext: 两日
    ("2015年08月08号", "二零一五年八月八号"),              # leading zeros
    ("12/2/2", "一二年二月二日"),                        # 2-digit year y/m/d
    ("2019·2·10", "二零一九年二月十日"),
    ("08.08", "八月八日"),                              # written like a date
    ("2934ad", "公元二九三四年"),
    ("1234b.c.", "公元前一二三四年"),
    ("1823年3月bc", "公元前一八二三年三月"),
    ("她出生于86年8月18日", "她出生于八六年八月十八日"),      # 2-digit year
    ("20年后", "二十年后"),                              # ... but a duration stays a number
    ("公元前202年", "公元前二零二年"),
    # negatives, percentages, money
    ("-10°C", "零下十度"),                              # wetext: 负十摄氏度
    ("-1/3", "负三分之一"),                              # wetext: 三分之负一
    ("-98%", "负百分之九十八"),
    ("-百分之1", "负百分之一"),
    ("0.70%", "百分之零点七"),
    ("36.00元", "三十六元"),
    ("$1.5万", "一点五万美元"),
    ("₩100", "一百韩元"),
    ("CNY 1.25", "一点二五人民币"),
    ("5又2分之1", "五又二分之一"),
    ("1.2g", "一点二克"),
    # decimals that wetext reads as dates
    ("12.9英寸", "十二点九英寸"),
    (".22口径", "零点二二口径"),
    # identifiers, scores, big numbers
    ("编号27149", "编号二七一四九"),
    ("“26314”号", "二六三一四号"),
    ("投诉电话10015", "投诉电话一零零一五"),
    ("比分测试17:16", "比分测试十七比十六"),
    ("110111111", "一亿一千零一十一万一千一百一十一"),    # wetext: digit by digit
    ("第10000100000", "第一百亿零十万"),
    ("第3-5章", "第三到五章"),                           # wetext: 第三减五章
    ("27930122", "二七九三零一二二"),                    # a bare 8-digit number: a landline
    ("10000000", "一千万"),                              # ... unless shaped like an amount
    ("10001111", "一千万一千一百一十一"),
    ("人口13245678人", "人口一千三百二十四万五千六百七十八人"),   # a unit touches it: an amount
    ("930新政策", "九三零新政策"),                       # events named by their date
    ("911事件", "九一一事件"),
    ("分辨率为1024", "分辨率为一零二四"),
    ("2次", "两次"),
    ("第2次", "第二次"),
    ("2点半", "两点半"),
    ("2点15分", "两点十五分"),
    ("-1.5亿", "负一点五亿"),
    ("1 / 2", "二分之一"),
    ("2 ≤ 4", "二小于等于四"),
    ("No.1", "No一"),
    ("这附近有atm", "这附近有ATM"),                      # lowercase initialisms are spelled out
    ("他是这个公司的c e o", "他是这个公司的CEO"),
    ("用Java写", "用Java写"),                            # capitalized words are left alone
])
def test_rule(src, out):
    assert normalize(src) == out


@pytest.mark.parametrize("n, zh", [("0", "零"), ("10", "十"), ("12", "十二"), ("102", "一百零二"),
                                   ("1010", "一千零一十"), ("20000", "二万"), ("100005", "十万零五"),
                                   ("50010", "五万零一十"), ("10000100000", "一百亿零十万"),
                                   ("120000000", "一亿二千万"), ("12345678901234567", "一二三四五六七八九零一二三四五六七")])
def test_cardinal(n, zh):
    assert cardinal_zh(n) == zh


def test_decimal_and_digits():
    assert decimal_zh("12.50") == "十二点五零"
    assert decimal_zh("12.50", drop_trailing_zeros=True) == "十二点五"
    assert decimal_zh("3.00", drop_trailing_zeros=True) == "三"
    assert digits_zh("2024") == "二零二四"
