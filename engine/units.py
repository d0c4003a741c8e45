"""Units of ChatTTS audio, and the speaking-rate estimate every stage shares.  Import-light (no torch)."""
from __future__ import annotations

import re

SAMPLE_RATE = 24_000               # Hz, Vocos output
HOP = 256                          # samples per mel frame
SAMPLES_PER_TOKEN = 2 * HOP        # one GPT step = 4 codes = 2 mel frames = 512 samples (21.33 ms)
TOKENS_PER_SECOND = SAMPLE_RATE / SAMPLES_PER_TOKEN   # 46.875 GPT tokens per second of audio
CHARS_PER_SECOND = 4.5             # Mandarin read aloud at ~270 characters per minute
# English read aloud: audiobook narration is 150-160 words per minute (J. R. Williams, "Guidelines for the use of
# multimedia in instruction", Proc. Human Factors and Ergonomics Society 42nd Annual Meeting, 1998, pp. 1447-1451;
# the figure Wikipedia's "Words per minute" gives for audiobooks); the middle of that range.
WORDS_PER_MINUTE = 155.0
WORDS_PER_SECOND = WORDS_PER_MINUTE / 60       # 2.58 words per second
SPELLED_MAX_LETTERS = 3            # an all-capital word this short (BBC, USA, TV) is spelled: a syllable per letter
MIN_SECONDS = 0.6                  # the shortest segment we ever expect
CONTROL_PAUSE_S = 0.15             # s, what an inline control token ([uv_break], [laugh] ...) adds: a comma's pause
# ChatTTS's control tokens in a text: [uv_break], [lbreak], [laugh], [speed_5] ... (normalized text never holds
# brackets, so only a direction's insertions or the refine pass's output match)
CONTROL_TOKEN = re.compile(r"\[[a-z]+(?:_[a-z0-9]+)*\]")


def samples_for_tokens(tokens: int) -> int:
    """Exact waveform length for T generated tokens: (2T-1)*256 samples."""
    return max(0, (2 * tokens - 1) * HOP)


def speakable_chars(text: str) -> int:
    """Characters that take time to say: letters and digits (CJK included), not punctuation or spaces."""
    return sum(1 for c in text if c.isalnum())


# A Latin-script word: letters (accented ones included), with inner apostrophes (don't, o'clock).
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+(?:['\u2019][A-Za-z\u00c0-\u024f]+)*")


def latin_words(text: str) -> tuple[int, int, int]:
    """(English words, letters spelled, letters in all of them) of `text`'s Latin-script words.  A letter alone
    (a, I, the Q of 阿Q) or an all-capital word of 2..SPELLED_MAX_LETTERS letters (BBC, USA, TV) is spelled:
    a syllable per letter; every other word is one English word."""
    words = spelled = letters = 0
    for m in _LATIN_WORD.finditer(text):
        w = m.group()
        n = sum(1 for c in w if c.isalpha())
        letters += n
        if n == 1 or (n <= SPELLED_MAX_LETTERS and w.isupper()):
            spelled += n
        else:
            words += 1
    return words, spelled, letters


def compact(text: str) -> str:
    """`text` without the spaces upstream's decoding of the refine pass puts around every non-ASCII character (Han,
    CJK punctuation) and control token: "你 好 [uv_break] 世 界" -> "你好[uv_break]世界"."""
    out = re.sub(r"(?<=[^\x00-\x7f\]]) +| +(?=[^\x00-\x7f\[])", "", " ".join(text.split()))
    return re.sub(r"(?<=\]) +(?=[^\x00-\x7f])|(?<=[^\x00-\x7f]) +(?=\[)", "", out)


def without_controls(text: str) -> str:
    """`text` without ChatTTS's inline control tokens, compacted (`compact`): what a listener hears said."""
    return compact(" ".join(CONTROL_TOKEN.sub(" ", text).split()))


def estimate_seconds(text: str) -> float:
    """Expected speech duration of normalized text: Latin-script words at WORDS_PER_SECOND; every other speakable
    character (Han, digits) and each spelled letter at CHARS_PER_SECOND (a syllable); punctuation adds short
    pauses, and so does each inline control token (CONTROL_PAUSE_S).  Text without Latin words of two letters or
    more (Chinese) is estimated exactly as by characters."""
    controls = len(CONTROL_TOKEN.findall(text))
    text = CONTROL_TOKEN.sub(" ", text) if controls else text
    pauses = sum(1 for c in text if c in "，、；：,;:") * 0.15 + sum(1 for c in text if c in "。！？!?.…") * 0.3
    pauses += controls * CONTROL_PAUSE_S
    words, spelled, letters = latin_words(text)
    speech = (speakable_chars(text) - letters + spelled) / CHARS_PER_SECOND + words / WORDS_PER_SECOND
    return max(MIN_SECONDS, speech + pauses)


def expected_tokens(text: str) -> int:
    """GPT tokens a real model is expected to emit for `text` (random models are forced to exactly this)."""
    return max(2, round(estimate_seconds(text) * TOKENS_PER_SECOND))


def hms(s: float) -> str:
    """Seconds as m:ss, or h:mm:ss from an hour on."""
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
