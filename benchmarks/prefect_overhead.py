"""What the Prefect layer costs: the sample book, already rendered (the resume path: prepare finds every
segment done, synthesize adopts them, package rebuilds the outputs), rendered again directly and through the
`render-book` flow against a real Prefect server on loopback.

    python benchmarks/prefect_overhead.py                 # examples/daodejing.epub, random-tiny, 3 repeats
    python benchmarks/prefect_overhead.py --repeats 5 --json out.json

Two measurements, each with a same-run baseline:
- in-process, warm (engine loaded, Prefect imported): median wall time of flows.pipeline.render(opts) vs
  render_book_flow(...) — the flow/task machinery and the API calls (flow run, 3 task runs, artifacts, logs);
- the CLI as a process, cold: `chattts-render BOOK` without a server vs with PREFECT_API_URL set (then the CLI
  imports Prefect and runs the flow) — what a user waits for, model load included; stderr is checked empty
  without a server.
The server is `prefect server start` in a temp PREFECT_HOME (tests/flows/prefect_service.py)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "examples" / "daodejing.epub"
BUDGET_S = 3.0           # the Prefect layer may add at most this much per render


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cli(book: Path, out: Path, model: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "flows.cli", str(book), "--model", model, "--out", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"CLI failed ({p.returncode}): {p.stderr[-2000:]}")
    return wall, p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--book", type=Path, default=SAMPLE)
    ap.add_argument("--model", default="random-tiny")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import torch

    torch.set_num_threads(1)
    from flows import pipeline
    from flows.options import options_from_params
    from tests.flows.prefect_service import PrefectService

    tmp = Path(tempfile.mkdtemp(prefix="prefect-overhead-"))
    out = tmp / "out"
    opts = options_from_params(str(a.book), out=str(out), model=a.model)
    t0 = time.perf_counter()
    pipeline.render(opts)                                   # the first, full render (not measured)
    first_s = time.perf_counter() - t0
    svc = PrefectService(tmp / "prefect-home")
    result: dict = {"book": str(a.book), "model": a.model, "first_render_s": round(first_s, 2)}
    try:
        svc.start("server", "prefect server start --host 127.0.0.1 --port 4200")
        result["server_start_s"] = round(svc.wait_healthy(), 2)
        os.environ.update({k: v for k, v in svc.env.items() if k.startswith("PREFECT_")})
        os.environ["PREFECT_API_URL"] = svc.api_url
        from flows.render_book import render_book_flow

        params = dict(book=str(a.book), out=str(out), model=a.model)
        result["flow_first_call_s"] = round(_timed(lambda: render_book_flow(**params)), 2)  # client set-up
        direct, flow = [], []
        for _ in range(a.repeats):                          # interleaved: drift hits both sides alike
            direct.append(_timed(lambda: pipeline.render(opts)))
            flow.append(_timed(lambda: render_book_flow(**params)))
        result.update(direct_s=[round(x, 3) for x in direct], flow_s=[round(x, 3) for x in flow],
                      direct_median_s=round(statistics.median(direct), 3),
                      flow_median_s=round(statistics.median(flow), 3))
        result["in_process_overhead_s"] = round(result["flow_median_s"] - result["direct_median_s"], 3)

        base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        base.update(PREFECT_HOME=str(tmp / "no-server-home"), PYTHONPATH=str(ROOT))
        with_server = {**base, **{k: v for k, v in svc.env.items() if k.startswith("PREFECT_")},
                       "PREFECT_API_URL": svc.api_url, "PYTHONPATH": str(ROOT)}
        cli_direct, p = _cli(a.book, out, a.model, base)
        result["cli_no_server_stderr"] = p.stderr
        cli_flow, p2 = _cli(a.book, out, a.model, with_server)
        result["cli_with_server_stderr_lines"] = len(p2.stderr.splitlines())
        result.update(cli_no_server_s=round(cli_direct, 2), cli_with_server_s=round(cli_flow, 2),
                      cli_overhead_s=round(cli_flow - cli_direct, 2))
    finally:
        svc.stop()
    ok = result["in_process_overhead_s"] <= BUDGET_S and result["cli_no_server_stderr"] == ""
    result["within_budget"] = ok
    print(json.dumps(result, indent=1, ensure_ascii=False))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
