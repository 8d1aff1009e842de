"""`stallscope-cli export TRACE --perfetto OUT.json[.gz]`: the trace with stallscope's idle
causes, steps and advice as extra tracks, for Perfetto (ui.perfetto.dev) and chrome://tracing.
A session folder (or a trace in one) adds the whole run (record.bin) as counter tracks: step
time, data wait and memory from the first step to the last, and the profiled windows."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stallscope.core.commands.options import add_device_option


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export", help="write a trace with stallscope's idle causes, steps and advice as extra "
                       "tracks (Perfetto / chrome://tracing)",
        description="Copy a trace and add, in a process named stallscope: per GPU an "
                    "'idle: <cause>' slice for each idle interval, the steps, and the advice "
                    "cards as instant events; for a session's trace, the whole run "
                    "(record.bin) as counter tracks of step time, data wait and memory. "
                    "stallscope opens the result with the same figures.")
    p.add_argument("trace", help="trace .json/.json.gz or a session folder")
    p.add_argument("--perfetto", required=True, metavar="OUT.json",
                   help="the annotated trace to write (.json, or .json.gz to compress)")
    add_device_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from stallscope.core.document import analyze_path
    from stallscope.core.errors import StallscopeError
    from stallscope.core.render.perfetto import session_run_events, write_perfetto

    path = Path(args.trace)
    if path.is_dir():
        from stallscope.core.session.reader import is_session, open_session

        if not is_session(path):
            raise StallscopeError(f"{path}: a folder that is not a session; export one trace "
                                  "file")
        session = open_session(path)
        traces = session.traces()
        if not traces:
            raise StallscopeError(session.no_trace_reason())
        path = traces[-1]
    report = analyze_path(path, args.device)
    run, run_note = session_run_events(path, report)
    added = write_perfetto(report, args.perfetto, extra=run)
    idle = ", ".join(f"GPU {d} {s.idle_us / 1e3:,.2f} ms idle" for d, s in report.devices.items())
    print(f"wrote {args.perfetto}: {path.name} plus {added} stallscope events"
          + (f" ({idle})" if idle else " (no GPU: steps and advice only)"), file=sys.stderr)
    if run_note:
        print(run_note, file=sys.stderr)
    return 0

