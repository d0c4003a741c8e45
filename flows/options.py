"""What a render's parameters (flows/params.py RenderParams) become: each stage's options from the parameters it
reads, composed into RenderOptions.  This is the edge where plain values meet the world: a voice spec is parsed, a
lexicon and a cast file read, a book given as a URL downloaded, device "auto" asks torch for a GPU."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.api import DeviceUnavailable, EngineOptions, Refine, onnx_missing
from engine.device import cuda_problem
from flows.arguments import usage
from flows.params import RenderParams
from tasks.audio.options import PackageOptions, loudness_preset
from tasks.bookdir import DEFAULT_OUT, book_slug
from tasks.errors import BookError
from tasks.fleet import storage
from tasks.ingest.matter import MatterOptions
from tasks.options import RenderOptions, load_lexicon, parse_chapters
from tasks.plan.direction import direction_paths, load_direction
from tasks.qa.options import QAOptions
from tasks.synthesize.options import GuardOptions
from tasks.text.normalize import NormalizeOptions
from tasks.text.segment import SegmentOptions
from tasks.voice.cast import load_cast
from tasks.voice.voices import parse_voice


def options(**params) -> RenderOptions:
    """RenderOptions for a command that reads the book (ValueError → a usage error); the book must be a file
    (BookError).  Commands that work from a book dir alone find it with book_place."""
    with usage():
        opts = options_from_params(**params)
    if not opts.book.is_file():
        raise BookError(str(opts.book), "no such file" if not opts.book.exists() else "not a file")
    return opts


def options_from_params(book: str, **params) -> RenderOptions:
    """RenderOptions from plain values (CLI arguments, flow and deployment parameters), checked as RenderParams."""
    return render_options(RenderParams(book=str(book), **params))


def render_options(p: RenderParams) -> RenderOptions:
    """A usage error or a missing GPU is named before the book is fetched or read.  `out` or `book` as a store URL
    (tasks/fleet/storage.py): the book is downloaded and the render works in `scratch` (default: a cache folder)."""
    engine = engine_options(p)
    out, store = output_root(p.out, p.scratch)
    path = storage.fetch_book(p.book, p.scratch) if storage.is_url(p.book) else Path(storage.local_path(p.book))
    package = package_options(p)
    segment = segment_options(p, path)                        # a clip's transcript is read as the book is
    guard = GuardOptions(enabled=p.guard, max_attempts=p.guard_attempts)
    qa = qa_options(p, engine.device)
    voice = parse_voice(p.voice, p.clip_text, segment) if p.voice is not None else None
    return RenderOptions(book=path, out=out, voice=voice, engine=engine, segment=segment, package=package, guard=guard,
                         allow_gaps=p.allow_gaps,
                         chapters=parse_chapters(p.chapters) if p.chapters else (), voice_anchor=p.voice_anchor,
                         cast=load_cast(p.cast) if p.cast else None, store=store, qa=qa, language=p.language,
                         matter=MatterOptions.parse(p.include, p.skip),
                         speed=p.speed, refine=refine_options(p),
                         direction=load_direction(*direction_paths(path, p.direction)), schedule=p.schedule)


def refine_options(p: RenderParams) -> Refine | None:
    """--refine's levels, None without --refine."""
    levels = Refine(oral=p.refine_oral, laugh=p.refine_laugh, brk=p.refine_break)    # checked either way
    return levels if p.refine else None


def engine_options(p: RenderParams) -> EngineOptions:
    """The engine's options; device "auto" (the deployments'): cuda when this process sees a GPU
    (CUDA_VISIBLE_DEVICES), else cpu.  DeviceUnavailable for "cuda" where there is none."""
    device = p.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    engine = EngineOptions(model=p.model, device=device, dtype=p.dtype, int8=p.int8, cuda_graphs=p.cuda_graphs,
                           max_batch=p.max_batch, threads=p.threads, backend=p.backend)
    if engine.backend == "onnx" and (missing := onnx_missing()):
        raise ValueError(f"--backend onnx: {', '.join(missing)} not installed (pip install 'chattts-render[onnx]', "
                         "or [onnx-gpu] for CUDA)")
    if engine.device == "cuda" and (problem := cuda_problem()) is not None:
        raise DeviceUnavailable(f"--device {engine.device}: {problem}")
    return engine


def segment_options(p: RenderParams, book: Path) -> SegmentOptions:
    """How the book's text is read: t2s, the lexicons that apply to it, the language (auto: prepare resolves it)."""
    norm = NormalizeOptions(t2s=p.t2s, lexicon=load_lexicon(book, p.lexicon))
    return SegmentOptions(normalize=norm if p.language == "auto" else replace(norm, lang=p.language))


def package_options(p: RenderParams) -> PackageOptions:
    """The outputs: their formats (a list as given: spaces and case do not matter), loudness (LUFS, or a preset
    with its own true-peak ceiling: tasks.audio.loudness.LOUDNESS_PRESETS) and tempo."""
    target, ceiling = loudness_preset(p.loudness)
    return PackageOptions(formats=tuple(f.strip().lower() for f in p.formats if f.strip()), target_lufs=target,
                          true_peak_dbtp=PackageOptions.true_peak_dbtp if ceiling is None else ceiling, tempo=p.tempo)


def qa_options(p: RenderParams, device: str) -> QAOptions:
    """The proof asked for: its mode (auto, the default, resolved by tasks.stages.qa_options), the ASR model."""
    opts = QAOptions(mode=p.qa, device=device)
    return opts if p.asr_model is None else replace(opts, asr_model=p.asr_model)


def output_root(out: str | None, scratch: str | None) -> tuple[Path, str | None]:
    """(the folder a render works in, the store URL or None): `out` itself, or a store's scratch folder."""
    if out is not None and storage.is_url(out):
        return storage.scratch_root(scratch, out), out
    return Path(storage.local_path(out or str(DEFAULT_OUT))), None


def book_place(book: str, out: str | None, scratch: str | None) -> tuple[Path, str | None]:
    """(the book dir of `book` in `out`, the store URL or None) without reading the book or the store: what `status`,
    `package` and `fix` need."""
    root, store = output_root(out, scratch)
    return root / book_slug(book_path(book, scratch)), store


def book_path(book: str, scratch: str | None) -> Path:
    """The book's local file: a book given as a URL where a render fetches it to (not downloaded here)."""
    return storage.fetched_book_path(book, scratch) if storage.is_url(book) else Path(storage.local_path(book))
