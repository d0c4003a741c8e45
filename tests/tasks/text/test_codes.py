"""Telephone numbers and codes inside Chinese text (tasks/text/codes.py, issue 33): every shape read digit by digit
in its groups, and the neighbours that look alike (dates, ranges, sums, amounts, counts) read as before."""
from __future__ import annotations

from itertools import pairwise

import pytest

from tasks.text.codes import find_codes, read_digits, service_number
from tasks.text.normalize import _say, normalize, normalize_with_map


@pytest.mark.parametrize("src, out", [
    # landlines: an area code with a dash or in brackets, 7-8 digits after it, in groups or not
    ("(010) 6552-1234", "零一零六五五二一二三四"),
    ("（0531）88710000", "零五三一八八七一零零零零"),              # 8 digits shaped like an amount: a phone here
    ("010-65521234", "零一零六五五二一二三四"),
    ("0755-8888 6666", "零七五五八八八八六六六六"),
    ("028-8558-3992", "零二八八五五八三九九二"),
    ("0434-6201100", "零四三四六二零一一零零"),
    ("010-65265376转821", "零一零六五二六五三七六转八二一"),        # an extension
    ("0451-12308", "零四五一一二三零八"),                         # a 5-digit number after an area code
    # mobiles: 1 is 幺, in groups too, after an area code or a country code
    ("138 0013 8000", "幺三八零零幺三八零零零"),
    ("185-0130-1238", "幺八五零幺三零幺二三八"),
    ("13800138000", "幺三八零零幺三八零零零"),
    ("010-13812345678", "零一零幺三八幺二三四五六七八"),
    ("+86 138 0013 8000", "加八六幺三八零零幺三八零零零"),           # the plus is read 加 (issue 41)
    ("+8613921234567", "加八六幺三九二幺二三四五六七"),
    ("0086-13800138000", "零零八六幺三八零零幺三八零零零"),
    # +86 landlines, international prefixes, American numbers inside Chinese
    ("+86-10-6552-1234", "加八六一零六五五二一二三四"),
    ("电话: +(86)(10) 8531-4000", "电话，加八六一零八五三一四零零零"),
    ("电话：+852 5221 8490", "电话，加八五二五二二一八四九零"),       # after a keyword: the plus is not its mark
    ("电话：+65 6509 0110", "电话，加六五六五零九零一一零"),           # 0110 is no service number: 一
    ("请拨011-86-10-8531 4000", "请拨零一一八六一零八五三一四零零零"),
    ("大使馆:+1-202-4952216", "大使馆，加一二零二四九五二二一六"),
    ("他的电话是(212) 555-0199。", "他的电话是二一二五五五零一九九。"),
    # 400/800 numbers; service numbers wetext knows keep 幺, others 一
    ("客服热线400-810-5888", "客服热线四零零八一零五八八八"),
    ("拨打4008105888", "拨打四零零八一零五八八八"),
    ("400 888 6677", "四零零八八八六六七七"),
    ("急救电话120", "急救电话幺二零"),
    ("报警电话是110。", "报警电话是幺幺零。"),
    ("0451-12345市长热线", "零四五一幺二三四五市长热线"),
    ("投诉电话10015", "投诉电话一零零一五"),                          # not a service number of wetext's: 一
    ("拨打911报警", "拨打九一一报警"),
    # keywords across marks: postcodes, accounts, QQ, area codes, ID cards
    ("邮编100080", "邮编一零零零八零"),
    ("邮编：100080", "邮编，一零零零八零"),
    ("邮政编码为102206。", "邮政编码为一零二二零六。"),
    ("郵政區碼:100089", "邮政区码，一零零零八九"),
    ("（研究所 北京 100850）", "研究所北京一零零八五零，"),             # a postcode closing an affiliation
    ("银行帐户:1125 0101 0400 1012 9", "银行帐户，一一二五零一零一零四零零一零一二九"),
    ("收款账号:9558850200000514781", "收款账号，九五五八八五零二零零零零零五一四七八一"),
    ("QQ:104228916", "QQ，一零四二二八九一六"),
    ("欢迎加入QQ群(1009827379)参与讨论", "欢迎加入QQ群，一零零九八二七三七九，参与讨论"),
    ("北京的区号是010", "北京的区号是零一零"),
    ("身份证11010519491231002X", "身份证一一零一零五一九四九一二三一零零二X"),
    ("110101199003074514", "一一零一零一一九九零零三零七四五一四"),     # 17 digits or more: never an amount
    # leading zeros, train numbers in pairs and ranges
    ("上海的是021。", "上海的是零二一。"),
    ("K967/966、K968/965次列车", "K九六七，九六六、K九六八，九六五次列车"),
    ("G1001-G9998", "G一零零一到G九九九八"),
])
def test_codes_read_digit_by_digit(src, out):
    assert normalize(src) == out


@pytest.mark.parametrize("src, out", [
    ("6552-1234=5318", "六千五百五十二减一千二百三十四等于五千三百一十八"),   # no area code: a sum
    ("1-2个", "一到二个"),
    ("3-5天", "三到五天"),
    ("2019-2020", "两千零一十九减两千零二十"),
    ("12-23", "十二月二十三日"),
    ("2019-08-01", "二零一九年八月一日"),
    ("08:30", "八点三十分"),
    ("02开头", "零二开头"),
    ("拨打了3次", "拨打了三次"),
    ("拨打100多次", "拨打一百多次"),                                  # a count after the dial verb
    ("电话费为2000元", "电话费为两千元"),                              # an amount after the keyword
    ("分辨率1920×1080", "分辨率一千九百二十乘一千零八十"),              # a product after the keyword
    ("共4008105888元", "共四十亿零八百一十万五千八百八十八元"),          # a 400-like amount
    ("4000000000", "四十亿"),
    ("123 456 7890", "一百二十三四百五十六七千八百九十"),              # spaced 3-3-4 groups: not a 400 number
    ("A1-A10", "A一，A十"),                                          # a range of short codes: as before
    ("有120人", "有一百二十人"),
    ("27930122", "二七九三零一二二"),                                # bare 8 digits: the landline rule of rules.py
])
def test_lookalikes_keep_their_readings(src, out):
    assert normalize(src) == out


@pytest.mark.parametrize("src, out", [
    # room and flat numbers (issue 41): three to five digits before a room word, or ending an address
    ("他住在1502室。", "他住在一五零二室。"),
    ("请到2305房间找我。", "请到二三零五房间找我。"),
    ("也有 601 号房", "也有六零一号房"),
    ("433 寝室", "四三三寝室"),
    ("东达中心1305A室", "东达中心一三零五A室"),
    ("26楼2606-2607室", "二十六楼二六零六到二六零七室"),
    ("3栋2单元1502室", "三栋二单元一五零二室"),
    ("阳光花园B区5栋8楼803，", "阳光花园B区五栋八楼八零三，"),
    ("锦绣家园12栋101的张阿姨", "锦绣家园十二栋一零一的张阿姨"),
    ("融科望京中心B座1103", "融科望京中心B座一一零三"),
    ("理想大厦1203", "理想大厦一二零三"),
    ("凤溪路211号1幢1单元401室", "凤溪路二一一号一幢一单元四零一室"),   # a house number of 3+ digits: 号 rule
])
def test_rooms_and_flats_read_digit_by_digit(src, out):
    assert normalize(src) == out


@pytest.mark.parametrize("src, out", [
    ("12号房大一些", "十二号房大一些"),                              # one or two digits: a cardinal
    ("远大中心B座14层", "远大中心B座十四层"),                          # a floor
    ("改到B座12层大会议室", "改到B座十二层大会议室"),
    ("户型3室2厅1卫", "户型三室两厅一卫"),                             # a layout counts rooms: 两
    ("2室1厅", "两室一厅"),
    ("这栋楼高300米", "这栋楼高三百米"),                               # a height after 楼
    ("那座1000年前的寺", "那座一千年前的寺"),
    ("大楼1000多人", "大楼一千多人"),
    ("酒店共300房间", "酒店共三百房间"),                               # a count of rooms
    ("室内温度", "室内温度"),
    ("2单元", "二单元"),
])
def test_counts_and_floors_near_rooms_stay_numbers(src, out):
    assert normalize(src) == out


def test_service_numbers_are_wetexts():
    assert service_number("110") and service_number("12345") and service_number("10086")
    assert not service_number("911") and not service_number("10015") and not service_number("12308")
    assert not service_number("0110") and not service_number("0120")                # no service number starts with 0
    assert read_digits("12306") == "幺二三零六"
    assert read_digits("12308") == "一二三零八"
    assert read_digits("13800138000") == "幺三八零零幺三八零零零"
    assert read_digits("１０８") == "一零八"                             # full-width digits


def test_a_keyword_is_inside_its_codes_span():
    text = "请寄至邮编：100080，或拨打电话(010) 6552-1234。"
    codes = find_codes(text, 0, len(text), _say)
    assert [text[s:e] for s, e, _ in codes] == ["邮编：100080", "电话(010) 6552-1234"]
    assert [r for _, _, r in codes] == ["邮编，一零零零八零", "电话零一零六五五二一二三四"]


def test_a_cut_between_any_two_spans_reads_the_same():
    """The segmenter may cut between any two spans and the coverage audit reads each segment's source alone: a
    code's reading may not depend on text outside its span."""
    src = ("咨询电话:0731-84792176，邮编：100080；QQ群(1009827379)，拨打911或+86-10-65612308，"
           "帐号:291020120105001210，乘坐K967/966次。北京的区号是010，客服热线400-887-7108转821。"
           "住在3栋2单元1502室，理想大厦1203，26楼2606-2607室，5栋8楼803。")
    whole, spans = normalize_with_map(src)
    for cut in sorted({s.end for s in spans if 0 < s.end < len(src)}):
        halves = normalize(src[:cut]) + normalize(src[cut:])
        assert "".join(c for c in halves if c.isalnum()) == "".join(c for c in whole if c.isalnum()), cut


def test_spans_tile_the_source():
    src = "电话：(0531)88710000，手机138 0013 8000。"
    _, spans = normalize_with_map(src)
    assert spans[0].start == 0 and spans[-1].end == len(src)
    assert all(a.end == b.start for a, b in pairwise(spans))
