"""`stallscope-cli run [options] -- script.py [args]`: capture a session headless.

The runner runs in a child process (by file path, in `--python` when given), so that a runner
killed by a signal still leaves a session ending with a `finished` record. Everything that can be
refused (a missing script, a bad `--set`) is refused before a session folder is created.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from stallscope.core.capture import options as runner_options
from stallscope.core.capture.overrides import OverrideError, parse_sets
from stallscope.core.errors import StallscopeError
from stallscope.core.session.reader import open_session, write_finished

RUNNER_PATH = Path(runner_options.__file__).resolve().with_name("runner.py")
RUN_OPTIONS = ("profile_memory", "record_shapes", "with_stack", "stop_after_window",
               "nproc_per_node", "lineprof", "lineprof_depth", "sets",
               *runner_options.WINDOW_OPTIONS)


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run a training script under torch.profiler into a session folder",
        usage="stallscope-cli run [options] -- script.py [args]",
        description="Run an unmodified training script under torch.profiler. Steps follow "
                    "optimizer.step() (or DataLoader batches); the trace, per-step events and "
                    "the script's output land in a session folder. --set changes DataLoader "
                    "settings without editing the script.",
    )
    runner_options.add_run_options(p)
    add_launch_options(p)
    p.add_argument("--analyze", action=argparse.BooleanOptionalAction, default=True,
                   help="print the analysis of the trace at the end (default on)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- script.py [args]")
    p.set_defaults(func=run)


def add_launch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="interpreter that runs the script; it needs torch, not stallscope "
                        "(default: this one)")
    p.add_argument("--cwd", metavar="DIR", help="the script's working directory (default: here)")


def script_and_cwd(args: argparse.Namespace, usage: str) -> tuple[Path, list[str], Path]:
    """(script, its arguments, working folder), checked: one line for what is wrong."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise StallscopeError(f"no script given: {usage}")
    cwd = Path(args.cwd).expanduser().resolve() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        raise StallscopeError(f"{cwd}: working directory does not exist")
    script = Path(command[0]).expanduser()
    script = script if script.is_absolute() else cwd / script
    if not script.exists():
        raise StallscopeError(f"script not found: {script}")
    if script.is_dir() and not (script / "__main__.py").exists():
        raise StallscopeError(f"{script} is a folder without __main__.py")
    return script, command[1:], cwd


def check_sets(sets: list[str]) -> None:
    try:
        parse_sets(sets)
    except OverrideError as exc:
        raise StallscopeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    script, script_args, cwd = script_and_cwd(
        args, "stallscope-cli run [options] -- script.py [args]")
    check_sets(args.sets)
    session = (Path(args.session).expanduser().resolve() if args.session
               else runner_options.default_session_dir(script.name))
    options = {k: getattr(args, k) for k in RUN_OPTIONS}
    schedule = {k: getattr(args, k) for k in runner_options.DEFAULT_SCHEDULE}
    argv = runner_options.build_argv(session, str(script), script_args, schedule, options)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.Popen([args.python, str(RUNNER_PATH), *argv], cwd=cwd, env=env)
    except OSError as exc:
        raise StallscopeError(
            f"cannot start the interpreter {args.python}: {exc.strerror or exc}") from None
    try:
        rc = proc.wait()
    except KeyboardInterrupt:  # the runner got the same SIGINT: let it write its trace
        rc = proc.wait()
    if rc < 0:
        _close_session(session, rc, f"killed by {signal.Signals(-rc).name}")
    elif session.is_dir():
        _close_session(session, rc, f"runner ended with code {rc} without a finished record")
    if session.is_dir():
        _report(session, args.analyze)
    return rc if rc >= 0 else 128 - rc


def _close_session(session: Path, rc: int | None, reason: str) -> None:
    try:
        write_finished(session, rc, reason)
    except OSError:
        pass  # an unwritable session folder: the runner already said so


def summary_line(s: dict) -> str:
    """One line for a finished session: how it ended, its steps and their steady figures (one
    statistic, core/session/steady.py: step time and data wait per step are means over the
    steady steps, the share is summed wait over elapsed time)."""
    exc = s.get("exception")
    how = (f"the script raised {exc.get('type')}: {exc.get('message')}" if exc
           else s.get("reason") or "no finished record")
    line = f"session {s['session']}: {how} (rc {s['rc']}), {s['steps']} steps"
    if "step_ms" in s:
        line += (f"; step {s['step_ms']:.1f} ms, data wait {s['data_wait_ms']:.1f} ms "
                 f"({100 * s['data_wait_share']:.0f}%), means over {s['steady_steps']} steady "
                 f"step{'s' if s['steady_steps'] != 1 else ''}")
        if "slowest_rank" in s:
            line += f" of the slowest rank ({s['slowest_rank']})"
        if not s.get("steady_reached"):
            line += " (too short to reach steady state)"
    return line


def _report(session: Path, analyze: bool) -> None:
    try:
        s = open_session(session).summary()
    except StallscopeError:
        return
    print(f"stallscope: {summary_line(s)}", file=sys.stderr)
    for trace in s["traces"]:
        print(f"stallscope: trace {trace}", file=sys.stderr)
    if not s["traces"]:
        return
    if analyze:
        _print_advice(Path(s["traces"][-1]))
    print(f"stallscope: open it with:  stallscope {session}    or:  stallscope-cli analyze "
          f"{session}", file=sys.stderr)


def _print_advice(trace_path: Path) -> None:
    try:
        from stallscope.core.document import analyze_path
    except ImportError:
        return
    try:
        report = analyze_path(trace_path)
    except StallscopeError as exc:
        print(f"stallscope: analysis failed: {exc}", file=sys.stderr)
        return
    for advice in report.advice:
        print(f"stallscope: [{advice.id}] {advice.title}", file=sys.stderr)
        if advice.fix:
            print(f"stallscope:     fix: {advice.fix}", file=sys.stderr)
