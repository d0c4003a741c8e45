"""Quotes labelled by hand, for the speaker-attribution measurement (tests/tasks/text/test_quotes.py).

Labelled by reading the texts, before the attribution code was written.  Each entry is one quote, in reading
order: (paragraph index in the chapter, the first characters of what is inside the quote marks, the speaker or
None).  The first characters are compared by their letters and ideographs only (marks and spaces ignored).

The rule for a label: the speaker is the person the text itself names as the one who speaks, in the quote's
attribution: the sentence that introduces the quote (back to the previous sentence end or quote, across a
paragraph break when the previous paragraph ends with "…說：") or the clause right after it ("…”母親說。"),
written as the text writes it (Traditional here).  A title used as a name for one person counts (賈母, 王夫人,
二舅母, 母親, 掌櫃).  None when the attribution names nobody: no subject at all (the speaker follows only from
the turn-taking or an earlier sentence), a pronoun (他, 我), an indefinite or collective noun (一個丫鬟, 人,
眾人, 眾姊妹, 旁人, 一個喝酒的人), or an inscription or note without a speaker.

TERMS are quoted words that are not speech (a sign, a name, a single word): they stay narration.
"""

# 紅樓夢 (../shared/corpus/txt/gutenberg-zh/24264-0.txt), chapter 3 (index 2): 第三回 賈雨村夤緣复舊職 林黛玉拋父進京都
HONGLOUMENG_3 = [
    (1, "天緣湊巧", "如海"), (1, "不知令親", "雨村"), (1, "若論舍親", "如海"), (1, "已擇了出月", "如海"),
    (2, "汝父年將", "如海"),
    (4, "剛才老太太", None), (4, "林姑娘到了", None),
    (5, "這是你大舅母", "賈母"), (5, "請姑娘們來", "賈母"),
    (6, "我這些儿女", "賈母"),
    (7, "常服何藥", None), (7, "我自來是如此", "黛玉"), (7, "正好我這里", "賈母"),
    (8, "我來遲了", None), (8, "這些人個個", "黛玉"), (8, "你不認得他", "賈母"), (8, "這是璉嫂子", None),
    (8, "天下真有", "熙鳳"), (8, "我才好了", "賈母"), (8, "正是呢我一見", "熙鳳"), (8, "妹妹几歲了", None),
    (8, "林姑娘的行李", None),
    (9, "月錢放過了", "二舅母"), (9, "月錢已放完了", "熙鳳"), (9, "有沒有", "王夫人"), (9, "該隨手拿出", None),
    (9, "這倒是我先", "熙鳳"),
    (10, "我帶了外甥女", "邢氏"), (10, "正是呢你也去", "賈母"), (10, "老爺說了", None), (10, "舅母愛惜", "黛玉"),
    (10, "這倒是了", "邢夫人"),
    (11, "某年月日", None),
    (12, "同鄉世教弟", None),
    (14, "太太說", None), (14, "你舅舅今日", "王夫人"),
    (15, "舅母說的", None), (15, "你不知道原故", "王夫人"),
    (16, "老太太那里", None), (16, "這是你鳳姐姐", "王夫人"), (16, "你舅母你嫂子", "賈母"), (16, "你們去罷", "賈母"),
    (16, "只剛念了", "黛玉"), (16, "讀的是什么書", "賈母"),
    (17, "寶玉來了", None), (17, "這個寶玉", "黛玉"), (17, "好生奇怪", "黛玉"), (17, "去見你娘來", "賈母"),
    (23, "外客未見", "賈母"), (23, "這個妹妹我曾", "寶玉"), (23, "可又是胡說", "賈母"), (23, "雖然未曾見過", "寶玉"),
    (23, "更好更好", "賈母"), (23, "妹妹可曾讀書", "寶玉"), (23, "不曾讀", "黛玉"), (23, "妹妹尊名", "寶玉"),
    (23, "無字", "黛玉"), (23, "我送妹妹", "寶玉"), (23, "古今人物", "寶玉"), (23, "只恐又是", "探春"),
    (23, "除四書", "寶玉"), (23, "可也有玉", None), (23, "我沒有那個", "黛玉"), (23, "什么罕物", "寶玉"),
    (23, "孽障", "賈母"), (23, "家里姐姐", "寶玉"), (23, "你這妹妹原有", "賈母"),
    (24, "今將寶玉", "賈母"), (24, "好祖宗", "寶玉"), (24, "也罷了", "賈母"),
    (27, "姑娘怎么還不", None), (27, "姐姐請坐", "黛玉"), (27, "林姑娘正在", "鸚哥"), (27, "姑娘快休", "襲人"),
    (27, "姐姐們說的", "黛玉"), (27, "連一家子", "襲人"), (27, "罷了此刻", "黛玉"),
]
HONGLOUMENG_3_TERMS = [(4, "敕造宁國府"), (8, "嫂"), (10, "是"), (11, "榮禧堂"), (11, "万几宸翰之寶"), (26, "花气襲人")]

# 吶喊 (../shared/corpus/txt/gutenberg-zh/27166-0.txt), modern “” quotes: 孔乙己 (chapter index 6) and 故鄉 (index 5),
# the editors' notes at their ends included.
KONGYIJI = [
    (3, "孔乙己你臉上", None), (3, "溫兩碗酒", None), (3, "你一定又偷", None), (3, "你怎麼這樣", "孔乙己"),
    (3, "什麼清白", None), (3, "竊書不能", "孔乙己"),
    (4, "孔乙己你當真", None), (4, "你怎的連半個", None),
    (5, "你讀過書麼", None), (5, "讀過書", None), (5, "不能寫罷", "孔乙己"), (5, "誰要你教", None),
    (5, "對呀對呀", "孔乙己"),
    (6, "不多了我已經", "孔乙己"), (6, "不多不多", None),
    (7, "孔乙己長久", "掌櫃"), (7, "他怎麼會來", None), (7, "哦", "掌櫃"), (7, "他總仍舊是偷", None),
    (7, "後來怎麼樣", None), (7, "怎麼樣先寫", None), (7, "後來呢", None), (7, "後來打折了腿", None),
    (7, "打折了怎樣呢", None), (7, "怎樣誰曉得", None),
    (8, "溫一碗酒", None), (8, "溫一碗酒", None), (8, "孔乙己麼", "掌櫃"), (8, "這下回", "孔乙己"),
    (8, "孔乙己你又偷", "掌櫃"), (8, "不要取笑", None), (8, "取笑要是", None), (8, "跌斷", "孔乙己"),
    (9, "孔乙己還欠", "掌櫃"), (9, "孔乙己還欠", None),
    (13, "這一篇很拙", None), (19, "多乎哉不多也", None), (19, "大宰問于子貢", None),
]
KONGYIJI_TERMS = [(3, "上大人孔乙己"), (3, "君子固窮"), (3, "者乎"), (14, "上大人孔"), (15, "君子固窮"), (15, "固窮"),
                  (15, "固守其窮")]

GUXIANG = [
    (7, "你休息一兩天", "母親"), (8, "是的", None), (9, "還有閏土", None), (16, "這不能", None),
    (19, "現在太冷", "閏土"), (20, "管賊麼", None), (21, "不是走路", None), (23, "他不咬人麼", None),
    (24, "有胡叉呢", None), (26, "我們沙地里", None), (29, "這好極", None),
    (30, "他他景況", "母親"), (30, "這些人又來了", "母親"),
    (32, "我們坐火車去麼", None), (33, "我們坐火車去", None), (34, "船呢", None), (35, "先坐船", None),
    (36, "哈這模樣", None), (39, "不認識了麼", None),
    (41, "他多年出門", "母親"), (41, "這是斜對門", None),
    (43, "忘了這真是", "圓規"), (44, "那有這事", None), (45, "那麼我對你說", None), (46, "我並沒有闊哩", None),
    (47, "阿呀呀", None), (49, "阿呀阿呀", "圓規"), (54, "阿閏土哥", None), (57, "老爺", None),
    (59, "水生給老爺", None), (59, "這是第五個孩子", None),
    (61, "老太太信是", "閏土"), (61, "阿你怎的", "母親"), (62, "阿呀老太太", "閏土"), (63, "他就是水生", "母親"),
    (65, "冬天沒有什麼", None), (66, "非常難", None), (75, "大伯", None), (76, "回來你怎麼", None),
    (77, "可是水生約我", None),
    (86, "字是我據", None),
]
GUXIANG_TERMS = [(42, "豆腐西施"), (86, "祭產"), (86, "值年"), (87, "八字"), (87, "五行缺土"), (88, "避邪")]

# 恨海 (../shared/corpus/txt/gutenberg-zh/23865-0.txt), 「」 quotes, chapter 1 (index 0): labelled after the code
# was tuned on the lists above, then measured as it stood: precision 17/17, recall 17/27 = 63 % (戟臨 and 伯和 were
# refused as names, jieba reading 臨 as a verb and 和 as a conjunction).  The rule for words jieba does not know
# was changed after that (26/26, 26/27), so this list is no longer held out.  Paragraphs 8
# and 9 open with the end of a quote begun in the paragraph before (a line break inside the speech): that
# continuation has no opening mark, so it is read as narration and is not listed.
HENHAI_1 = [
    (3, "姓張名", None),
    (5, "祥兒今年", "李氏"), (5, "奇了", "戟臨"), (5, "不是我平白", "李氏"), (5, "打算甚麼呢", "戟臨"),
    (5, "打算同他們", "李氏"), (5, "這個忙甚麼", "戟臨"),
    (6, "老爺有所不知", "李氏"), (6, "同住在一個", "戟臨"), (6, "不是怕他們", "李氏"), (6, "王家娟娟", "戟臨"),
    (6, "我們且央", "李氏"),
    (7, "這是兒女大事", "白氏"), (7, "不是這等說", "鶴亭"),
    (8, "祥兒的舉動", "白氏"), (8, "這倒不然", "鶴亭"),
    (9, "他們天天多是", "白氏"),
    (12, "此間消息不佳", None),
    (14, "父母都在這裡", "仲藹"), (14, "我是做官的人", "戟臨"), (14, "老爺在這裡", "李氏"), (14, "母親和哥哥", "仲藹"),
    (14, "小孩懂得甚麼", "戟臨"), (14, "別的事不敢", "仲藹"),
    (15, "縱不起行", "車夫"), (15, "不要爭了", "伯和"), (15, "姊姊睡下罷", None), (15, "姊姊", "伯和"),
    (15, "有炕几隔開了", "伯和"), (15, "賢弟請將息罷", "棣華"),
]
HENHAI_1_TERMS = [(0, "情竇初開"), (0, "情")]
