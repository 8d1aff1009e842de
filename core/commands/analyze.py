"""`stallscope-cli analyze TRACE [--json] [--device N] [--all]`."""

from __future__ import annotations

import json
import sys

from ..analysis import analyze
from ..report_text import render
from ..trace import find_traces, load, resolve


def register(sub) -> None:
    p = sub.add_parser("analyze", help="why the GPU waits: utilization, idle causes, advice",
                       description="Analyse a trace file, TensorBoard log dir or session folder.")
    p.add_argument("trace", help="trace .json/.json.gz, TensorBoard log dir or session folder")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--device", help="only this GPU device id")
    p.add_argument("--all", action="store_true",
                   help="in a folder, analyse every trace (all ranks), not only the newest")
    p.set_defaults(func=run)


def run(args) -> int:
    paths = _targets(args.trace, args.all)
    reports = [analyze(load(p), args.device) for p in paths]
    if args.json:
        out = reports[0].to_json() if len(reports) == 1 else \
            {"traces": [r.to_json() for r in reports]}
        json.dump(out, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(render(r) for r in reports))
    return 0


def _targets(path: str, every: bool):
    from pathlib import Path

    if Path(path).is_dir():
        traces = find_traces(path)
        if every and traces:
            return traces
        if len(traces) > 1:
            print(f"stallscope: {len(traces)} traces in {path}; analysing the newest, "
                  f"{traces[0].name} (--all for every one)", file=sys.stderr)
    return [resolve(path)]
