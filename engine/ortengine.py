"""The onnx back-end (`--backend onnx`): the same scheduler, decode loop and sampling as the torch engine; only the
model calls (GPT prefill, decode step, code heads, Decoder + Vocos) run through ONNX Runtime.

    model = load_ort_model(loaded, "cpu", "fp32", threads=2, max_batch=32)   # exports once (engine/onnxgraph.py)
    Scheduler(model, opts.batch, exact=True)        # engine/scheduler.py, unchanged: OrtCodeModel is a CodeModel
    wav = model.vocode(row.hiddens)                 # float32 numpy, samples_for_tokens(T) samples

Batch invariance on the CPU provider is measured (tests/engine/test_onnx.py).  The cache and IO binding, the
providers by device and what is untested: docs/modules.md, "The onnx back-end", and docs/onnx.md.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from engine.api import DeviceUnavailable
from engine.attention import Attention, Call
from engine.codemodel import CodeModel
from engine.llama import LlamaShape
from engine.onnxgraph import export_graphs, read_info
from engine.sampling import hash32
from engine.trtprofile import ProfileOptions, graph_profile, ort_trt_options
from engine.units import samples_for_tokens

PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "trt": "TensorrtExecutionProvider"}
ELEMENT = {torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64}
OOM_MARKERS = ("out of memory", "failed to allocate memory", "bad_alloc")
TRT_OPT_LEN = 512                  # the TensorRT profiles' optimum cache length / prompt length (positions)


def ort_version() -> str:
    """onnxruntime's major.minor ("1.32"): its kernels decide the bits, so the engine version names it."""
    import onnxruntime as ort

    return ".".join(ort.__version__.split(".")[:2])


def provider_for(device: str) -> str:
    """"cpu", "trt" (TensorRT's provider is in this onnxruntime) or "cuda"; DeviceUnavailable when the cuda device
    has neither (a CPU-only onnxruntime)."""
    import onnxruntime as ort

    if device == "cpu":
        return "cpu"
    have = ort.get_available_providers()
    for name in ("trt", "cuda"):
        if PROVIDERS[name] in have:
            return name
    raise DeviceUnavailable("--device cuda: this onnxruntime has no CUDA or TensorRT provider (--backend onnx on a "
                            "GPU needs the onnx-gpu extra: onnxruntime-gpu)")


def backend_name(device: str) -> str:
    """`onnx-ort<major.minor>-<provider>`: what engine.engine.engine_version adds for this back-end."""
    return f"onnx-ort{ort_version()}-{provider_for(device)}"


def trt_options(name: str, folder: Path, max_batch: int, max_len: int) -> dict | None:
    """TensorRT provider options for graph `name`, from engine.trtprofile (the one source of profiles): its profile
    is derived from its dims: batch 1..max_batch (opt half; the vocoder decodes one row), prompt and cache length
    1..max_len (opt TRT_OPT_LEN), vocoder steps 1..max_len; FP16 only for a graph holding half tensors.  None (and a
    warning) when no profile can be derived: the graph then runs on the CUDA provider.  What TensorRT's parser
    does not take of a graph the provider hands to CUDA itself; the static check of operators, dtypes and integer
    positions (benchmarks/trtcheck.py) runs on these graphs in the tests (tests/benchmarks/test_trtcheck.py)."""
    opt = min(TRT_OPT_LEN, max_len)
    batch = (1, 1, 1) if name == "vocoder" else (1, max(1, max_batch // 2), max_batch)
    report = graph_profile(Path(folder) / f"{name}.onnx",
                           ProfileOptions(batch=batch, cache=(1, opt, max_len), length=(1, opt, max_len),
                                          steps=(1, opt, max_len)))
    if report.problems:
        warnings.warn(f"{name}.onnx: no TensorRT profile ({'; '.join(report.problems)}): CUDA provider", stacklevel=2)
        return None
    cache = Path(folder) / "trt"
    cache.mkdir(exist_ok=True)
    return {"device_id": "0", **ort_trt_options(report, cache)}


def _providers(provider: str, name: str, info: dict, folder: Path, max_batch: int) -> list:
    if provider == "cpu":
        return [PROVIDERS["cpu"]]
    cuda = (PROVIDERS["cuda"], {"device_id": 0})
    if provider == "cuda":
        return [cuda, PROVIDERS["cpu"]]
    trt = trt_options(name, folder, max_batch, info["max_pos"])
    return ([(PROVIDERS["trt"], trt)] if trt else []) + [cuda, PROVIDERS["cpu"]]


class Session:
    """One graph's InferenceSession, run through IO binding on torch tensors (CPU or CUDA memory): inputs are
    bound in place, outputs are written into tensors the caller allocates (no copies on the way)."""

    def __init__(self, path: Path, provider: str, threads: int | None, providers: list):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        if threads:
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(str(path), so, providers=providers)
        self.device = "cpu" if provider == "cpu" else "cuda"

    def run(self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        io = self.sess.io_binding()
        keep = []
        for name, t in inputs.items():
            t = t.contiguous()
            keep.append(t)
            io.bind_input(name, self.device, 0, ELEMENT[t.dtype], list(t.shape), t.data_ptr())
        for name, t in outputs.items():
            io.bind_output(name, self.device, 0, ELEMENT[t.dtype], list(t.shape), t.data_ptr())
        try:
            self.sess.run_with_iobinding(io)
        except Exception as err:                          # onnxruntime's own exception classes
            if any(m in str(err).lower() for m in OOM_MARKERS):
                raise torch.OutOfMemoryError(f"onnxruntime: {err}") from err
            raise
        return outputs


class OrtLlama:
    """engine.llama.Llama's call, through the prefill and decode graphs.  Positions index the cache (a slot holds
    its sequence from index 0), so a row's past is cache[slot, :, :pos].  A decode step runs slots 0 .. the highest
    slot of its rows (those without a row of this step at position 0: their own new key only, ignored) with those
    slots' whole cache buffers as the past (a contiguous view: bound in place)."""

    def __init__(self, shape: LlamaShape, prefill: Session, decode: Session):
        self.s, self.prefill, self.decode = shape, prefill, decode
        self.attention = Attention()          # the calls carry the rows only: the graphs attend and write the cache

    def __call__(self, x, call: Call):
        """As Llama.forward (x [B, L, C]; call: any strategy's, for its positions, cache and slots), returning the
        final-normed hidden state of the last position only, [B, 1, C] fp32 (the decode loop reads h[:, -1] /
        h[:, 0])."""
        pos, cache, rix = call.pos, call.cache, call.slots
        B, L, _ = x.shape
        prefill = L > 1 or int(pos.max()) == 0                 # positions 0..L-1: a prompt
        n = B if prefill else int(rix.max()) + 1               # a decode step runs slots 0..n-1 (a contiguous view)
        if not prefill:
            xa, pa = x.new_zeros(n, 1, self.s.hidden), pos.new_zeros(n, 1)
            xa[rix], pa[rix] = x, pos
            x, pos = xa, pa
        hidden = torch.empty(n, self.s.hidden, dtype=torch.float32, device=x.device)
        new = {f"{kv}_{i}": torch.empty(n, self.s.kv_heads, L, self.s.head_dim, dtype=x.dtype, device=x.device)
               for kv in "kv" for i in range(self.s.layers)}
        if prefill:
            self.prefill.run({"x": x, "pos": pos}, {"hidden": hidden, **new})
        else:                                                  # each layer's whole buffer bound in place: no copy
            past = {f"past_{kv}_{i}": c[i][:n] for kv, c in (("k", cache.k), ("v", cache.v))
                    for i in range(self.s.layers)}
            self.decode.run({"x": x, "pos": pos, **past}, {"hidden": hidden, **new})
            hidden, new = hidden[rix], {k: t[rix] for k, t in new.items()}
        at = slice(0, L) if prefill else pos[rix, 0]
        for i in range(self.s.layers):
            cache.k[i][rix, :, at] = new[f"k_{i}"] if prefill else new[f"k_{i}"][:, :, 0]
            cache.v[i][rix, :, at] = new[f"v_{i}"] if prefill else new[f"v_{i}"][:, :, 0]
        return hidden[:, None]


class OrtCodeModel(CodeModel):
    """A CodeModel whose Llama, heads and vocoder are ONNX Runtime sessions; the embeddings stay torch tensors."""

    def __init__(self, loaded, folder: Path, provider: str, threads: int | None, max_batch: int):
        info = read_info(folder)
        device = torch.device("cpu" if provider == "cpu" else "cuda")
        dtype = {"fp32": torch.float32, "fp16": torch.float16}[info["dtype"]]
        embed = loaded.embed
        with torch.no_grad():
            emb_code = torch.stack([e.weight.detach().float() for e in embed.emb_code]).to(device)
            emb_text = embed.emb_text.weight.detach().float().to(device)
        self.info, self.folder, self.provider = info, Path(folder), provider
        sessions = {n: Session(Path(folder) / f"{n}.onnx", provider, threads,
                               _providers(provider, n, info, Path(folder), max_batch))
                    for n in ("prefill", "decode", "heads", "vocoder")}
        shape = LlamaShape.from_hf(loaded.gpt.config)
        self.llama = OrtLlama(shape, sessions["prefill"], sessions["decode"])  # type: ignore[assignment]  # a Llama
        # in duck type: its __call__, `s` and `attention` are all that a CodeModel's callers use
        self._heads, self._vocoder = sessions["heads"], sessions["vocoder"]
        self.emb_text, self.emb_code = emb_text, emb_code
        self.Q, self.V = info["Q"], info["V"]
        self.spk_emb_id = loaded.tokenizer.spk_emb_ids
        self.dtype, self.device = dtype, device
        self.graphs = False
        self.cells = hash32(torch.arange(self.Q * self.V, device=device, dtype=torch.long) + 1)
        self._sizes = {}
        self._head_text, self._text_cells = None, None   # no text head: the refine pass runs on torch only

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, C] -> logits [B, Q, V] fp32 through the heads graph."""
        h = hidden.float().contiguous()
        out = torch.empty(h.shape[0], self.Q, self.V, dtype=torch.float32, device=h.device)
        return self._heads.run({"hidden": h}, {"logits": out})["logits"]

    def call_size(self, rows: int, max_rows: int, text: bool = False) -> int:
        """Every decode step is one call over exactly the active rows (no padding rows: docs/onnx.md)."""
        return rows

    def linears(self, text: bool = False) -> list:
        raise NotImplementedError("the onnx back-end's projections run inside onnxruntime")

    def vocode(self, hiddens: torch.Tensor):
        """hiddens [T, C] -> float32 numpy, samples_for_tokens(T) samples (Decoder + Vocos graph, the row alone)."""
        T = hiddens.shape[0]
        if T == 0:
            return np.zeros(0, dtype=np.float32)
        h = hiddens.to(self.device, torch.float32)[None].contiguous()
        wav = torch.empty(1, samples_for_tokens(T), dtype=torch.float32, device=self.device)
        self._vocoder.run({"hidden": h}, {"wav": wav})
        return np.ascontiguousarray(wav[0].cpu().numpy(), dtype=np.float32)


def load_ort_model(loaded, device: str, dtype: str, threads: int | None, max_batch: int) -> OrtCodeModel:
    """Export `loaded`'s graphs into the model cache (once per fingerprint and dtype) and open them."""
    provider = provider_for(device)
    paths = export_graphs(loaded, dtype=dtype)
    return OrtCodeModel(loaded, paths["prefill"].parent, provider, threads or torch.get_num_threads(), max_batch)
