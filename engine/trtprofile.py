"""What ONNX Runtime's TensorRT provider needs of one exported graph, read from the graph itself (weights not
loaded): an optimization profile — the min/opt/max shape of every dynamic input, from its named dims' roles (batch,
cache, length, steps, frames: DIM_ROLES, or an expression of them) —, whether it holds half tensors (FP16 on), and
the provider options built from those (`ort_trt_options`).  engine/ortengine.py opens TensorRT sessions with them;
the static TensorRT check of the same graphs (operators, dtypes, integer positions: a developer tool with a CLI)
is benchmarks/trtcheck.py, which reports the same profile.  Needs the `onnx` package (imported on first use)."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ONNX_MISSING = "the onnx package is not installed: pip install 'chattts-render[onnx]'"
HALF_TYPES = ("FLOAT16", "BFLOAT16")
# dims of graph inputs: a symbol's role by its name (first match wins: "cache_len" is a cache dim, not a length)
DIM_ROLES = (("cache", re.compile(r"cache|past|kv|ctx|context|total", re.I)),
             ("batch", re.compile(r"batch|rows|^b$", re.I)),
             ("steps", re.compile(r"step|^t$", re.I)),
             ("frames", re.compile(r"frame|mel|sample|time|audio", re.I)),
             ("length", re.compile(r"len|seq|token|prompt|^l$", re.I)))
# role -> (min, opt, max).  batch: the GPU scheduler's batches (H200 runs used 64..512); cache: a prompt plus
# 2048 new tokens fits ChatTTS's 4096 positions; length: a prefill's prompt (segments of <= ~200 characters);
# steps: generated tokens per row (max_new_token 2048); frames: mel frames, 2 per step
DEFAULT_RANGES = {"batch": (1, 64, 256), "cache": (1, 512, 4096), "length": (1, 128, 512),
                  "steps": (1, 512, 2048), "frames": (1, 1024, 4096)}


@dataclass(frozen=True)
class ProfileOptions:
    """min/opt/max per dim role, plus per-symbol overrides ((name, (min, opt, max)), ...)."""
    batch: tuple[int, int, int] = DEFAULT_RANGES["batch"]
    cache: tuple[int, int, int] = DEFAULT_RANGES["cache"]
    length: tuple[int, int, int] = DEFAULT_RANGES["length"]
    steps: tuple[int, int, int] = DEFAULT_RANGES["steps"]
    frames: tuple[int, int, int] = DEFAULT_RANGES["frames"]
    overrides: tuple = ()

    def __post_init__(self):
        for name, r in [*((role, getattr(self, role)) for role in DEFAULT_RANGES), *self.overrides]:
            if len(r) != 3 or not 0 <= r[0] <= r[1] <= r[2]:
                raise ValueError(f"profile range of {name} must be 0 <= min <= opt <= max, got {tuple(r)}")

    def range_of(self, symbol: str):
        """(role, (min, opt, max)) of a dim symbol, or None when it has no role."""
        for name, r in self.overrides:
            if name == symbol:
                return "override", tuple(r)
        for role, pattern in DIM_ROLES:
            if pattern.search(symbol):
                return role, getattr(self, role)
        return None


@dataclass(kw_only=True)
class Profile:
    """One graph's optimization profile: its dim symbols, the shapes at min/opt/max, and what kept it from one."""
    symbols: dict = field(default_factory=dict)         # symbol -> (role, (min, opt, max))
    shapes: dict = field(default_factory=dict)          # "min"/"opt"/"max" -> {input: "AxB"}
    half: bool = False                                  # the graph holds float16/bfloat16 tensors
    problems: list = field(default_factory=list)

    def shape_arg(self, which: str) -> str:
        """The `name:AxB,...` value of trtexec --{which}Shapes and ONNX Runtime's trt_profile_{which}_shapes."""
        return ",".join(f"{k}:{v}" for k, v in self.shapes.get(which, {}).items())


def onnx_module():
    """The onnx package, with the submodules the readers use; ImportError(ONNX_MISSING) without it."""
    try:
        import onnx
        import onnx.inliner
        import onnx.numpy_helper
        import onnx.shape_inference
    except ImportError:
        raise ImportError(ONNX_MISSING) from None
    return onnx


def read_graph(path):
    """(onnx, model, graphs, dtypes) of one .onnx file (external data not loaded): local functions inlined, shapes
    inferred; graphs: the main graph and every subgraph, depth first; dtypes: tensor name -> TensorProto type
    name."""
    onnx = onnx_module()
    model = onnx.load(str(path), load_external_data=False)
    model = onnx.inliner.inline_local_functions(model)
    model = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    graphs = list(_graphs(onnx, model.graph))
    dtypes = {}
    for g in graphs:
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                dtypes[vi.name] = type_name(onnx, vi.type.tensor_type.elem_type)
        dtypes.update({t.name: type_name(onnx, t.data_type) for t in g.initializer})
        for n in g.node:
            for a in n.attribute if n.op_type == "Constant" else ():
                if a.name == "value":
                    dtypes[n.output[0]] = type_name(onnx, a.t.data_type)
    return onnx, model, graphs, dtypes


def type_name(onnx, elem: int) -> str:
    return onnx.TensorProto.DataType.Name(elem)


def _graphs(onnx, graph):
    """The graph and every subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(onnx, a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _graphs(onnx, g)


def _eval_dim(expr: str, values: dict) -> int:
    """An input dim expression over symbols ('cache_len + 1') evaluated with integer arithmetic."""
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            return values[n.id]
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(n.left), ev(n.right)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b,
                    ast.FloorDiv: a // b if b else 0}[type(n.op)]
        raise ValueError(expr)
    return ev(ast.parse(expr, mode="eval"))


def derive_profile(graph, init_names, opts: ProfileOptions, report: Profile) -> None:
    """Per dynamic graph input: its shape at min/opt/max, from the dims' symbols and their roles."""
    rows = []
    for inp in graph.input:
        if inp.name in init_names or not inp.type.HasField("tensor_type"):
            continue
        dims = list(inp.type.tensor_type.shape.dim)
        if not inp.type.tensor_type.HasField("shape"):
            report.problems.append(f"input {inp.name!r}: no shape (rank unknown), no profile can be derived")
            continue
        if all(d.HasField("dim_value") for d in dims):
            continue                                           # static: trtexec needs no shape for it
        for k, d in enumerate(dims):
            if d.HasField("dim_value"):
                continue
            if not d.dim_param:
                report.problems.append(f"input {inp.name!r} dim {k}: dynamic without a name, no profile role")
                continue
            for sym in (d.dim_param,) if d.dim_param.isidentifier() else re.findall(r"[A-Za-z_]\w*", d.dim_param):
                if sym in report.symbols:
                    continue
                found = opts.range_of(sym)
                if found is None:
                    report.problems.append(f"input {inp.name!r} dim {k}: symbol {sym!r} has no profile role "
                                           f"(name it batch/cache/length/steps/frames, or --dim {sym}=MIN,OPT,MAX)")
                else:
                    report.symbols[sym] = found
        rows.append((inp.name, dims))
    for which, j in (("min", 0), ("opt", 1), ("max", 2)):
        values = {s: r[j] for s, (_, r) in report.symbols.items()}
        shapes: dict[str, str] = {}
        try:
            for name, dims in rows:
                shapes[name] = "x".join(str(d.dim_value if d.HasField("dim_value") else _eval_dim(d.dim_param, values))
                                        for d in dims)
        except (KeyError, ValueError, SyntaxError):
            if which == "min" and not any("no profile role" in p or "without a name" in p for p in report.problems):
                report.problems.append("an input dim expression could not be evaluated: no profile")
            report.shapes = {}
            return
        report.shapes[which] = shapes


def graph_profile(path, opts: ProfileOptions = ProfileOptions()) -> Profile:
    """The profile of one .onnx file over `opts`' ranges (problems: what kept it from one)."""
    _, model, _, dtypes = read_graph(path)
    profile = Profile(half=any(t in HALF_TYPES for t in dtypes.values()))
    derive_profile(model.graph, {t.name for t in model.graph.initializer}, opts, profile)
    return profile


def ort_trt_options(report: Profile, engine_cache: Path) -> dict:
    """ONNX Runtime TensorRT provider options for one graph's profile: its optimization profile, the engine and
    timing caches in `engine_cache` (a folder of the model cache), and for a graph holding half tensors FP16
    with the norms' Pow + ReduceMean kept in fp32 (the provider builds weakly typed: FP16 on lets TensorRT
    lower any layer; an all-fp32 graph gets no FP16).  Every value is a string."""
    half = str(int(report.half))
    opts = {"trt_fp16_enable": half, "trt_layer_norm_fp32_fallback": half, "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": str(engine_cache), "trt_timing_cache_enable": "1",
            "trt_timing_cache_path": str(engine_cache)}
    if report.shapes:
        opts.update({f"trt_profile_{w}_shapes": report.shape_arg(w) for w in ("min", "opt", "max")})
    return opts

