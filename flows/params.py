"""A render's parameters, written once: RenderParams holds each one's type, default (the stage options' own),
choices and help.  Everything else is derived from it: the command line's options (flows/arguments.py), the Prefect
flows' parameters (flows/signature.py: render_book.py, nightly.py; Prefect reads their types, defaults and
descriptions from it, and prefect.yaml sets only what a deployment changes) and what they become
(flows/options.py: RenderOptions).  Adding a render option is one field here, plus its use."""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Literal, TypeVar, get_args, get_origin, get_type_hints

from engine.api import Backend, Dtype, EngineOptions, Refine
from tasks.audio.names import BOOK_FORMATS, FORMATS
from tasks.audio.options import LOUDNESS_PRESETS, TEMPO_MAX, TEMPO_MIN, PackageOptions
from tasks.book import LanguageChoice
from tasks.bookdir import DEFAULT_OUT
from tasks.ingest.matter import ALL, SET_ASIDE
from tasks.qa.options import QAMode
from tasks.synthesize.options import GuardOptions, Schedule

GROUPS = ("output", "engine", "voices", "render", "prosody", "text", "proof")   # option groups (arguments.py)
BOOK_HELP = "the book: an .epub or a .txt file (or its URL in a store, e.g. s3://…)"
Help = str | Callable[[], str] | None    # a callable: help that depends on the machine (its CPUs)
T = TypeVar("T")


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                           # no affinity masks on this OS
        return os.cpu_count() or 1


def option(group: str, default: T, help: Help, flag: str | None = None, old: str | None = None, **cli) -> T:
    """A render parameter: the option group of the commands that take it (flows/arguments.py), its default, its help
    (the CLI's and the flows'), its flag where it is not --NAME (--no-NAME: a bool, True by default, that the flag
    sets False), its `old` flag (a renamed one: still taken on the command line, with a note); `cli`: argparse's
    arguments where they differ (the choices the command line offers).  Typed as its default, as dataclasses.field
    is, so a field's declared type is checked against it."""
    return field(default=default, metadata={"help": help, "group": group, "flag": flag, "old": old, "cli": cli})


@dataclass(frozen=True)
class RenderParams:
    """A render's plain parameters, in the order the `render` command lists them."""
    book: str = field(metadata={"help": BOOK_HELP, "group": None})
    out: str = option("output", str(DEFAULT_OUT),
                      "output root: a folder (default: ./output) or a store URL (s3://bucket/prefix …, see --scratch)")
    scratch: str | None = option("output", None,
                                 "with --out URL: the local work folder (default: ~/.cache/chattts-render/scratch; "
                                 "deletable any time)")
    model: str = option("engine", EngineOptions.model,
                        "hf (Hugging Face cache/hub, default), a local ChatTTS asset dir, or random-tiny / random-full "
                        "(random weights, for tests and benchmarks)")
    device: Literal["cpu", "cuda", "auto"] = option("engine", EngineOptions.device, None, choices=("cpu", "cuda"))
    dtype: Dtype = option("engine", EngineOptions.dtype, None)
    int8: bool = option("engine", EngineOptions.int8,
                        "CPU only: INT8 GPT weights (weight-only int8 with our CPU kernel, or W8A8 on AVX512_VNNI "
                        "where measured faster; W8A8 dynamic quantization without our kernel)")
    backend: Backend = option("engine", EngineOptions.backend,
                              "what runs the model: torch (our engine, default) or onnx (the same scheduler and "
                              "sampling, the model calls through ONNX Runtime: the onnx extra; docs/onnx.md)")
    cuda_graphs: bool = option("engine", EngineOptions.cuda_graphs, "CUDA only: the decode step as CUDA graphs",
                               old="--compile")
    reengine: bool = option("engine", False, "CPU: render with this process's own engine instead of the one the "
                            "book recorded at its first render; what is done stays, only the rest renders with it")
    max_batch: int | None = option("engine", EngineOptions.max_batch,
                                   "rows decoded together at most, >= 1 (default: 32 on CPU, 128 on CUDA; fewer when "
                                   "memory is short)")
    threads: int | None = option("engine", EngineOptions.threads,
                                 lambda: f"torch CPU threads, >= 1 (default: torch's, one per core); more than the "
                                         f"{cpu_count()} CPUs here share them: slower, never faster")
    voice: str | None = option("voices", None,
                               "seed:N, clip:RECORDING (3-30 s, transcript in RECORDING.txt or --clip-text), a saved "
                               "voice's NAME, a file holding a voice string, or the string itself")
    clip_text: str | None = option("voices", None, "the transcript of a clip:RECORDING voice")
    voice_anchor: bool = option("render", False,
                                "condition every segment on the voice's own reading of a reference passage")
    formats: tuple[str, ...] = option("render", PackageOptions.formats,
                                      f"comma-separated output formats: {','.join(FORMATS + BOOK_FORMATS)} (default "
                                      f"{','.join(PackageOptions.formats)})", flag="--format")
    loudness: float | str = option("render", PackageOptions.target_lufs,
                                   "the integrated loudness of every output file: LUFS (EBU R128; default "
                                   f"{PackageOptions.target_lufs:g}), or where it is published, with its own "
                                   "true-peak ceiling: " + "; ".join(f"{k}: {v.target_lufs:g} LUFS, "
                                                                     f"{v.true_peak_dbtp:g} dBTP ({v.what})"
                                                                     for k, v in LOUDNESS_PRESETS.items()),
                                   metavar="LUFS|" + "|".join(LOUDNESS_PRESETS), type=str)
    tempo: float = option("render", PackageOptions.tempo,
                          "play the finished audio this many times as fast, its pitch kept "
                          f"({TEMPO_MIN:g}..{TEMPO_MAX:g}; default 1): faster than the model's own speed allows; "
                          "subtitles, chapter marks and the read-along text move with it; changing it re-packages "
                          "without re-rendering", metavar="X")
    lexicon: str | None = option("text", None,
                                 "a word<TAB>replacement file (after the global ~/.config/chattts-render/lexicon.tsv "
                                 "and the book's <stem>.lexicon.tsv)")
    t2s: bool = option("text", True, "keep Traditional characters", flag="--no-t2s")
    language: LanguageChoice = option("text", "auto",
                                      "the book's reading language: zh (Chinese), en (English), or auto "
                                      "(default: the book's declared language unless its text says "
                                      "otherwise, else a guess from the text)")
    cast: str | None = option("render", None,
                              "a cast file (TOML): voices for the narrator, quoted speech and named characters")
    chapters: str | None = option("render", None, "render only these chapters, 1-based: e.g. 1-3,7 (a preview)")
    include: str | None = option("render", None,
                                 "bring back what is set aside by default (front and back matter nobody listens "
                                 f"to): kinds ({', '.join([*SET_ASIDE, ALL])}) or items as `inspect` numbers them, "
                                 "comma-separated", metavar="KINDS|N")
    skip: str | None = option("render", None,
                              "set more aside: kinds (preface, acknowledgments, appendix, …) or chapters as read "
                              "(1-based), comma-separated; `inspect` lists what is set aside and why",
                              metavar="KINDS|N")
    speed: int | None = option("prosody", None,
                               "ChatTTS's pace, 0..9 (its [speed_N] token; default 5): the book's, for every voice "
                               "without its own (a saved voice's or a cast part's speed); a direction file's line "
                               "overrides both", metavar="0..9")
    refine: bool = option("prosody", False,
                          "run ChatTTS's refine-text pass first: the model writes pauses, laughter and oral fillers "
                          "into each segment's text (stored with it: inspect --segments shows it after a render)")
    refine_oral: int = option("prosody", Refine.oral, f"--refine's oral fillers, 0..9 (default {Refine.oral})",
                              metavar="0..9")
    refine_laugh: int = option("prosody", Refine.laugh, f"--refine's laughter, 0..2 (default {Refine.laugh})",
                               metavar="0..2")
    refine_break: int = option("prosody", Refine.brk, f"--refine's pauses, 0..7 (default {Refine.brk})",
                               metavar="0..7")
    direction: str | None = option("prosody", None,
                                   "a direction file: per-line speed, pauses, [laugh]/[uv_break] and sampling (after "
                                   "the book's <stem>.direction.txt beside it; format in the README)")
    schedule: Schedule = option("render", "length", "the order segments start in: length (longest first, the fastest) "
                                "or chapters (the earliest unfinished chapter first: chapter 1 plays early)")
    allow_gaps: bool = option("render", False,
                              "assemble chapters even if some segments failed (silence in their place)")
    guard_attempts: int = option("render", GuardOptions.max_attempts,
                                 "renders per segment when its duration does not fit its text "
                                 f"(default {GuardOptions.max_attempts})")
    guard: bool = option("render", True,
                         "accept every segment as rendered (no duration check, no re-rolls)", flag="--no-guard")
    qa: QAMode = option("proof", "auto",
                        "hear every segment (full: ASR + speaker check, flagged ones re-taken; suspect: ASR only "
                        "where the duration or the voice is odd; auto, the default: full where its cost fits the "
                        "device and ASR model, else suspect, off for random weights or without the qa extra; the "
                        "render says which)")
    asr_model: str | None = option("proof", None,
                                   "the ASR model of --qa: a faster-whisper name (Hugging Face cache/hub, default "
                                   "base) or a local model directory")

    def __post_init__(self) -> None:
        """Raise ValueError naming the parameter as its flag: every instance is valid (the stage options that
        RenderOptions composes check the rest, each its own)."""
        check({f.name: getattr(self, f.name) for f in PARAMS})


def check(values: Mapping[str, object]) -> None:
    """RenderParams' validator over parameters by name, the others at their defaults (the book needs none of it):
    ValueError naming the parameter as its flag.  The nightly flow checks the parameters it gives every book's run
    with it, once."""
    for name, value in values.items():
        f = BY_NAME[name]
        if (allowed := choices(f)) and value not in allowed and not (value is None and optional(f)):
            raise ValueError(f"{flag(f)} {value!r}: must be one of {', '.join(allowed)}")
    v = {**{f.name: f.default for f in PARAMS if f.default is not MISSING}, **values}
    if v["clip_text"] is not None and v["voice"] is None:
        raise ValueError("--clip-text is the transcript of a --voice clip:PATH recording")
    levels = {"refine_oral": Refine.oral, "refine_laugh": Refine.laugh, "refine_break": Refine.brk}
    if not v["refine"] and (changed := [n for n, lv in levels.items() if v[n] != lv]):
        raise ValueError(f"{flag(BY_NAME[changed[0]])} is a level of the refine-text pass: add --refine")
    if v["refine"] and v["backend"] == "onnx":
        raise ValueError("--refine runs on the torch back-end (the onnx graphs hold no text head): drop "
                         "--backend onnx")


PARAMS: tuple[Field, ...] = fields(RenderParams)
BY_NAME = {f.name: f for f in PARAMS}
TYPES = get_type_hints(RenderParams)            # each parameter's type, evaluated (Prefect and argparse read them)


def choices(f: Field) -> tuple:
    """The values a Literal parameter takes (an optional one too); none for any other."""
    t = TYPES[f.name]
    return next((get_args(a) for a in (t, *get_args(t)) if get_origin(a) is Literal), ())


def optional(f: Field) -> bool:
    return type(None) in get_args(TYPES[f.name])


def flag(f: Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def help_of(f: Field) -> str | None:
    h = f.metadata["help"]
    return h() if callable(h) else h


def named(*names: str) -> list[Field]:
    """The parameters named, in the schema's order; a group's name stands for its parameters."""
    return [f for f in PARAMS if f.name in names or f.metadata["group"] in names]
