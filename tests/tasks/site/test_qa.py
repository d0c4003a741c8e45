"""Issue 24 §3-4 (pages): qa.html and report.json's "qa" — both from tasks.site.qa.qa_summary over the manifest's
proof columns —, the player's marks of what the checks flagged, and the catalogue's link.  The proof columns are
written here by hand (manifests.commit of real Parquet parts) into a real packaged book; the checks themselves are
another module's (tasks/qa), so the comparison is a stand-in where a test needs the differences marked."""
from __future__ import annotations

import difflib
import json
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import manifests
from flows.cli import main
from tasks.bookdir import take_relpath
from tasks.site import qa
from tasks.site.qa import qa_summary, segment_name
from tests.flows.helpers import SAMPLE

FORMATS = "flac,m4b"
REASON_FLAG = "asr: cer 0.45 > 0.40 after 2 takes"
REASON_INCONCLUSIVE = "asr: low confidence"


def fake_compare(intended: str, transcript: str, language: str):
    """A stand-in for tasks.qa.compare.compare: character ops from difflib (the real one compares pinyin)."""
    ops = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, intended, transcript, autojunk=False).get_opcodes():
        op = {"equal": "equal", "replace": "sub", "delete": "del", "insert": "ins"}[tag]
        ops.append((op, intended[i1:i2], transcript[j1:j2]))
    return SimpleNamespace(cer=0.0, ref=[], hyp=[], ops=ops)


@pytest.fixture
def book(rendered_book, tmp_path):
    dest = tmp_path / "out" / rendered_book.name
    shutil.copytree(rendered_book, dest)
    return dest


def package(book: Path) -> None:
    assert main(["package", str(SAMPLE), "--out", str(book.parent), "--format", FORMATS]) == 0


def take(n: int, row: dict, verdict: str, cer: float | None, similarity: float | None, transcript: str,
         reason: str = "") -> dict:
    return {"take": n, "seed": row["seed"] + n - 1, "audio_path": take_relpath(row["content_key"], n),
            "samples": row["samples"], "checks": ["duration", "asr", "drift"], "transcript": transcript,
            "cer": cer, "similarity": similarity, "verdict": verdict, "reason": reason}


def prove(book: Path) -> dict[str, dict]:
    """Give the packaged sample book (12 segments) what a render with the checks would have recorded:
    1.1 not checked; 2.2 flagged after two takes (the second kept); 2.3 re-taken and passed; 3.2 inconclusive;
    the other eight passed at the first take.  A second take's audio is a copy of the first's.  By C.S name."""
    rows = {segment_name(r): r for r in manifests.load(book).to_pylist()}
    passes = iter([0.0, 0.02, 0.05, 0.0, 0.08, 0.0, 0.1, 0.03])
    for name, r in rows.items():
        text = r["text"]
        if name == "1.1":
            continue
        if name == "2.2":
            takes = [take(1, r, "flag", 0.6, 0.81, text[:4] + "天地" + text[8:], "asr: cer 0.60 > 0.40"),
                     take(2, r, "flag", 0.45, 0.79, text[:6] + "万物" + text[9:], REASON_FLAG)]
        elif name == "2.3":
            takes = [take(1, r, "flag", 0.7, 0.8, text[5:], "asr: cer 0.70 > 0.40"),
                     take(2, r, "pass", 0.05, 0.83, text)]
        elif name == "3.2":
            takes = [take(1, r, "inconclusive", 0.3, 0.77, text[:-3], REASON_INCONCLUSIVE)]
        else:
            takes = [take(1, r, "pass", next(passes), 0.85, text)]
        kept = takes[-1]
        if kept["take"] > 1:
            shutil.copyfile(book / r["audio_path"], book / kept["audio_path"])
        r.update(take=kept["take"], audio_path=kept["audio_path"], takes=json.dumps(takes, ensure_ascii=False),
                 qa=kept["verdict"], qa_checks="duration,asr,drift", transcript=kept["transcript"],
                 cer=kept["cer"], similarity=kept["similarity"])
    manifests.commit(book, list(rows.values()))
    return {segment_name(r): r for r in manifests.load(book).to_pylist()}


def counts(summary: dict) -> dict:
    return {k: summary[k] for k in ("total", "checked", "passed", "retaken", "flagged", "inconclusive", "not_checked")}


def doc(path: Path):
    from lxml import html

    return html.fromstring(path.read_bytes())


def fix(*words: str) -> str:
    """A fix command as the pages write it (without --out)."""
    return f"chattts-render fix {shlex.quote(str(SAMPLE))} {' '.join(words)}"


def fix_out(book: Path, *words: str) -> str:
    """A fix command as a page opened from its file shows it: --out names the output root it lies in."""
    return f"{fix(*words)} --out {shlex.quote(str(book.parent))}"


# ------------------------------------------------------------------------------------------------ qa_summary

def test_qa_summary_counts_histograms_per_voice_and_the_list(tmp_path):
    """Hand-made rows, committed and loaded as real Parquet: the counts; a CER above 1 in the last bar and a
    negative similarity in the first; similarity grouped by voice and labelled by its rows' roles and
    speakers; the flagged or re-taken segments, in reading order, with the kept take's reason."""
    def row(c, s, voice, qa_, cer, sim, kept=1, tried=1, role="narrator", speaker="", status="done"):
        takes = [{"take": n, "verdict": "flag" if n < kept else qa_, "reason": f"take {n} of {c + 1}.{s + 1}"}
                 for n in range(1, tried + 1)]
        return {"plan_id": "p", "chapter": c, "segment": s, "chapter_title": f"ch{c}", "text": "字",
                "source_text": "字",
                "status": status, "voice_id": voice, "role": role, "speaker": speaker, "take": kept,
                "takes": json.dumps(takes), "qa": qa_, "cer": cer, "similarity": sim}

    manifests.commit(tmp_path, [
        row(0, 0, "aaaa", "pass", 0.0, 0.9),
        row(0, 1, "aaaa", "flag", 1.4, -0.2, kept=3, tried=3),                   # CER > 1, similarity < 0
        row(1, 0, "bbbb", "pass", 0.12, 0.7, kept=2, tried=2, role="dialogue", speaker="张三"),
        row(1, 1, "bbbb", "inconclusive", None, 0.75, role="dialogue", speaker="李四"),
        row(1, 2, "bbbb", "pass", 0.05, None, kept=1, tried=2, role="dialogue", speaker="张三"),
        row(2, 0, "aaaa", "", None, None, kept=0, tried=0, status="pending"),
    ])
    s = qa_summary(manifests.load(tmp_path).to_pylist())
    assert counts(s) == {"total": 6, "checked": 5, "passed": 3, "retaken": 3, "flagged": 1, "inconclusive": 1,
                         "not_checked": 1}
    assert s["cer"]["n"] == 4 and s["cer"]["counts"][-1] == 1 and s["cer"]["counts"][0] == 2
    assert s["cer"]["counts"][1] == 1 and sum(s["cer"]["counts"]) == 4 and s["cer"]["max"] == 1.4
    assert [(v["voice"], v["label"], v["n"]) for v in s["similarity"]] == [("aaaa", "narrator", 2),
                                                                           ("bbbb", "张三, 李四", 2)]
    narrator = s["similarity"][0]
    assert narrator["counts"][0] == 1 and narrator["counts"][-2] == 1 and narrator["min"] == -0.2
    assert s["segments"] == [
        {"segment": "1.2", "verdict": "flag", "cer": 1.4, "similarity": -0.2, "take": 3, "takes": 3,
         "reason": "take 3 of 1.2"},
        {"segment": "2.1", "verdict": "pass", "cer": 0.12, "similarity": 0.7, "take": 2, "takes": 2,
         "reason": "take 2 of 2.1"},
        {"segment": "2.3", "verdict": "pass", "cer": 0.05, "similarity": None, "take": 1, "takes": 2,
         "reason": "take 1 of 2.3"}]


def test_marked_transcript_marks_the_differences_and_falls_back_to_plain_text(monkeypatch):
    monkeypatch.setattr(qa, "compare", fake_compare)
    assert (qa.marked_transcript("道可道非常道", "道可到非常<道", "zh")
            == "道可<del>道</del><ins>到</ins>非常<ins>&lt;</ins>道")
    assert qa.marked_transcript("天地之始", "天地", "zh") == "天地<del>之始</del>"
    words = [("equal", "Hello", "hello"), ("sub", "small", "big"), ("equal", "world", "world"), ("del", "now", "")]
    monkeypatch.setattr(qa, "compare", lambda *_: SimpleNamespace(ops=words))     # ops over words, no punctuation
    assert qa.marked_transcript("Hello small world now.", "hello, big world.", "en") \
        == "hello, <del>small</del><ins>big</ins> world<del>now</del>."
    assert qa.marked_transcript("天地之始", "", "zh") == ""                # nothing heard: nothing to mark

    def broken(*_):
        raise ImportError("pypinyin")
    monkeypatch.setattr(qa, "compare", broken)                 # its extra missing: plain text, packaging goes on
    assert qa.marked_transcript("天地之始", "天<地", "zh") == "天&lt;地"


# ------------------------------------------------------------------------------------ a real packaged book

def test_the_page_and_the_report_agree_on_a_checked_book(book, monkeypatch):
    """report.json's "qa" is qa_summary of the manifest; qa.html shows the same counts and each flagged or
    re-taken segment: its takes' audio (files that exist), the intended text, what was heard with <del>/<ins>,
    its fields, the exact fix commands; the player marks what the checks flagged and links the QA page."""
    monkeypatch.setattr(qa, "compare", fake_compare)
    rows = prove(book)
    package(book)
    report = json.loads((book / "report.json").read_text(encoding="utf-8"))
    assert report["qa"] == qa_summary(manifests.load(book).to_pylist())
    assert counts(report["qa"]) == {"total": 12, "checked": 11, "passed": 9, "retaken": 2, "flagged": 1,
                                    "inconclusive": 1, "not_checked": 1}
    assert report["qa"]["segments"][0] == {"segment": "2.2", "verdict": "flag", "cer": 0.45, "similarity": 0.79,
                                           "take": 2, "takes": 2, "reason": REASON_FLAG}
    assert report["qa"]["cer"]["n"] == 11 and report["qa"]["cer"]["counts"][4] == 1      # 2.2's 0.45
    assert report["qa"]["similarity"][0]["n"] == 11 and report["qa"]["similarity"][0]["label"] == "narrator"

    page = doc(book / "qa.html")
    shown = {d.get("data-count"): int(d.findtext("dd")) for d in page.xpath("//dl[@class='qa-counts']/div")}
    assert shown == {k: v for k, v in counts(report["qa"]).items() if k != "total"}
    assert not page.xpath("//*[@id='no-checks']")
    sections = page.xpath("//section[@class='qa-seg']")
    assert [s.get("data-segment") for s in sections] == ["2.2", "2.3"]
    flagged = sections[0]
    srcs = [a.get("src") for a in flagged.xpath(".//audio")]
    assert srcs == [take_relpath(rows["2.2"]["content_key"], n) for n in (1, 2)]
    assert all((book / s).is_file() for s in srcs)
    assert flagged.xpath(".//span[@class='intended']")[0].text_content() == rows["2.2"]["text"]
    assert flagged.xpath(".//span[@class='source']")[0].text_content() == rows["2.2"]["source_text"]
    heard = flagged.xpath(".//p/span[@class='heard']")[0]
    assert heard.text_content() != rows["2.2"]["transcript"]             # the intended text's part shown too
    assert [e.text for e in heard.xpath("./ins")] == ["万物"] and heard.xpath("./del")
    assert "".join(heard.xpath("./text() | ./ins/text()")) == rows["2.2"]["transcript"]
    fields = {td.get("data-field"): td.text_content() for td in flagged.xpath(".//td[@data-field]")}
    assert fields == {"verdict": "flag", "CER": "0.450", "similarity": "0.790", "take kept": "2",
                      "reason": REASON_FLAG}
    commands = [c.text_content() for c in flagged.xpath(".//code[@class='cmd']")]
    assert commands == [fix("2.2", "--take 1"), fix("2.2", "--retake")]
    assert [c.get("data-fix") for c in flagged.xpath(".//code[@class='cmd']")] == commands
    assert [b.get("data-fix") for b in flagged.xpath(".//button[@class='copy']")] == commands
    assert page.xpath("//p[contains(., 're-take every segment still flagged')]/code")[0].text_content() \
        == fix("2.2", "--retake")

    player = doc(book / "index.html")
    assert player.xpath("//p[@class='qa-link']/a/@href") == ["qa.html"]
    marked = player.xpath("//span[contains(concat(' ', @class, ' '), ' qa-flag ')]")
    assert {s.get("data-seg") for s in marked} == {"2.2"} and all(REASON_FLAG in s.get("title") for s in marked)
    light = player.xpath("//span[contains(concat(' ', @class, ' '), ' qa-inconclusive ')]")
    assert {s.get("data-seg") for s in light} == {"3.2"} and REASON_INCONCLUSIVE in light[0].get("title")
    spans = player.xpath("//span[contains(concat(' ', @class, ' '), ' s ')]")
    assert sorted({s.get("data-seg") for s in spans}) == sorted(rows)    # every sentence knows its segment
    assert all(s.getnext().tag == "button" and s.getnext().get("data-seg") == s.get("data-seg") for s in spans)


def test_a_book_without_checks_says_so(book):
    """No segment checked: the page says so, its counts are still right, nothing is listed; report.json agrees."""
    package(book)
    report = json.loads((book / "report.json").read_text(encoding="utf-8"))
    assert counts(report["qa"]) == {"total": 12, "checked": 0, "passed": 0, "retaken": 0, "flagged": 0,
                                    "inconclusive": 0, "not_checked": 12}
    page = doc(book / "qa.html")
    assert page.xpath("//*[@id='no-checks']") and page.xpath("//*[@id='none-listed']")
    shown = {d.get("data-count"): int(d.findtext("dd")) for d in page.xpath("//dl[@class='qa-counts']/div")}
    assert shown == {k: v for k, v in counts(report["qa"]).items() if k != "total"}
    assert "12 segments" in page.xpath("//header[@class='qa']")[0].text_content()
    assert not page.xpath("//section[@class='qa-seg']")
    assert "https://" not in (book / "qa.html").read_text(encoding="utf-8")


def test_a_verdict_that_changes_alone_rewrites_report_json_alone(book):
    """A check result recorded after packaging (same take, same audio) reaches report.json and the pages without
    re-encoding anything; packaging once more then writes nothing."""
    prove(book)
    package(book)
    outputs = {p.name: p.stat().st_mtime_ns for p in book.iterdir()
               if p.is_file() and p.suffix in (".flac", ".m4b", ".srt", ".vtt", ".lrc")}
    rows = manifests.load(book).to_pylist()
    r = next(r for r in rows if segment_name(r) == "3.2")
    takes = json.loads(r["takes"])
    takes[0].update(verdict="pass", reason="")
    manifests.commit(book, [{**r, "qa": "pass", "takes": json.dumps(takes)}])
    package(book)
    report = json.loads((book / "report.json").read_text(encoding="utf-8"))
    assert report["qa"] == qa_summary(manifests.load(book).to_pylist()) and report["qa"]["inconclusive"] == 0
    assert {n: (book / n).stat().st_mtime_ns for n in outputs} == outputs          # nothing re-encoded
    assert not doc(book / "index.html").xpath("//span[contains(@class, 'qa-inconclusive')]")
    assert doc(book / "qa.html").xpath("//div[@data-count='inconclusive']/dd")[0].text == "0"
    before = (book / "report.json").stat().st_mtime_ns
    package(book)
    assert (book / "report.json").stat().st_mtime_ns == before


def test_the_pages_do_not_depend_on_the_output_root(book, tmp_path):
    """The same book packaged in two output roots writes the same qa.html and index.html (the --out of their
    commands comes from where the page is opened)."""
    prove(book)
    other = tmp_path / "elsewhere" / book.name
    shutil.copytree(book, other)
    package(book)
    assert main(["package", str(SAMPLE), "--out", str(other.parent), "--format", FORMATS]) == 0
    for name in ("qa.html", "index.html", "report.json"):
        assert (book / name).read_bytes() == (other / name).read_bytes(), name
    assert str(book.parent) not in (book / "qa.html").read_text(encoding="utf-8")
    data = json.loads(doc(book / "index.html").xpath("//script[@id='player-data']")[0].text)
    assert data["flags"]["head"] == f"chattts-render fix {shlex.quote(str(SAMPLE))}"
    assert data["flags"]["from"] == f"{data['flags']['head']} --from daodejing-flagged.txt --retake"


def test_the_catalogue_links_a_books_qa_page(book):
    from tasks.site.catalogue import write_catalogue

    write_catalogue(book.parent)
    links = doc(book.parent / "index.html").xpath("//tr[@data-folder='daodejing']//a/@href")
    assert "daodejing/qa.html" in links and "daodejing/index.html" in links
    (book / "qa.html").unlink()
    write_catalogue(book.parent)
    assert "daodejing/qa.html" not in doc(book.parent / "index.html").xpath("//a/@href")


# ------------------------------------------------------------------------------------------- in a browser

SCREENSHOTS_ENV = "CHATTTS_RENDER_SCREENSHOTS"    # a folder: also save the pages' screenshots there
WAIT_S = 60                                       # hang guard for a condition the page must reach


def _wait(driver, condition: str):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(f"return Boolean({condition});"))


def _screenshot(driver, name: str, tmp_path: Path) -> None:
    import os

    shot = tmp_path / name
    driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get(SCREENSHOTS_ENV):
        Path(os.environ[SCREENSHOTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(os.environ[SCREENSHOTS_ENV]) / name)


def test_qa_page_in_a_real_browser(browser, book, monkeypatch, tmp_path):
    """qa.html from file://: the summary numbers, each flagged or re-taken segment with its diff marks and one
    audio element per take that loads its file, and a copy button that puts the exact command in the field."""
    from selenium.webdriver.common.by import By

    monkeypatch.setattr(qa, "compare", fake_compare)
    prove(book)
    package(book)
    browser.set_window_size(1100, 1400)
    browser.get((book / "qa.html").as_uri())
    from tests.browser import console_errors
    assert console_errors(browser) == []
    shown = {e.get_attribute("data-count"): e.find_element(By.TAG_NAME, "dd").text
             for e in browser.find_elements(By.CSS_SELECTOR, "dl.qa-counts > div")}
    assert shown == {"checked": "11", "passed": "9", "retaken": "2", "flagged": "1", "inconclusive": "1",
                     "not_checked": "1"}
    sections = browser.find_elements(By.CSS_SELECTOR, "section.qa-seg")
    assert [s.get_attribute("data-segment") for s in sections] == ["2.2", "2.3"]
    assert [e.text for e in sections[0].find_elements(By.CSS_SELECTOR, "p span.heard ins")] == ["万物"]
    assert sections[0].find_elements(By.CSS_SELECTOR, "p span.heard del")
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.hist")) == 2             # CER, one voice's similarity
    browser.execute_script("document.querySelectorAll('audio').forEach((a) => a.load());")
    _wait(browser, "Array.from(document.querySelectorAll('section.qa-seg audio')).every((a) => a.readyState >= 1 "
                   "&& a.duration > 0)")
    assert browser.execute_script("return document.querySelectorAll('section.qa-seg audio').length;") == 4
    copy = sections[0].find_elements(By.CSS_SELECTOR, "button.copy")[0]
    copy.click()
    assert browser.find_element(By.ID, "clipboard").get_attribute("value") == fix_out(book, "2.2", "--take 1")
    assert [c.text for c in sections[0].find_elements(By.CSS_SELECTOR, "code.cmd")] == [
        fix_out(book, "2.2", "--take 1"), fix_out(book, "2.2", "--retake")]
    assert copy.text == "copied"
    _screenshot(browser, "qa.png", tmp_path)
    assert console_errors(browser) == []


@pytest.fixture
def odd_book(rendered_book, tmp_path):
    """The rendered book in an output root whose path needs shell quoting (a space, CJK, a quote)."""
    dest = tmp_path / "my books 书's" / rendered_book.name
    shutil.copytree(rendered_book, dest)
    return dest


def test_player_flags_in_a_real_browser(browser, odd_book, tmp_path):
    """The player: a sentence's flag button (reached with Tab, pressed with Enter, or clicked) lists its
    segment; the command names every flagged segment in book order and the output root the page lies in,
    shell-quoted; the download (a Blob) is the --from list; flags survive a reload and a second press removes
    one; the checks' flags are marked."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from tests.browser import console_errors

    book = odd_book
    prove(book)
    package(book)
    assert "'" in fix_out(book)
    browser.set_window_size(1100, 900)
    browser.get((book / "index.html").as_uri())
    assert console_errors(browser) == []
    assert browser.find_element(By.ID, "flag-actions").get_attribute("hidden") is not None
    browser.find_elements(By.CSS_SELECTOR, "nav.chapters button")[2].click()       # 第二章: segments 3.x
    shown = "article:not([hidden])"
    first = browser.find_elements(By.CSS_SELECTOR, f"{shown} button.flag[data-seg='3.2']")[0]
    browser.execute_script("arguments[0].previousElementSibling.focus(); arguments[0].focus();", first)
    first.send_keys(Keys.ENTER)                                                     # the keyboard flags it
    _wait(browser, "document.getElementById('flag-count').textContent === '1'")
    browser.find_elements(By.CSS_SELECTOR, "nav.chapters button")[1].click()       # 第一章
    browser.find_elements(By.CSS_SELECTOR, f"{shown} button.flag[data-seg='2.3']")[0].click()
    _wait(browser, "document.getElementById('flag-count').textContent === '2'")
    assert [e.text.split(" ")[0] for e in browser.find_elements(By.CSS_SELECTOR, "#flag-list li")] == ["2.3", "3.2"]
    want = fix_out(book, "2.3", "3.2", "--retake")
    assert browser.find_element(By.ID, "fix-command").get_attribute("value") == want
    assert all(b.get_attribute("aria-pressed") == "true"
               for b in browser.find_elements(By.CSS_SELECTOR, "button.flag[data-seg='2.3']"))
    download = browser.find_element(By.ID, "flags-download")
    assert download.get_attribute("download") == "daodejing-flagged.txt"
    text = browser.execute_async_script(
        "const done = arguments[0]; fetch(document.getElementById('flags-download').href)"
        ".then((r) => r.text()).then(done, (e) => done('error: ' + e));")
    header = ("# 道德经（前三章）: segments flagged in the player, one C.S per line\n"
              f"# {fix_out(book, '--from daodejing-flagged.txt --retake')}\n")
    assert text == header + "2.3\n3.2\n"
    assert [ln for ln in text.splitlines() if not ln.startswith("#")] == ["2.3", "3.2"]   # what --from reads
    marked = browser.find_elements(By.CSS_SELECTOR, f"{shown} .s.qa-flag")
    assert marked and all(REASON_FLAG in s.get_attribute("title") for s in marked)
    _screenshot(browser, "player-flags.png", tmp_path)

    browser.refresh()                                                               # the flags are remembered
    _wait(browser, "document.getElementById('flag-count').textContent === '2'")
    assert browser.find_element(By.ID, "fix-command").get_attribute("value") == want
    browser.find_elements(By.CSS_SELECTOR, "#flag-list button.unflag")[0].click()   # remove 2.3
    _wait(browser, "document.getElementById('flag-count').textContent === '1'")
    assert browser.find_element(By.ID, "fix-command").get_attribute("value") == fix_out(book, "3.2", "--retake")
    stored = browser.execute_script("return localStorage.getItem('chattts-render:daodejing:道德经（前三章）:flags');")
    assert json.loads(stored) == ["3.2"]
    browser.find_element(By.ID, "flags-clear").click()
    _wait(browser, "document.getElementById('flag-count').textContent === '0'")
    assert browser.find_element(By.ID, "flag-actions").get_attribute("hidden") is not None
    assert console_errors(browser) == []
