"""Static TensorRT readiness check of exported ONNX graphs, without TensorRT (issue 26).

No machine of ours has TensorRT, so what can be known before one does is checked here, from the graph alone:

1. **Operators.**  Every node (subgraphs and inlined local functions included) must be an ONNX standard op that
   TensorRT's ONNX parser supports, for the dtypes it sees.  The support table is onnx/onnx-tensorrt's
   docs/operators.md, vendored unchanged as data (benchmarks/data/onnx-tensorrt-operators.md; its header names the
   commit) and parsed here: the `Supported` column (Y/N), the `Supported Types` column checked against each
   node's *data* tensors (the inputs/outputs of the schema's data type variable: a Gather's indices, a Reshape's
   shape or a comparison's bool output are not data), and of the `Restrictions` column what can be read from a
   graph (an input that "must be an initializer", an attribute that "must be N", an input that "must be less
   than N").  The rest of a present op's restrictions is listed as a note to check by hand.  The default-domain
   opset must lie in the table's range.
2. **Optimization profiles** (engine/trtprofile.py, which the runtime uses too).  Every dynamic dim of every
   graph input must be a named symbol with a role (batch, cache, length, steps, frames: DIM_ROLES), or an
   expression of such symbols; the roles' min/opt/max become the shapes `trtexec --minShapes/--optShapes/
   --maxShapes` and ONNX Runtime's `trt_profile_min_shapes/opt/max` take (the same `name:AxBxC,...` syntax).
3. **Integer positions.**  The upstream trap: ChatTTS casts position ids to the model dtype, which breaks
   positions > 2048 in fp16 (> 256 in bf16).  A position input (name matching POSITION_NAME) must be an
   integer; and no Cast to float16/bfloat16 may sit on a path from an integer
   position input (or an integer Range) to the rotary embedding, i.e. before the path reaches a table lookup
   (position as Gather indices), a Cos/Sin, or a comparison.

`python -m benchmarks.trtcheck DIR_OR_FILES [--dim NAME=MIN,OPT,MAX ...]` prints a table per graph and exits 1 when
a graph has a problem (2 on unreadable input).  A developer tool: the runtime (engine/ortengine.py) imports only
engine/trtprofile.py.  Needs the `onnx` package (imported lazily).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.trtprofile import (
    HALF_TYPES,
    Profile,
    ProfileOptions,
    derive_profile,
    onnx_module,
    read_graph,
    type_name,
)

TABLE_PATH = Path(__file__).with_name("data") / "onnx-tensorrt-operators.md"
DEFAULT_DOMAINS = ("", "ai.onnx")
# the table's type names -> ONNX TensorProto type names; "INF64" is a typo in the table (ConstantOfShape's row)
TABLE_TYPES = {"FP32": ("FLOAT",), "FP16": ("FLOAT16",), "BF16": ("BFLOAT16",), "INT32": ("INT32",),
               "INT64": ("INT64",), "INF64": ("INT64",), "BOOL": ("BOOL",), "UINT8": ("UINT8",), "INT8": ("INT8",),
               "INT4": ("INT4",), "DOUBLE": ("DOUBLE",),
               "FP8": ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")}
# ops whose data tensors are not (only) those of the schema's first input's type variable
DATA_TYPE_VARS = {"Where": ("T",), "Cast": ("T1", "T2"), "CastLike": ("T1", "T2"), "ConstantOfShape": ("T2",),
                  "EyeLike": ("T1", "T2"), "OneHot": ("T3",), "QuantizeLinear": ("T1",),
                  "DequantizeLinear": ("T1",), "Constant": ("T",)}
CONST_INPUT_RULE = re.compile(r"`(\w+)`(?: input)? must be (?:an initializer|a build-time constant|a constant tensor)")
ATTR_VALUE_RULE = re.compile(r"`(\w+)`(?: attribute)? must be (\d+)\b")
UNSUPPORTED_ATTR_RULE = re.compile(r"`(\w+)`(?: attribute)? is not supported")
FIRST_OUTPUT_RULE = re.compile(r"Only the first output `\w+` is supported")
OUTPUT_RULE = re.compile(r"`(\w+)` output tensor unsupported")
LESS_THAN_RULE = re.compile(r"`(\w+)` input must be less than (\d+)")
OPSET_RANGE = re.compile(r"inclusive range of opset (\d+) to opset (\d+)")

POSITION_NAME = re.compile(r"(^|_)pos(ition)?s?(_|$)|position", re.I)   # pos, positions, position_ids, ...
INTEGER_TYPES = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
# where a position's value stops being a position: table lookups (indices), bounded functions, comparisons, shapes
POSITION_SINKS = {"Gather": (1,), "GatherElements": (1,), "GatherND": (1,), "Cos": (0,), "Sin": (0,),
                  "Equal": (0, 1), "Less": (0, 1), "LessOrEqual": (0, 1), "Greater": (0, 1),
                  "GreaterOrEqual": (0, 1), "Shape": (0,), "Size": (0,)}

@dataclass(frozen=True)
class OpSupport:
    op: str
    supported: bool
    types: tuple[str, ...]          # ONNX TensorProto type names
    restrictions: str


@dataclass(frozen=True)
class SupportTable:
    ops: dict
    opset_min: int
    opset_max: int
    source: str                     # the vendored file's header line naming repo @ commit : path


def load_table(path: Path = TABLE_PATH) -> SupportTable:
    """Parse the vendored onnx-tensorrt operator table (markdown) into a SupportTable."""
    text = path.read_text(encoding="utf-8")
    src = re.search(r"onnx/onnx-tensorrt @ (\w+)( \([^)]*\))? : ([\w./-]+)", text)
    source = f"onnx/onnx-tensorrt @ {src.group(1)[:12]}{src.group(2) or ''} : {src.group(3)}" if src else str(path)
    m = OPSET_RANGE.search(text)
    if not m:
        raise ValueError(f"{path}: no opset range sentence")
    ops = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or cells[1] not in ("Y", "N"):
            continue                                            # header, separator, prose
        types: list[str] = []
        for name in (t.strip() for t in (cells[2] if len(cells) > 2 else "").split(",")):
            if name:
                if name not in TABLE_TYPES:
                    raise ValueError(f"{path}: unknown type {name!r} in the row of {cells[0]}")
                types.extend(TABLE_TYPES[name])
        ops[cells[0]] = OpSupport(cells[0], cells[1] == "Y", tuple(dict.fromkeys(types)),
                                  cells[3] if len(cells) > 3 else "")
    if not ops:
        raise ValueError(f"{path}: no operator rows")
    return SupportTable(ops, int(m.group(1)), int(m.group(2)), source)


@dataclass
class GraphReport(Profile):
    """The check of one graph: its profile (trtprofile.Profile) plus its operators and what to check by hand."""
    path: Path
    opset: int | None = None
    ops: Counter = field(default_factory=Counter)
    types: dict = field(default_factory=dict)           # op -> set of data type names seen
    notes: list = field(default_factory=list)           # restrictions to check by hand, unknown types

    @property
    def ok(self) -> bool:
        return not self.problems


def _formal(onnx, params, i: int):
    """The formal parameter of actual position i (a variadic last formal covers the rest)."""
    if i < len(params):
        return params[i]
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    return params[-1] if params and params[-1].option == variadic else None


def _constants(graphs) -> dict:
    """name -> TensorProto of every initializer and Constant node output (value attribute) in the graphs."""
    out = {}
    for g in graphs:
        out.update({t.name: t for t in g.initializer})
        for n in g.node:
            for a in n.attribute if n.op_type == "Constant" else ():
                if a.name == "value":
                    out[n.output[0]] = a.t
    return out


def _check_node(onnx, node, opset, table: SupportTable, dtypes: dict, consts: dict, report: GraphReport) -> None:
    op = node.op_type
    where = f"{op} node {node.name or node.output[0]!r}"
    if node.domain not in DEFAULT_DOMAINS:
        report.problems.append(f"{where}: custom domain {node.domain!r} (TensorRT would need a plugin)")
        return
    row = table.ops.get(op)
    if row is None:
        report.problems.append(f"{where}: not in TensorRT's ONNX parser support table")
        return
    if not row.supported:
        report.problems.append(f"{where}: TensorRT's ONNX parser does not support {op} (table: N)")
        return
    try:
        schema = onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        report.problems.append(f"{where}: no ONNX schema at opset {opset}")
        return
    data_vars = DATA_TYPE_VARS.get(op) or ((schema.inputs[0].type_str,) if schema.inputs else ())
    seen = report.types.setdefault(op, set())
    for tensors, params in ((node.input, schema.inputs), (node.output, schema.outputs)):
        for i, name in enumerate(tensors):
            formal = _formal(onnx, params, i)
            if not name or formal is None or formal.type_str not in data_vars:
                continue
            t = dtypes.get(name)
            if t is None:
                report.notes.append(f"{where}: dtype of {name!r} unknown after shape inference (not checked)")
                continue
            seen.add(t)
            if t not in row.types:
                report.problems.append(f"{where}: {t} {name!r} — TensorRT supports {op} for "
                                       f"{', '.join(row.types)} only")
    _check_restrictions(onnx, node, schema, row, consts, where, report)


def _check_restrictions(onnx, node, schema, row: OpSupport, consts: dict, where: str, report: GraphReport) -> None:
    """The Restrictions cell's graph-checkable sentences; the others become a note (once per op)."""
    inputs = {p.name: i for i, p in enumerate(schema.inputs)}
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    unchecked = []
    for sentence in filter(None, (s.strip(" .") for s in re.split(r"<br\s*/?>|\.\s", row.restrictions))):
        checked = False
        for m in CONST_INPUT_RULE.finditer(sentence):
            checked = True                               # an attribute at this opset is constant by nature
            i = inputs.get(m.group(1))
            if i is not None and i < len(node.input) and node.input[i] and node.input[i] not in consts:
                report.problems.append(f"{where}: input {m.group(1)} ({node.input[i]!r}) must be an initializer "
                                       "or constant for TensorRT")
        for m in ATTR_VALUE_RULE.finditer(sentence):
            name, want = m.group(1), int(m.group(2))
            if name in inputs:
                continue                                 # a value of an input tensor: not read here
            checked = True
            if name in attrs and attrs[name] != want:
                report.problems.append(f"{where}: attribute {name}={attrs[name]}, TensorRT requires {want}")
        for m in UNSUPPORTED_ATTR_RULE.finditer(sentence):
            if m.group(1) in inputs:
                continue
            checked = True
            if attrs.get(m.group(1), "none") not in ("none", b"none", 0):
                report.problems.append(f"{where}: attribute {m.group(1)}={attrs[m.group(1)]!r} is not supported by "
                                       "TensorRT")
        if FIRST_OUTPUT_RULE.search(sentence):
            checked = True
            if any(node.output[1:]):
                report.problems.append(f"{where}: only its first output is supported by TensorRT, the node has "
                                       f"{sum(map(bool, node.output))}")
        for m in OUTPUT_RULE.finditer(sentence):
            outputs = [p.name for p in schema.outputs]
            if m.group(1) in outputs:
                checked = True
                i = outputs.index(m.group(1))
                if i < len(node.output) and node.output[i]:
                    report.problems.append(f"{where}: output {m.group(1)} is not supported by TensorRT")
        for m in LESS_THAN_RULE.finditer(sentence):
            i = inputs.get(m.group(1))
            if i is None or i >= len(node.input):
                continue
            checked = True
            t = consts.get(node.input[i])
            value = None if t is None else int(onnx.numpy_helper.to_array(t).max())
            if value is None or value >= int(m.group(2)):
                report.problems.append(f"{where}: input {m.group(1)} = {value if t is not None else 'not constant'}"
                                       f", TensorRT requires a constant < {m.group(2)}")
        if not checked:
            unchecked.append(sentence)
    note = f"{node.op_type} (check by hand): {'; '.join(unchecked)}"
    if unchecked and note not in report.notes:
        report.notes.append(note)


def _positions(onnx, graph, dtypes: dict, report: GraphReport) -> None:
    """The integer-position rule on the main graph (see the module docstring)."""
    sources = []
    for inp in graph.input:
        if POSITION_NAME.search(inp.name):
            t = dtypes.get(inp.name)
            if t not in INTEGER_TYPES:
                report.problems.append(f"position input {inp.name!r} is {t}: positions must stay integer "
                                       "(fp16 breaks positions > 2048, bf16 > 256)")
            else:
                sources.append(inp.name)
    sources += [n.output[0] for n in graph.node if n.op_type == "Range" and dtypes.get(n.output[0]) in INTEGER_TYPES]
    consumers: dict = {}
    for n in graph.node:
        for i, name in enumerate(n.input):
            consumers.setdefault(name, []).append((n, i))
    seen, todo = set(sources), list(sources)
    while todo:
        name = todo.pop()
        for n, i in consumers.get(name, ()):
            if i in POSITION_SINKS.get(n.op_type, ()):
                continue
            if n.op_type == "Cast":
                to = type_name(onnx, next(a.i for a in n.attribute if a.name == "to"))
                if to in HALF_TYPES:
                    report.problems.append(f"Cast node {n.name or n.output[0]!r}: an integer position ({name!r}) "
                                           f"cast to {to} on its way to the rotary embedding")
                    continue
                if to not in INTEGER_TYPES:
                    report.notes.append(f"Cast node {n.name or n.output[0]!r}: position {name!r} becomes {to} "
                                        "arithmetic: TensorRT with fp16 enabled on a weakly typed build may run it "
                                        "in fp16 (build --stronglyTyped, or index fp32 rope tables instead)")
            for out in n.output:
                if out and out not in seen:
                    seen.add(out)
                    todo.append(out)


def check_model(path, opts: ProfileOptions = ProfileOptions(), table: SupportTable | None = None) -> GraphReport:
    """Check one .onnx file (external data is not loaded: only names, types and shapes are read)."""
    table = table or load_table()
    onnx, model, graphs, dtypes = read_graph(path)
    report = GraphReport(path=Path(path))
    opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)
    report.opset = opset
    if opset is None or not table.opset_min <= opset <= table.opset_max:
        report.problems.append(f"default-domain opset {opset}: TensorRT's parser takes opset "
                               f"{table.opset_min}..{table.opset_max}")
        opset = table.opset_max if opset is None else min(max(opset, table.opset_min), table.opset_max)
    consts = _constants(graphs)
    report.half = any(t in HALF_TYPES for t in dtypes.values())
    for g in graphs:
        for node in g.node:
            report.ops[node.op_type] += 1
            _check_node(onnx, node, opset, table, dtypes, consts, report)
    derive_profile(model.graph, {t.name for t in model.graph.initializer}, opts, report)
    _positions(onnx, model.graph, dtypes, report)
    return report


def trtexec_command(report: GraphReport, engine: Path) -> list[str]:
    """The trtexec engine build of one checked graph: one holding half tensors is built strongly typed (the
    graph's own dtypes decide: its fp32 norms and rope stay fp32), an all-fp32 one as fp32."""
    cmd = ["trtexec", f"--onnx={report.path}", f"--saveEngine={engine}"] + (["--stronglyTyped"] if report.half else [])
    if report.shapes:
        cmd += [f"--{w}Shapes={report.shape_arg(w)}" for w in ("min", "opt", "max")]
    return cmd + [f"--timingCacheFile={Path(engine).with_suffix('.timing')}", "--skipInference"]


def onnx_files(args) -> list[Path]:
    """The .onnx files named, or found (recursively) in the folders named; a missing path raises FileNotFoundError."""
    files = []
    for a in map(Path, args):
        if a.is_dir():
            files += sorted(a.rglob("*.onnx"))
        elif a.is_file():
            files.append(a)
        else:
            raise FileNotFoundError(f"{a}: no such file or folder")
    return files


def format_report(r: GraphReport, table: SupportTable) -> str:
    lines = [f"== {r.path}  (opset {r.opset}; {sum(r.ops.values())} nodes; {'OK' if r.ok else 'PROBLEMS'})",
             f"   {'op':<22} {'count':>5}  {'TensorRT':<9} dtypes seen"]
    for op, n in sorted(r.ops.items()):
        row = table.ops.get(op)
        sup = "-" if row is None else ("Y" if row.supported else "N")
        lines.append(f"   {op:<22} {n:>5}  {sup:<9} {', '.join(sorted(r.types.get(op, ()))) or '-'}")
    if r.symbols:
        lines.append("   dims: " + ", ".join(f"{s} ({role}) {'/'.join(map(str, rng))}"
                                             for s, (role, rng) in r.symbols.items()))
    if r.shapes:
        lines.append("   build: " + " ".join(trtexec_command(r, r.path.with_suffix(".plan"))))
    lines += [f"   note: {n}" for n in r.notes]
    lines += [f"   PROBLEM: {p}" for p in r.problems]
    return "\n".join(lines)


def _dim_arg(text: str):
    name, _, rng = text.partition("=")
    try:
        lo, opt, hi = (int(v) for v in rng.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dim {text!r}: expected NAME=MIN,OPT,MAX") from None
    return name, (lo, opt, hi)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.trtcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help=".onnx files or folders holding them")
    p.add_argument("--dim", type=_dim_arg, action="append", default=[], metavar="NAME=MIN,OPT,MAX",
                   help="profile range of one dim symbol (overrides its role's)")
    a = p.parse_args(argv)
    try:
        onnx_module()
        opts = ProfileOptions(overrides=tuple(a.dim))
        files = onnx_files(a.paths)
    except (ValueError, FileNotFoundError, ImportError) as e:
        print(f"trtcheck: {e}", file=sys.stderr)
        return 2
    if not files:
        print(f"trtcheck: no .onnx files in {' '.join(a.paths)}", file=sys.stderr)
        return 2
    table = load_table()
    print(f"TensorRT ONNX parser table: {table.source or TABLE_PATH}")
    bad = 0
    for f in files:
        try:
            r = check_model(f, opts, table)
        except Exception as e:                      # noqa: BLE001 — an unreadable file: one line, exit 2
            print(f"trtcheck: {f}: not a readable ONNX model ({type(e).__name__}: {e})", file=sys.stderr)
            return 2
        print(format_report(r, table))
        bad += not r.ok
    print(f"{len(files) - bad}/{len(files)} graphs pass the static TensorRT check")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
