"""`stallscope-cli check PATH|-- script.py [conditions] [--junit FILE]`: a CI guard.

Exit 0 when every condition holds, 1 with one line per failed condition, 2 with one line for bad
input. PATH is a session folder (its whole-run record when it has one, else its trace), a trace
file or a folder holding traces. `check [conditions] -- train.py [args]` runs the script under
the runner (to its end) first and checks the session it wrote.

    --max-data-wait 10%    share of the steady steps' time waiting on the DataLoader, epoch
                           starts included (the pause before each epoch's first batch)
    --min-utilization 60%  the busiest GPU's utilization in the trace
    --max-step-ms 250      steady step time
    --baseline OTHER --max-slowdown 5%   steady step time against another run

The figures are the ones `analyze` states for the whole run (core/session/stalls.RunReport):
elapsed over the steps after the warm-up, divided by their count, and the data wait summed over
those steps, epoch starts included, over their elapsed time (the run header's figure too).
Without a whole-run record (a trace alone) they come from the profiled window: the mean of its
steps and their data-loading share. A run without steps (the runner saw none, or a trace holds
none) has no data wait or step time to check: that is bad input (exit 2, one line).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from stallscope.core.commands.run import add_host_options
from stallscope.core.errors import StallscopeError
from stallscope.core.units import pct
from stallscope.core.untrusted import visible


@dataclass
class Figures:
    """What the conditions are checked on, for one run."""

    source: str
    data_wait: float | None = None       # share of the steady steps' (or profiled steps') time
    utilization: float | None = None     # busiest GPU, None without one
    step_ms: float | None = None
    step_what: str = "steady step"       # or "mean profiled step": a trace without a record
    wait_what: str = "incl. epoch starts"  # or "of the profiled steps"
    no_steps: str = ""                   # why there are no steps to measure ("" when there are)


@dataclass
class Outcome:
    name: str
    ok: bool
    line: str


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check", help="CI guard: exit 1 when a run's data wait, utilization or step time "
                      "crosses a threshold",
        usage="stallscope-cli check (PATH | -- script.py [args]) [--max-data-wait 10%%] "
              "[--min-utilization 60%%] [--max-step-ms X] [--baseline OTHER --max-slowdown 5%%] "
              "[--junit FILE]",
        description="Check a session, trace or script against thresholds. Exit 0: all hold; "
                    "1: one line per failed condition; 2: bad input.")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="session folder, trace file or folder of traces")
    p.add_argument("--max-data-wait", metavar="PCT",
                   help="most share of the steady steps' wall time waiting on the "
                        "DataLoader, epoch starts included (the pause before each epoch's "
                        "first batch; the warm-up apart), as analyze and the run header state "
                        "it; a trace alone: its profiled steps' share (e.g. 10%%)")
    p.add_argument("--min-utilization", metavar="PCT",
                   help="least utilization of the busiest GPU (e.g. 60%%)")
    p.add_argument("--max-step-ms", metavar="MS", help="most steady step time")
    p.add_argument("--baseline", metavar="OTHER", help="a run to compare the steady step with")
    p.add_argument("--max-slowdown", metavar="PCT",
                   help="with --baseline: most slow-down of the steady step (e.g. 5%%)")
    p.add_argument("--junit", metavar="FILE", help="also write the outcome as JUnit XML")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="with -- script.py: the interpreter that runs it (default: this one)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="with -- script.py: a DataLoader override for the run (repeatable)")
    add_host_options(p)
    p.add_argument("script_args", nargs="*", metavar="-- script.py [args]",
                   help="a training script (a .py file) to run under the runner first, to its "
                        "end; its arguments after it")
    p.set_defaults(func=run)


def share(option: str, text: str | None) -> float | None:
    """'10%' or '10' -> 0.10."""
    if text is None:
        return None
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        raise StallscopeError(f"{option} {text}: expected a percentage like 10%") from None
    if not 0 <= value <= 10:
        raise StallscopeError(f"{option} {text}: out of range")
    return value


def positive(option: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise StallscopeError(f"{option} {text}: expected milliseconds like 250") from None
    if not value > 0:
        raise StallscopeError(f"{option} {text}: must be > 0")
    return value


def run(args: argparse.Namespace) -> int:
    args.max_data_wait = share("--max-data-wait", args.max_data_wait)
    args.min_utilization = share("--min-utilization", args.min_utilization)
    args.max_slowdown = share("--max-slowdown", args.max_slowdown)
    args.max_step_ms = positive("--max-step-ms", args.max_step_ms)
    if args.max_slowdown is not None and not args.baseline:
        raise StallscopeError("--max-slowdown needs --baseline OTHER")
    if not any(v is not None for v in (args.max_data_wait, args.min_utilization,
                                       args.max_step_ms, args.max_slowdown)):
        raise StallscopeError("nothing to check: give --max-data-wait, --min-utilization, "
                              "--max-step-ms or --baseline with --max-slowdown")
    if not args.path:
        raise StallscopeError("nothing to check: give a PATH or -- script.py")
    if args.path.endswith(".py"):
        path = run_script(args, [args.path, *args.script_args])
    elif args.script_args:
        raise StallscopeError(f"check takes one PATH (or -- script.py [args]), not "
                              f"{len(args.script_args) + 1}")
    else:
        path = Path(args.path)
    figures = measure(path)
    base = measure(Path(args.baseline)) if args.baseline else None
    outcomes = conditions(args, figures, base)
    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        print(f"FAIL {o.line}")
    if not failed:
        print(f"ok: {len(outcomes)} condition{'s hold' if len(outcomes) != 1 else ' holds'} for "
              f"{figures.source} (" + "; ".join(o.line for o in outcomes) + ")")
    if args.junit:
        write_junit(Path(args.junit), figures.source, outcomes)
    return 1 if failed else 0


def run_script(args: argparse.Namespace, command: list[str]) -> Path:
    """The script under the runner (core/launch: here, or on --host), to its end, into a new
    session; returns the (local) session. Its output goes to stderr: stdout stays the check's
    own lines."""
    from stallscope.core.capture import options as runner_options
    from stallscope.core.commands.run import check_sets, follow, terminal_output, where_of
    from stallscope.core.launch import Job, start

    args.cwd = None
    where = where_of(args)
    script = command[0]
    if not where.remote:
        script = str(Path(script).expanduser().resolve())
        if not Path(script).exists():
            raise StallscopeError(f"script not found: {script}")
    check_sets(args.sets)
    session = runner_options.default_session_dir(Path(script).name)
    job = Job(script=script, args=command[1:], session=session,
              options={"stop_after_window": False, "sets": args.sets})
    write = terminal_output(where.remote)
    ending = follow(start(where, job, on_output=lambda data, _: write(data, True)))
    if ending.rc != 0:
        raise StallscopeError(f"{Path(script).name} ended with code {ending.exit_status} under "
                              f"the runner ({ending.reason}); session {session}")
    return session


def measure(path: Path) -> Figures:
    """The figures of a session (whole-run record, else its trace) or a trace."""
    if not path.exists():
        raise StallscopeError(f"{path}: no such file or folder")
    from stallscope.core.session.reader import is_session, open_session
    from stallscope.core.session.record import load_record
    from stallscope.core.session.stalls import analyze_run

    figures = Figures(str(path))
    trace = path
    if path.is_dir() and is_session(path):
        session = open_session(path)
        rec = load_record(session)
        run = analyze_run(rec) if rec is not None and rec.n_steps > 1 else None
        if run is not None and run.steady_steps > 0:
            figures.data_wait = run.data_wait_share
            figures.step_ms = run.step_ms
        if (rec is None or not rec.n_steps) and not len(session.steps()):
            # a trace of a run without steps holds the profiler's own span (ProfilerStep#0)
            figures.no_steps = f"{path}: the runner saw no steps in this run"
        traces = session.traces()
        if not traces:
            if figures.step_ms is None:
                raise StallscopeError(session.no_trace_reason())
            return figures
        trace = traces[-1]
    elif path.is_dir():
        from stallscope.core.document import plan_path

        trace = plan_path(path).picks[0][1]
    report_figures(trace, figures)
    return figures


def report_figures(trace: Path, figures: Figures) -> None:
    from stallscope.core.document import analyze_path

    report = analyze_path(trace)
    if report.devices:
        figures.utilization = max(s.utilization for s in report.devices.values())
    steps = report.steps
    if not steps and not figures.no_steps:
        figures.no_steps = f"{trace}: its trace holds no steps"
    if figures.no_steps:
        return
    if figures.data_wait is None:
        figures.wait_what = "of the profiled steps"
        total = sum(s.dur_us for s in steps)
        figures.data_wait = (sum(s.data_loading_us for s in steps) / total if total > 0 else
                             report.host_by_cause.get("data_loading", 0.0) /
                             max(report.window_us, 1e-9))
    if figures.step_ms is None and steps:
        figures.step_ms = sum(s.dur_us for s in steps) / len(steps) / 1e3
        figures.step_what = "mean profiled step"


def conditions(args: argparse.Namespace, f: Figures, base: Figures | None) -> list[Outcome]:
    out = []
    if args.max_data_wait is not None:
        # measure() fills data_wait from the whole-run record or the trace's steps
        if f.data_wait is None:
            raise StallscopeError(f"{f.no_steps or f.source + ': no steps'}, so its data "
                                  "wait cannot be checked")
        out.append(Outcome("max-data-wait", f.data_wait <= args.max_data_wait,
                           f"data wait {pct(f.data_wait)} {f.wait_what} "
                           f"{'<=' if f.data_wait <= args.max_data_wait else '>'} "
                           f"{pct(args.max_data_wait)} (--max-data-wait)"))
    if args.min_utilization is not None:
        if f.utilization is None:
            raise StallscopeError(f"{f.source}: no GPU activity in its trace, so "
                                  "--min-utilization cannot be checked")
        ok = f.utilization >= args.min_utilization
        out.append(Outcome("min-utilization", ok,
                           f"GPU utilization {pct(f.utilization)} {'>=' if ok else '<'} "
                           f"{pct(args.min_utilization)} (--min-utilization)"))
    if args.max_step_ms is not None:
        step = _step(f)
        ok = step <= args.max_step_ms
        out.append(Outcome("max-step-ms", ok, f"{f.step_what} {step:,.2f} ms "
                           f"{'<=' if ok else '>'} {args.max_step_ms:g} ms (--max-step-ms)"))
    if base is not None:
        mine, theirs = _step(f), _step(base)
        change = mine / theirs - 1 if theirs > 0 else 0.0
        limit = args.max_slowdown if args.max_slowdown is not None else 0.0
        ok = change <= limit
        out.append(Outcome("max-slowdown", ok,
                           f"{f.step_what} {mine:,.2f} ms vs {base.step_what} {theirs:,.2f} ms "
                           f"in {base.source}: "
                           f"{'+' if change >= 0 else ''}{pct(change)} "
                           f"{'<=' if ok else '>'} {pct(limit)} (--max-slowdown)"))
    return out


def _step(f: Figures) -> float:
    if f.step_ms is None or f.step_ms != f.step_ms:
        raise StallscopeError(f"{f.no_steps or f.source + ': no steps'}, so its step time "
                              "cannot be checked")
    return float(f.step_ms)


def xml_text(text: str) -> str:
    """Text XML 1.0 can hold: control characters shown as escapes (core/untrusted.visible),
    undecodable bytes of a file name (surrogates) and U+FFFE/U+FFFF as U+FFFD."""
    text = visible(text)
    try:
        raw = text.encode("utf-8", "surrogateescape")  # a file name's own bytes back
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    text = raw.decode("utf-8", "replace")
    return text.replace("\ufffe", "\ufffd").replace("\uffff", "\ufffd")


def write_junit(path: Path, source: str, outcomes: list[Outcome]) -> None:
    failures = sum(not o.ok for o in outcomes)
    cases = []
    source = xml_text(source)
    for o in outcomes:
        line, name = xml_text(o.line), xml_text(o.name)
        body = "" if o.ok else f"<failure message={quoteattr(line)}>{escape(line)}</failure>"
        cases.append(f'  <testcase classname="stallscope.check" name={quoteattr(name)}>'
                     f"{body}</testcase>")
    text = (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="stallscope check" '
            f'tests="{len(outcomes)}" failures="{failures}" errors="0">\n'
            f'  <properties><property name="path" value={quoteattr(source)}/></properties>\n'
            + "\n".join(cases) + "\n</testsuite>\n")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StallscopeError(f"{path}: cannot write the JUnit file "
                              f"({exc.strerror or exc})") from None
