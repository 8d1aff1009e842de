"""`stallscope-cli analyze TRACE [--json] [--device N] [--all]`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stallscope.core.advice import line_stats_near
from stallscope.core.analysis import analyze
from stallscope.core.document import plan
from stallscope.core.render.text import render
from stallscope.core.trace import find_traces, load, resolve


def register(sub) -> None:
    p = sub.add_parser("analyze", help="why the GPU waits: utilization, idle causes, advice",
                       description="Analyse a trace file, TensorBoard log dir or session folder.")
    p.add_argument("trace", help="trace .json/.json.gz, TensorBoard log dir or session folder")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--device", help="only this GPU device id")
    p.add_argument("--all", action="store_true",
                   help="in a folder, analyse every trace file (by default: each rank's newest, "
                        "or the newest trace)")
    p.set_defaults(func=run)


def run(args) -> int:
    paths = _targets(args.trace, args.all)
    reports = [analyze(load(p), args.device, line_stats_near(p)) for p in paths]
    if args.json:
        out = reports[0].to_json() if len(reports) == 1 else \
            {"traces": [r.to_json() for r in reports]}
        json.dump(out, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(render(r) for r in reports))
    return 0


def _targets(path: str, every: bool) -> list[Path]:
    """A file; a folder's ranks (newest trace of each) or its newest trace; --all: every trace."""
    if every and Path(path).is_dir():
        return find_traces(path) or [resolve(path)]
    return [f for _, f in plan(path)]
