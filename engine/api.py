"""The engine's public contract.  engine/ never imports Prefect; heavy imports (torch, ChatTTS) are lazy.

    engine = Engine.load(EngineOptions(model="random-tiny"))
    voice = engine.sample_voice(seed=1234)              # a spk_emb string, stored in the manifest
    for result in engine.synthesize(requests):          # yields as segments finish (completion order)
        ...
    engine.synthesize(requests, more=retakes)           # retakes(idle) -> requests that join the running pass
    for refined in engine.refine(requests):             # the refine-text pass (Request.controls.refine)
        ...

Determinism: on CPU a Result depends only on (text, spk_emb, seed, forced_tokens, controls, refined, engine
version), never on the other requests it was batched with (a Refined only on text, seed, levels and version);
on CUDA its last bits can depend on the batch's shape (slot count, attention bucket): docs/architecture.md,
"Determinism on CUDA".
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, get_args

if TYPE_CHECKING:
    import numpy as np

    from engine.voice import VoiceSpec

ModelSpec = str   # "hf" | "random-tiny" | "random-full" | a local asset directory
RANDOM_MODELS = ("random-tiny", "random-full")
# Rows decoded together at most when max_batch is not given.  CPU: one GEMM call per step over all rows is
# weight-bandwidth bound below ~32 rows (benchmarks/engine_steps.py); CUDA: capped further by free memory.
DEFAULT_MAX_BATCH = {"cpu": 32, "cuda": 128}
ONNX_MODULES = ("onnxruntime", "onnx", "onnxscript")   # the onnx extra: run, and export the graphs
Backend = Literal["torch", "onnx"]   # what runs the model calls: our torch engine, or ONNX Runtime (ortengine.py)
BACKENDS = get_args(Backend)
Dtype = Literal["auto", "fp32", "bf16", "fp16"]   # the GPT's dtype (EngineOptions.dtype)


@dataclass(frozen=True)
class EngineOptions:
    model: ModelSpec = "hf"
    device: Literal["cpu", "cuda"] = "cpu"
    dtype: Dtype = "auto"          # auto: on CPU the fastest exact float path (engine/cpupath.py), on CUDA bf16
    int8: bool = False             # CPU only: int8 GPT linears (engine/kernels.c's fastest int8 path, else W8A8)
    cuda_graphs: bool = False      # CUDA only: decode steps as captured CUDA graphs (--cuda-graphs)
    max_batch: int | None = None   # rows decoded together at most; None: DEFAULT_MAX_BATCH[device]
    threads: int | None = None     # torch CPU threads, >= 1 (more than the CPUs: they share them); None: torch's
    backend: Backend = "torch"     # onnx: the model calls through ONNX Runtime (engine/ortengine.py)

    def __post_init__(self) -> None:
        """Raise ValueError naming the conflict: every instance is valid, so no stage validates again."""
        if self.int8 and self.device != "cpu":
            raise ValueError('int8=True needs device="cpu"; on CUDA use dtype="bf16" or "fp16"')
        if self.cuda_graphs and self.device != "cuda":
            raise ValueError('cuda_graphs=True needs device="cuda"')
        if self.device == "cpu" and self.dtype == "fp16":
            raise ValueError('dtype="fp16" needs device="cuda"; the CPU runs fp32 or bf16')
        if self.int8 and self.dtype not in ("auto", "fp32"):
            raise ValueError(f'int8=True quantizes fp32 linears; drop dtype="{self.dtype}"')
        if self.max_batch is not None and self.max_batch < 1:
            raise ValueError(f"max_batch {self.max_batch}: must be at least 1")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads {self.threads}: must be at least 1")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r}: expected one of {', '.join(BACKENDS)}")
        if self.backend == "onnx" and (self.int8 or self.cuda_graphs or self.dtype == "bf16"):
            what = "int8=True" if self.int8 else "cuda_graphs=True" if self.cuda_graphs else 'dtype="bf16"'
            raise ValueError(f'backend="onnx" runs fp32 (CPU) or fp16 (CUDA) graphs; drop {what}')

    @property
    def batch(self) -> int:
        """max_batch, or the device's default."""
        return self.max_batch or DEFAULT_MAX_BATCH[self.device]


SPEEDS = range(10)                 # ChatTTS's [speed_N] control tokens
DEFAULT_SPEED = 5                  # upstream's InferCodeParams prompt, "[speed_5]"


@dataclass(frozen=True)
class SamplingParams:
    """Logits processing of a pass: upstream ChatTTS's InferCodeParams defaults (the code pass); REFINE_SAMPLING is
    its RefineTextParams'.  engine/sampling.py applies them."""
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    penalty_window: int = 16       # tokens of the row's own history the penalty looks at
    min_keep: int = 3              # top-P / top-K keep at least this many (upstream: min_tokens_to_keep=3)


REFINE_SAMPLING = SamplingParams(temperature=0.7, repetition_penalty=1.0)   # upstream's RefineTextParams
REFINE_MAX_NEW_TOKENS = 384        # upstream's RefineTextParams.max_new_token


@dataclass(frozen=True)
class Refine:
    """Upstream's refine-text pass (Chat._refine_text): the GPT rewrites a text with oral fillers, laughter and
    pauses ([uv_break], [laugh] ...) at these levels, its prompt `[oral_N][laugh_N][break_N]`."""
    oral: int = 2                  # 0..9
    laugh: int = 0                 # 0..2
    brk: int = 6                   # 0..7 ([break_N])

    def __post_init__(self) -> None:
        """Raise ValueError naming the level out of range."""
        for name, value, top in (("oral", self.oral, 9), ("laugh", self.laugh, 2), ("break", self.brk, 7)):
            if not (isinstance(value, int) and 0 <= value <= top):
                raise ValueError(f"refine {name} level {value!r}: must be 0..{top}")

    @property
    def prompt(self) -> str:
        return f"[oral_{self.oral}][laugh_{self.laugh}][break_{self.brk}]"


@dataclass(frozen=True)
class Controls:
    """How a segment is spoken beyond its text and voice: ChatTTS's pace, the code pass's sampling (upstream's
    defaults: SamplingParams) and the refine-text pass (None: skipped, as upstream's skip_refine_text=True).
    `key()` is "" for the defaults, so a content key without controls is the one it always was."""
    speed: int = DEFAULT_SPEED
    temperature: float = SamplingParams.temperature
    top_p: float = SamplingParams.top_p
    top_k: int = SamplingParams.top_k
    refine: Refine | None = None

    def __post_init__(self) -> None:
        """Raise ValueError naming the setting out of range."""
        if not (isinstance(self.speed, int) and self.speed in SPEEDS):
            raise ValueError(f"speed {self.speed!r}: must be 0..9 (ChatTTS's [speed_N])")
        if not 0.01 <= self.temperature <= 5:
            raise ValueError(f"temperature {self.temperature!r}: must be 0.01..5")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p {self.top_p!r}: must be in (0, 1]")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise ValueError(f"top_k {self.top_k!r}: must be at least 1")

    @property
    def sampling(self) -> SamplingParams:
        """The code pass's logits processing."""
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)

    def key(self) -> str:
        """The settings that differ from the defaults, `name=value;...` in a fixed order ("" for none): what a
        content key hashes and the manifest's `controls` column holds (Controls.parse reads it back)."""
        parts = [f"{f}={getattr(self, f)!r}" for f in ("speed", "temperature", "top_p", "top_k")
                 if getattr(self, f) != getattr(DEFAULT_CONTROLS, f)]
        if self.refine is not None:
            parts.append(f"refine={self.refine.oral}/{self.refine.laugh}/{self.refine.brk}")
        return ";".join(parts)

    @classmethod
    def parse(cls, key: str) -> Controls:
        """The Controls of a `key()` string (ValueError for anything else)."""
        kw: dict = {}
        for part in filter(None, (key or "").split(";")):
            name, _, value = part.partition("=")
            if name == "refine":
                oral, laugh, brk = (int(v) for v in value.split("/"))
                kw[name] = Refine(oral, laugh, brk)
            elif name in ("speed", "top_k"):
                kw[name] = int(value)
            elif name in ("temperature", "top_p"):
                kw[name] = float(value)
            else:
                raise ValueError(f"controls {key!r}: unknown setting {name!r}")
        return cls(**kw)


DEFAULT_CONTROLS = Controls()


@dataclass(frozen=True)
class Request:
    key: str                       # the segment's content key; returned with the result
    text: str                      # normalized text to speak (random models' forced count comes from it)
    spk_emb: str                   # the voice string (engine.voice): a spk_emb string, or a prompt voice
    seed: int                      # per-segment seed (its RNG is this row's alone)
    forced_tokens: int | None = None   # exact GPT token count (random-* models set it from the text)
    controls: Controls = DEFAULT_CONTROLS   # pace and sampling; with `refine` and no `refined`: refined first
    refined: str | None = None     # the refine pass's text (Refined.text): the code prompt speaks it instead
    rank: int = 0                  # scheduling only: lower ranks start first (a book's chapter); never the audio


@dataclass(frozen=True)
class Result:
    key: str
    audio: np.ndarray              # float32 mono at engine.units.SAMPLE_RATE, (2T-1)*256 samples
    tokens: int                    # GPT steps generated (T)
    refined: str | None = None     # the text the code prompt spoke when the request was refined


@dataclass(frozen=True)
class Refined:
    """The refine pass's result for a request: `text`, upstream's decoding of the generated ids below
    [break_0] (what its Chat.infer hands to the code pass), and every generated id (`tokens`, EOS excluded)."""
    key: str
    text: str
    tokens: tuple[int, ...]


class Synthesizer(Protocol):
    """What the pipeline's stages ask of an engine (engine.engine.Engine; tests/speech_engine.py's stand-in):
    tasks/ type their `engine` with it and reach nothing else of it."""

    @property
    def version(self) -> str:
        """The engine version a content key hashes (engine.engine.engine_version)."""

    @property
    def adopts(self) -> tuple[str, ...]:
        """Earlier versions whose done audio a plan keeps (engine.engine.adopted_versions)."""

    @property
    def is_random(self) -> bool:
        """Random weights: their audio is noise, nothing to hear (QA off), the token count forced."""

    @property
    def batch(self) -> int:
        """Rows decoded together at most (EngineOptions.batch): a schedule ranks the last batch-worth alike."""

    def synthesize(self, requests: Iterable[Request], progress: Callable[[Result], None] | None = None,
                   more: Callable[[bool], Iterable[Request]] | None = None) -> Iterator[Result]:
        """A Result per request as rows finish (completion order); `more(idle)`: requests that join the pass."""

    def refine(self, requests: Iterable[Request]) -> Iterator[Refined]:
        """The refine-text pass over requests whose controls set `refine`: a Refined per request as rows finish."""

    def resolve_voice(self, spec: VoiceSpec) -> str:
        """The voice string of a parsed spec for this model (engine.voice.resolve_voice; VoiceError)."""

    def anchor_voice(self, voice: str, rendering: np.ndarray, text: str) -> str:
        """`voice` conditioned on its own `rendering` of `text` (a prompt voice string)."""


def onnx_missing() -> list[str]:
    """The onnx extra's modules that are not installed (the onnx back-end needs all of them; [] when ready)."""
    return [m for m in ONNX_MODULES if importlib.util.find_spec(m) is None]


class DeviceUnavailable(Exception):
    """The device the engine is asked to run on is not usable here (`--device cuda` without a GPU, a driver or a
    CUDA build of torch); str(err) is "--device <device>: <why>", one line."""


class ModelUnavailable(Exception):
    """The model cannot be loaded (offline hub, missing asset dir); the message is one line for the user."""
