"""The Engine: text -> audio with ChatTTS's weights, our decode loop and the continuous-batching scheduler.

    engine = Engine.load(EngineOptions(model="random-tiny"))
    voice = engine.sample_voice(1234)
    for res in engine.synthesize([Request(key="a", text="你好。", spk_emb=voice, seed=7)]):
        res.audio   # float32 numpy, (2T-1)*256 samples at 24 kHz

Text arrives normalized; the prompt is upstream's, token for token (a voice's sample and its codes, the request's
[speed_N], inline control tokens), and the refine-text pass (`refine`) is upstream's through our decode loop, with
two differences for determinism.  A result does not depend on the requests it was batched with (engine/generate.py).
The prompts and the refine pass: docs/modules.md, "The Engine".
"""
from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from engine.api import (
    DEFAULT_SPEED,
    REFINE_MAX_NEW_TOKENS,
    REFINE_SAMPLING,
    DeviceUnavailable,
    EngineOptions,
    ModelUnavailable,
    Refine,
    Refined,
    Request,
    Result,
    onnx_missing,
)
from engine.clip import sample_prompt
from engine.codemodel import CodeModel, enable_cuda_graphs
from engine.cpu import backend_name, cpu_linear, path_linears
from engine.cpupath import candidates, choose
from engine.generate import CAP_FACTOR, MAX_NEW_TOKENS, Row
from engine.llama import LlamaShape
from engine.loader import load_chattts
from engine.ortengine import backend_name as ort_backend, load_ort_model
from engine.sampling import row_key
from engine.scheduler import Scheduler
from engine.units import expected_tokens
from engine.vocoder import decode, vocoder_dtype
from engine.voice import VoiceSpec, check_voice, resolve_voice, sample_voice, speaker_vector
from engine.voicestring import Voice, decode_prompt, decode_voice

if TYPE_CHECKING:
    import numpy as np

ENGINE_VERSION = "6"               # bump whenever generated audio would change (3: oneDNN packed linears on CPU;
                                   # 4: engine/kernels.c's linears on CPU; 5: its whole decode step; 6: it is built
                                   # with -ffp-contract=off, and a CPU version names its back-end: engine.cpu;
                                   # the vocoder decodes every row alone on CUDA too)
# Earlier versions whose done audio a plan keeps (tasks/plan/rows.py plan_rows: under its own old key and version, so
# no audio of one arithmetic is ever stored under another's key): the same model, voice, seed and sampling, only
# the arithmetic's rounding differs.  Their names lack the CPU back-end (before 6 every CPU back-end shared one
# name), so a book rendered with 2-5 on a machine is not rendered again there.
ADOPTED_VERSIONS = ("2", "3", "4", "5")
PROMPT = "[Stts][spk_emb][speed_{speed}]{text}[Ptts]"   # as upstream builds it (InferCodeParams.prompt "[speed_N]")
# With a sample (upstream Speaker.decorate_code_prompts with txt_smp; its codes follow, Tokenizer.encode)
SAMPLE_PROMPT = "[Stts]{speaker}{txt_smp}[speed_{speed}]{text}[Ptts]"
STRIPPED = ("[Stts]", "[spk_emb]", "[empty_spk]")   # upstream removes these from the text (issue #459)
REFINE_PROMPT = "[Sbreak]{text}[Pbreak]{levels}"    # upstream Speaker.decorate_text_prompts

_LOCK = threading.Lock()
_MODELS: dict[tuple, object] = {}  # (model, device, dtype, int8, cuda_graphs, backend, CPU path) -> CodeModel


def _resolve_dtype(opts: EngineOptions, path=None) -> str:
    """The engine's dtype: the one asked; for auto, bf16 on CUDA (onnx: fp16), on CPU the chosen path's
    (engine/cpupath.py: the fastest exact float path this CPU has), else fp32."""
    if opts.dtype != "auto":
        return opts.dtype
    if opts.device == "cuda":
        return "fp16" if opts.backend == "onnx" else "bf16"
    return path.dtype if path is not None else "fp32"


def engine_version(fingerprint: str, opts: EngineOptions, dtype: str, version: str | None = None,
                   path=None, vocoder: str | None = None) -> str:
    """`ours<version>-<model fingerprint>-<dtype>-<device>[-<CPU back-end>][+int8][+compile][+vocoder_bf16]`: what a
    content key hashes.  From version 6 on a CPU name carries engine.cpu.backend_name (which kernels, at which ISA:
    they decide the bits; `path`, engine/cpupath.py's, names its arithmetic); CUDA's names only whether the decode
    step runs as CUDA graphs (+compile: the name it had before the option was --cuda-graphs; kept, so keys stay).
    `+vocoder_bf16`: Decoder + Vocos in bf16 (`vocoder`, default engine.vocoder.vocoder_dtype(path): a bf16 CPU
    path's); fp32 vocoding names nothing, so those names are what they were.  The onnx back-end's names carry
    engine.ortengine.backend_name (`onnx-ort1.32-cpu`: onnxruntime's version and the provider) on every device, so
    its audio never shares a key with the torch engine's."""
    version = version or ENGINE_VERSION           # read when called (tests set an older one)
    if vocoder is None:
        vocoder = vocoder_dtype(path) if opts.backend == "torch" else "fp32"
    extras = "".join(f"+{x}" for x, on in (("int8", opts.int8), ("compile", opts.cuda_graphs),
                                            ("vocoder_bf16", vocoder == "bf16")) if on)
    backend = ""
    if opts.backend == "onnx":
        backend = f"-{ort_backend(opts.device)}"
    elif opts.device == "cpu" and int(version) >= 6:
        backend = f"-{backend_name(opts.int8, dtype, path.tag if path is not None else None)}"
    return f"ours{version}-{fingerprint}-{dtype}-{opts.device}{backend}{extras}"


def adopted_versions(fingerprint: str, opts: EngineOptions, dtype: str, path=None) -> tuple[str, ...]:
    """The versions whose done audio an engine keeps (tasks/plan/rows.py plan_rows): ADOPTED_VERSIONS of its dtype;
    on CPU with a path (engine/cpupath.py) also every other path its request may run — a measurement on another
    day, or another CPU of the fleet, may have chosen another; `--dtype auto` also fp32's ADOPTED_VERSIONS (auto
    was fp32 on CPU before the paths); `--dtype bf16` also torch's own bf16 (its engine before the paths).  None for
    the onnx back-end.  A bf16 path's engine also keeps what the same paths rendered with Decoder + Vocos in fp32
    (before they followed the path's dtype)."""
    if opts.backend != "torch":
        return ()
    out = [engine_version(fingerprint, opts, dtype, v) for v in ADOPTED_VERSIONS]
    if opts.device == "cpu" and path is not None:
        for p in candidates(opts.dtype, opts.int8):
            out += [engine_version(fingerprint, opts, p.dtype, path=p, vocoder=v)
                    for v in dict.fromkeys(("fp32", vocoder_dtype(p)))]
        if opts.dtype == "auto":
            out += [engine_version(fingerprint, opts, "fp32", v) for v in ADOPTED_VERSIONS]
        if dtype == "bf16":
            out.append(engine_version(fingerprint, opts, "bf16"))
    mine = engine_version(fingerprint, opts, dtype, path=path)
    return tuple(v for v in dict.fromkeys(out) if v != mine)


def _ort_model(loaded, opts: EngineOptions, dtype: str):
    """The onnx back-end's OrtCodeModel (graphs exported into the model cache once); ModelUnavailable (one line)
    when the onnx extra is not installed."""
    if missing := onnx_missing():
        raise ModelUnavailable(f"--backend onnx: {', '.join(missing)} not installed (pip install "
                               "'chattts-render[onnx]', or [onnx-gpu] for CUDA)")
    return load_ort_model(loaded, opts.device, dtype, opts.threads, opts.batch)


def _cpu_path(opts: EngineOptions, loaded):
    """engine/cpupath.py's path for a CPU torch engine (None: CUDA, onnx, or no kernels of ours here): measured at
    the model's shape and the engine's batch, once per machine."""
    if opts.device != "cpu" or opts.backend != "torch":
        return None
    shape = LlamaShape.from_hf(loaded.chat.gpt.gpt.config)
    return choose(opts.dtype, opts.int8, shape, opts.batch)


class Engine:
    """See engine/api.py for the contract (engine.api.Synthesizer: what the stages use of it)."""

    def __init__(self, opts: EngineOptions, loaded, code_model, dtype: str, path=None):
        self.opts, self.loaded, self.model, self.dtype, self.path = opts, loaded, code_model, dtype, path
        self.vocoder = vocoder_dtype(path)            # Decoder + Vocos's dtype (engine/vocoder.py)
        self.version = engine_version(loaded.fingerprint, opts, dtype, path=path)
        self.adopts = adopted_versions(loaded.fingerprint, opts, dtype, path)   # onnx: none of the torch engine's
        self._tok = loaded.tokenizer._tokenizer       # BertTokenizerFast
        self._spk_cache: dict[str, object] = {}
        self._voices: dict[str, tuple] = {}           # voice string -> (spk [C] | None, codes [P, Q] | None, txt)
        self.last_batch_sizes: list[int] = []         # the scheduler's batch sizes of the last synthesize call

    @classmethod
    def load(cls, opts: EngineOptions) -> Engine:
        """Load the model (once per process per settings) and build an engine.  Raises ModelUnavailable, or
        DeviceUnavailable when torch cannot use CUDA."""
        if opts.threads:
            torch.set_num_threads(opts.threads)
        if opts.device == "cuda" and not torch.cuda.is_available():
            raise DeviceUnavailable("--device cuda: torch cannot use a CUDA device here (torch.cuda.is_available() "
                                    "is False: a torch built without CUDA, or a driver too old for it); use "
                                    "--device cpu")
        with _LOCK:
            loaded = load_chattts(opts.model, opts.device)
            path = _cpu_path(opts, loaded)
            dtype = _resolve_dtype(opts, path)
            key = (opts.model, opts.device, dtype, opts.int8, opts.cuda_graphs, opts.backend, path)
            if key not in _MODELS and opts.backend == "onnx":
                _MODELS[key] = _ort_model(loaded, opts, dtype)
            if key not in _MODELS:               # a path's model stays fp32 around its kernels (bf16 inside them)
                tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
                    "fp32" if path is not None else dtype]
                spk_id = loaded.tokenizer.spk_emb_ids
                model = CodeModel.from_chattts(loaded.chat.gpt, loaded.embed, spk_id, opts.device, tdtype)
                if path is not None:             # engine/kernels.c's projections and decode step, the heads fp32
                    model.pack(*path_linears(path))
                elif opts.int8:                  # the block projections in int8 (the heads stay fp32, packed below)
                    model.quantize_int8()
                if path is None and opts.device == "cpu" and dtype == "fp32":
                    make = cpu_linear()          # oneDNN, else MKL's F.linear (same version: the CPU's kernels
                    if make is not None:         # already differ from machine to machine)
                        model.pack(make)
                if opts.cuda_graphs:             # CUDA graphs of the decode step
                    enable_cuda_graphs(model)
                _MODELS[key] = model
            return cls(opts, loaded, _MODELS[key], dtype, path)

    @property
    def batch(self) -> int:
        """Rows decoded together at most (EngineOptions.batch)."""
        return self.opts.batch

    @property
    def is_random(self) -> bool:
        """Random weights (random-tiny, random-full): noise, with token counts forced from the text."""
        return bool(self.loaded.is_random)

    # ------------------------------------------------------------------------------------------- voices
    def sample_voice(self, seed: int) -> str:
        return sample_voice(self.loaded, seed)

    def resolve_voice(self, spec: VoiceSpec) -> str:
        """engine.voice.resolve_voice with this engine's model: sampled, a clip encoded, or a string checked."""
        return resolve_voice(spec, self.loaded)

    def _speaker_vector(self, spk_emb: str):
        if spk_emb not in self._spk_cache:
            self._spk_cache[spk_emb] = torch.from_numpy(speaker_vector(spk_emb, self.loaded).astype("float32"))
        return self._spk_cache[spk_emb]

    def _voice(self, voice: str) -> tuple:
        """(speaker vector [C] or None, sample codes [P, Q] long or None, sample transcript) of a voice string,
        checked against the model (VoiceError) once per string."""
        if voice not in self._voices:
            v = decode_voice(voice)
            check_voice(v, self.loaded)
            codes = None
            if v.spk_smp is not None:                                   # [Q, P] uint16 -> [P, Q] long
                codes = torch.from_numpy(decode_prompt(v.spk_smp).astype("int64")).t().contiguous()
            spk = self._speaker_vector(v.spk_emb) if v.spk_emb is not None else None
            self._voices[voice] = (spk, codes, v.txt_smp)
        return self._voices[voice]

    def anchor_voice(self, voice: str, rendering: np.ndarray, text: str) -> str:
        """`voice` (a spk_emb string) conditioned on its own `rendering` of `text` (a Result's audio): the
        DVAE-encoded rendering becomes the sample of every segment, as upstream's split-text infer anchors a
        long text on its first part."""
        return Voice(spk_emb=voice, spk_smp=sample_prompt(self.loaded, rendering), txt_smp=text,
                     origin="anchor").to_string()

    # --------------------------------------------------------------------------------------------- rows
    def prompt_ids(self, text: str, txt_smp: str | None = None, speaker: bool = True,
                   speed: int = DEFAULT_SPEED) -> list[int]:
        """Token ids of upstream's TTS prompt for `text` at `speed` (unknown characters become [UNK], never an
        error); with a sample's transcript `txt_smp`, upstream's sample prompt ([empty_spk] when not `speaker`)."""
        for s in STRIPPED:
            text = text.replace(s, "")
        if txt_smp is None:
            prompt = PROMPT.format(speed=speed, text=text.strip())
        else:
            prompt = SAMPLE_PROMPT.format(speaker="[spk_emb]" if speaker else "[empty_spk]", txt_smp=txt_smp,
                                          speed=speed, text=text.strip())
        return self._tok(prompt, add_special_tokens=False)["input_ids"]

    def refine_ids(self, text: str, refine: Refine) -> list[int]:
        """Token ids of upstream's refine-text prompt for `text` at `refine`'s levels."""
        return self._tok(REFINE_PROMPT.format(text=text, levels=refine.prompt), add_special_tokens=False)["input_ids"]

    def steps_for(self, req: Request) -> tuple[int, bool]:
        """(end_at, forced): the exact count for forced rows, else the runaway cap."""
        forced = req.forced_tokens
        if forced is None and self.loaded.is_random:
            forced = expected_tokens(req.text)
        if forced is not None:
            if not 1 <= forced <= MAX_NEW_TOKENS:
                raise ValueError(f"request {req.key}: forced_tokens {forced} outside 1..{MAX_NEW_TOKENS}")
            return forced, True
        return min(MAX_NEW_TOKENS, math.ceil(CAP_FACTOR * expected_tokens(req.text))), False

    def _row(self, req: Request, order: int):
        spk, codes, txt_smp = self._voice(req.spk_emb)
        said = req.refined if req.refined and req.refined.strip() else req.text   # the refine pass's (not empty)
        ids = torch.tensor(self.prompt_ids(said, txt_smp if codes is not None else None, spk is not None,
                                           req.controls.speed), dtype=torch.long)
        end_at, forced = self.steps_for(req)
        max_pos = self.model.llama.s.max_pos
        prompt = len(ids) + (0 if codes is None else len(codes))
        if prompt + end_at > max_pos:
            raise ValueError(f"request {req.key}: text too long ({prompt} prompt tokens + {end_at} steps "
                             f"> {max_pos} positions)")
        return Row(key=req.key, ids=ids, spk=spk, rng=row_key(req.seed), end_at=end_at, forced=forced,
                   order=order, rank=req.rank, codes=codes, params=req.controls.sampling)

    # ------------------------------------------------------------------------------------------ refine-text
    def _refine_row(self, req: Request, order: int):
        refine = req.controls.refine
        if refine is None:
            raise ValueError(f"request {req.key}: its controls ask for no refine pass")
        ids = torch.tensor(self.refine_ids(req.text, refine), dtype=torch.long)
        forced = None
        if self.loaded.is_random:                    # random weights never end: as many ids as the text has tokens
            forced = min(REFINE_MAX_NEW_TOKENS, max(1, len(self._tok(req.text, add_special_tokens=False)
                                                            ["input_ids"])))
        end_at = forced or REFINE_MAX_NEW_TOKENS
        if len(ids) + end_at > self.model.llama.s.max_pos:
            raise ValueError(f"request {req.key}: text too long to refine ({len(ids)} prompt tokens + {end_at} "
                             f"steps > {self.model.llama.s.max_pos} positions)")
        return Row(key=req.key, ids=ids, spk=None, rng=row_key(req.seed), end_at=end_at, forced=forced is not None,
                   order=order, params=REFINE_SAMPLING, text_eos=self.loaded.tokenizer.eos_token)

    def refine(self, requests: Iterable[Request]) -> Iterator[Refined]:
        """Upstream's refine-text pass over requests whose controls set `refine` (see the module docstring),
        batched like the code pass; yields a Refined per request as rows finish.  The text depends on (text,
        levels, seed, engine version) only."""
        rows = [self._refine_row(r, i) for i, r in enumerate(requests)]
        if not rows:
            return
        below = self.loaded.tokenizer.break_0_ids
        sched = Scheduler(self.model, self.opts.batch, exact=self.opts.device == "cpu")
        for row in sched.run(rows):
            assert row.out_ids is not None               # a finished text row's ids (engine/generate.py)
            kept = [i for i in row.out_ids if i < below]     # upstream drops [break_0] and every id above it
            text = self.loaded.tokenizer.decode([kept])[0]
            yield Refined(key=row.key, text=text, tokens=tuple(row.out_ids))

    def _refined(self, requests: list[Request]) -> list[Request]:
        """`requests`, each whose controls ask for a refine pass and that has no refined text given it by one."""
        todo = [r for r in requests if r.controls.refine is not None and r.refined is None]
        if not todo:
            return requests
        texts = {res.key: res.text for res in self.refine(todo)}
        return [replace(r, refined=texts[r.key]) if r.key in texts else r for r in requests]

    # ------------------------------------------------------------------------------------------ synthesize
    def synthesize(self, requests: Iterable[Request], progress: Callable[[Result], None] | None = None,
                   more: Callable[[bool], Iterable[Request]] | None = None) -> Iterator[Result]:
        """Yield a Result per request as rows finish (completion order).  Bad requests (voice, forced count,
        length) raise ValueError before any decoding.  `more(idle)` adds requests while it runs (a proof render's
        re-takes): asked before every decode step, and with idle=True once the engine has nothing left (it may
        block; nothing then ends the call); see engine.scheduler."""
        requests = self._refined(list(requests))
        refined = {r.key: r.refined for r in requests if r.refined is not None}
        rows = [self._row(r, i) for i, r in enumerate(requests)]
        order = itertools.count(len(rows))           # arrival index of the late ones

        def late(idle: bool) -> list:
            new = self._refined(list(more(idle) if more is not None else ()))
            refined.update({r.key: r.refined for r in new if r.refined is not None})
            return [self._row(r, next(order)) for r in new]

        exact = self.opts.device == "cpu"
        sched = Scheduler(self.model, self.opts.batch, exact=exact)
        self.last_batch_sizes = sched.batch_sizes
        # (no grad mode held across yields: weights need no grad)
        for row in sched.run(rows, late if more is not None else None):
            if self.opts.backend == "onnx":          # the Decoder + Vocos graph, the row alone
                wav = self.model.vocode(row.hiddens)
            else:
                (wav,) = decode(self.loaded, [row.hiddens], self.vocoder)   # each row alone (engine/vocoder.py)
            assert row.tokens is not None                # a finished row's T (engine/generate.py)
            res = Result(key=row.key, audio=wav, tokens=row.tokens, refined=refined.get(row.key))
            if progress is not None:
                progress(res)
            yield res

    def sampled_codes(self, requests: Iterable[Request], max_batch: int) -> dict[str, list]:
        """{key: the sampled codes (one per code head) of every step but the last, read from the decode batch
        before each decode step, then the row's token count}: what two back-ends are compared on
        (benchmarks/onnx_equivalence.py, tests/engine/test_onnx.py).  The scheduler runs exact, `max_batch` rows
        at most together; no audio is decoded."""
        rows = [self._row(r, i) for i, r in enumerate(requests)]
        seen: dict[str, list] = {r.key: [] for r in rows}

        def hook(batch):
            for slot, row in batch.rows.items():
                if len(seen[row.key]) < row.steps:
                    seen[row.key].append(batch.last[slot].tolist())

        for row in Scheduler(self.model, max_batch, exact=True, step_hook=hook).run(rows):
            seen[row.key].append(row.tokens)
        return seen
