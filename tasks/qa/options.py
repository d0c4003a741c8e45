"""The QA checks' thresholds and options: an ASR check (what a recording says against what it should say) and a
drift gate (its speaker embedding against the voice's reference); what `--qa auto` picks (auto_mode).  Where each
number comes from: docs/qa.md."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

MAX_CER = 0.4             # unit error rate (edit distance / intended units) above which a recording is flagged
MIN_UNITS = 12            # comparable units of the intended text below which a transcript neither passed nor
                          # flagged is inconclusive (a short text): toneless syllables (one per Han character, one
                          # per Latin word) for Chinese, letters of the words for English (English compares by
                          # words; 12 letters ≈ 2-3 words ≈ 1 s)
MIN_HEARD = 0.5           # share of the intended units heard as themselves below which a recording is flagged, at
                          # any length (right pairs here >= 0.57 but three of Whisper's failures, wrong <= 0.5)
TAIL_SHARE = 0.3          # share of the intended units after the last one heard as itself from which the take
                          # stopped short (with TAIL_UNITS of them at least, or nothing heard in their place):
                          # flagged at any length, before a pass
TAIL_UNITS = 2            # units: the fewest a take that stopped short has lost where something was heard in their
                          # place (one unit heard as another is a misheard last syllable)
TAIL_SPEECH_S = 0.05      # s of voiced speech after the last heard word (tasks/qa/voicing.py) from which a missing
                          # last unit with nothing heard for it may have been said: inconclusive, not flagged (a
                          # light syllable Whisper drops; corpus: said >= 0.07, a take cut inside it <= 0.03)
MIN_GAP_UNITS = 2         # units: a length gap flags only from this many on (a 2-unit text heard as 3 is not "far")
LOW_LOGPROB = -1.0        # Whisper avg_logprob (nats/token) below which a transcript is too unsure to judge
                          # (Whisper's own log_prob_threshold; right pairs here ≥ -0.39, noise ≤ -1.28)
NO_SPEECH_PROB = 0.6      # Whisper no_speech_prob above which, with avg_logprob < low_logprob, nothing was said
                          # (Whisper's own no_speech_threshold; noise here 0.71-0.76, speech ≤ 0.44)
DRIFT_PERCENTILE = 7.5    # % : the book's own similarity spread, the low percentile a drift cutoff starts from
DRIFT_FLOOR = 0.78        # cosine: the absolute cutoff (other-speaker pairs here ≤ 0.757, same-speaker ≥ 0.840)
DRIFT_MIN_VALUES = 20     # similarities needed before their percentile counts (fewer: the floor alone)
MIN_SPEECH_S = 3.0        # s of speech (after the VAD trim) below which no speaker embedding is judged
MAX_TAKES = 3             # renders per segment the QA may ask for, the first included
REFERENCE_TAKES = 5       # a voice's drift reference: its book's first accepted takes, in reading order
QAMode = Literal["off", "suspect", "full", "auto"]   # auto: resolved before a render (tasks.stages.resolve_qa)
QA_MODES: tuple[str, ...] = get_args(QAMode)
QA_SHARE_GOAL = {"cpu": 0.30, "cuda": 0.15}    # the most wall time `auto` lets full QA add to a render (a share)
BASE_SHARE = {"cpu": 0.26, "cuda": 0.15}       # what full QA with Whisper base adds to a render's wall time: cpu
                                               # estimated (takes packed into Whisper's windows: the quiet box's
                                               # 0.454 heard one by one x the packed / alone ASR CPU time 0.47-0.57,
                                               # docs/qa.md; to re-measure with book_throughput --qa full), cuda not
                                               # measured yet, set at its goal (gpu_check.sh GPU_CHECK_QA=1)
ASR_COST = (("tiny", 0.53), ("base", 1.0), ("small", 3.3), ("medium", 10.4), ("turbo", 10.9),
            ("large", 20.9))                   # Whisper sizes' parameters / base's (39M ... 1550M; a name holding
                                               # one: "distil-large-v3" costs as large, first match wins)
BASE_MODEL_BYTES = 145_217_532                 # base's model.bin (float16): a model directory costs its size / this
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class QAOptions:
    mode: str = "off"                       # off | suspect (only segments the guard or drift gate finds odd) |
                                            # full | auto (a request: resolved to one of them before rendering)
    asr_model: str = "base"                 # a faster-whisper size name or a local model directory
    device: str = "cpu"                     # cpu (int8) | cuda (float16)
    max_cer: float = MAX_CER
    min_units: int = MIN_UNITS
    low_logprob: float = LOW_LOGPROB
    drift_percentile: float = DRIFT_PERCENTILE
    drift_floor: float = DRIFT_FLOOR
    min_speech_s: float = MIN_SPEECH_S
    max_takes: int = MAX_TAKES
    reference_takes: int = REFERENCE_TAKES

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.mode not in QA_MODES:
            raise ValueError(f"qa mode {self.mode!r} must be one of {', '.join(QA_MODES)}")
        if not isinstance(self.asr_model, str) or not self.asr_model.strip():
            raise ValueError("qa asr_model must name a faster-whisper model or a model directory")
        if self.device not in DEVICES:
            raise ValueError(f"qa device {self.device!r} must be one of {', '.join(DEVICES)}")
        if not self.max_cer > 0:
            raise ValueError(f"qa max_cer {self.max_cer} must be > 0")
        if isinstance(self.min_units, bool) or not isinstance(self.min_units, int) or self.min_units < 1:
            raise ValueError(f"qa min_units {self.min_units!r} must be an integer >= 1")
        if not self.low_logprob <= 0:
            raise ValueError(f"qa low_logprob {self.low_logprob} must be <= 0 (a log probability)")
        if not 0 <= self.drift_percentile < 50:
            raise ValueError(f"qa drift_percentile {self.drift_percentile} must be in [0, 50)")
        if not -1 <= self.drift_floor <= 1:
            raise ValueError(f"qa drift_floor {self.drift_floor} must be a cosine in [-1, 1]")
        if not self.min_speech_s > 0:
            raise ValueError(f"qa min_speech_s {self.min_speech_s} must be > 0")
        if isinstance(self.max_takes, bool) or not isinstance(self.max_takes, int) or self.max_takes < 1:
            raise ValueError(f"qa max_takes {self.max_takes!r} must be an integer >= 1 (the first take included)")
        if isinstance(self.reference_takes, bool) or not isinstance(self.reference_takes, int) \
                or self.reference_takes < 1:
            raise ValueError(f"qa reference_takes {self.reference_takes!r} must be an integer >= 1")


def asr_cost(asr_model: str) -> float:
    """What hearing with this Whisper model costs against base (ASR_COST): by its size name, or a model directory's
    model.bin size; an unknown Hugging Face repo id costs as large (the most)."""
    path = Path(asr_model).expanduser()
    if (path / "model.bin").is_file():
        return (path / "model.bin").stat().st_size / BASE_MODEL_BYTES
    name = asr_model.rsplit("/", 1)[-1].lower()
    return next((cost for size, cost in ASR_COST if size in name), ASR_COST[-1][1])


def auto_mode(device: str, asr_model: str) -> tuple[str, float]:
    """(the mode `--qa auto` picks, the share of a render's wall time full QA is estimated to add): full where that
    estimate (BASE_SHARE scaled by asr_cost) is within QA_SHARE_GOAL, suspect where it is not."""
    share = BASE_SHARE[device] * asr_cost(asr_model)
    return ("full" if share <= QA_SHARE_GOAL[device] + 1e-9 else "suspect"), share
