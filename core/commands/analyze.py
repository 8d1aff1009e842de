"""`stallscope-cli analyze TRACE|FOLDER [--json] [--device N] [--all] [--run N] [--workers N]
[--scheduler tcp://HOST:8786]`.

A file is analysed in full. A folder is planned first (core/folder.py: which traces, why, the
other runs, every skipped file with its reason); a job's ranks run as independent tasks on a
local process pool (or a Dask cluster with --scheduler) and print as a rank table with the
straggler; one picked trace prints its full report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stallscope.core.commands.options import add_device_option


def register(sub) -> None:
    p = sub.add_parser("analyze", help="why the GPU waits: utilization, idle causes, advice",
                       description="Analyse a trace file, a TensorBoard log dir, a session folder "
                                   "or a folder of a job's ranks.")
    p.add_argument("trace", help="trace .json/.json.gz, TensorBoard log dir, session folder or "
                                 "a folder of ranks' traces")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_device_option(p)
    p.add_argument("--all", action="store_true",
                   help="in a folder, analyse every trace file, each on its own (by default: "
                        "the newest run: a job's ranks, or the newest trace)")
    p.add_argument("--run", metavar="N|FOLDER",
                   help="in a folder holding several runs, the one to analyse: its number as "
                        "listed (1 = newest) or its folder")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local worker processes for a folder of ranks (default: by cores and "
                        "memory)")
    p.add_argument("--scheduler", metavar="tcp://HOST:8786",
                   help="run the per-rank tasks on this Dask cluster (pip install "
                        "'stallscope[cluster]'); the workers must see the traces at the same path")
    p.set_defaults(func=run)


def run(args) -> int:
    """Display what the path opens as (core/document.open_as: the app follows the same rule)."""
    from stallscope.core.document import RANKS, TRACES, open_as
    from stallscope.core.errors import StallscopeError

    if args.workers is not None and args.workers < 1:
        raise StallscopeError(f"--workers {args.workers}: needs at least 1")
    opening = open_as(args.trace, run=args.run, every=args.all)
    if opening.kind in (RANKS, TRACES):
        return _many(args, opening.plan)
    whole = None
    if opening.session is not None:
        try:
            whole = whole_run(opening.session)
        except StallscopeError as broken:
            if not opening.files:
                raise
            print(f"stallscope: the whole-run record is left out: {broken}", file=sys.stderr)
    if not opening.files:
        if whole is None:  # no trace, and no step recorded
            raise StallscopeError(opening.no_trace)
        return _run_only(args, whole)  # a session whose whole run is recorded, no trace
    return _single(args, opening.files[0][1], opening.plan, whole)


def whole_run(path: Path):
    """The whole-run analysis (core/session/stalls.RunReport) of a session folder that holds
    a run record; None for any other folder. A broken record raises StallscopeError."""
    from stallscope.core.session.reader import is_session, open_session
    from stallscope.core.session.record import load_record
    from stallscope.core.session.stalls import analyze_run

    if not is_session(path):
        return None
    rec = load_record(open_session(path))
    return analyze_run(rec) if rec is not None and rec.n_steps else None


def _run_only(args, whole) -> int:
    from stallscope.core.render.run_text import render_run

    if args.json:
        _dump({"run": whole.to_json()})
    else:
        sys.stdout.write(render_run(whole))
    return 0


def _single(args, path: Path, plan, whole=None) -> int:
    from stallscope.core.document import analyze_path
    from stallscope.core.render.text import render

    report = analyze_path(path, args.device)
    if args.json:
        out = report.to_json()
        if plan is not None:
            out["folder"] = plan.to_json()
        if whole is not None:
            out["run"] = whole.to_json()
        _dump(out)
    else:
        if plan is not None:
            sys.stdout.write("\n".join(plan.lines()) + "\n\n")
        sys.stdout.write(render(report))
        if whole is not None:
            from stallscope.core.render.run_text import render_run

            sys.stdout.write("\n" + render_run(whole))
    return 0


def _many(args, plan) -> int:
    from stallscope.core.jobs import run_job
    from stallscope.core.ranks.job import analyze_ranks_job

    job = analyze_ranks_job(plan.picks, workers=args.workers, scheduler=args.scheduler,
                            plan=plan, compare=not plan.every, device=args.device)
    result = run_job(job, _progress(len(plan.picks)))
    if args.json:
        _dump(result.to_json())
    elif plan.every:
        _print_each(result)
    else:
        from stallscope.core.ranks.text import render_job

        sys.stdout.write(render_job(result))
    return 0


def _print_each(result) -> None:
    """--all: each trace's summary lines, then what was skipped."""
    from stallscope.core.ranks.text import HEADERS, rank_rows

    lines = list(result.plan.lines()) + [""]
    for f in result.failures:
        lines.append(f"skipped {f.path} (could not be analysed: {f.message})")
    rows = [("trace", *HEADERS[1:4], HEADERS[-1])] + [r[:4] + r[-1:] for r in rank_rows(result)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1],
                                                                     strict=True)]
        lines.append("  " + "  ".join(cells) + "  " + r[-1])
    lines += ["", "Each in full: stallscope-cli analyze FILE"]
    sys.stdout.write("\n".join(lines) + "\n")


def _progress(total: int):
    """A progress line on stderr while ranks finish (only on a terminal)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, of: int) -> None:
        sys.stderr.write(f"\ranalysed {done}/{of} traces")
        if done == of:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _dump(out: dict) -> None:
    json.dump(out, sys.stdout, indent=1, allow_nan=False)
    sys.stdout.write("\n")
