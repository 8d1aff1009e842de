"""`stallscope-cli run [options] -- script.py [args]`: capture a session headless.

The runner runs in a child process started by core/launch (by file path, in `--python` when
given; on `--host` over ssh), so that a runner killed by a signal still leaves a session ending
with a `finished` record. Everything that can be refused (a missing script, a bad `--set`) is
refused before a session folder is created.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from stallscope.core.capture import options as runner_options
from stallscope.core.capture.overrides import OverrideError, parse_sets
from stallscope.core.capture.tee import front_terminal
from stallscope.core.commands.signals import Terminated
from stallscope.core.commands.terminal import escape
from stallscope.core.errors import StallscopeError
from stallscope.core.launch import INTERRUPTED, Ending, Job, RunHandle, Where, start
from stallscope.core.launch.handle import Output
from stallscope.core.session.events import StepEvent, TraceReady
from stallscope.core.session.reader import open_session
from stallscope.core.session.steady import LINEPROF_NOTE, short_text
from stallscope.core.units import duration

POLL_S = 0.1
RUN_OPTIONS = ("profile_memory", "record_shapes", "with_stack", "stop_after_window",
               "nproc_per_node", "lineprof", "lineprof_depth", "sets",
               *runner_options.WINDOW_OPTIONS)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run", help="run a training script under torch.profiler into a session folder",
        usage="stallscope-cli run [options] [--host HOST] -- script.py [args]",
        description="Run an unmodified training script under torch.profiler, here or on a host "
                    "over SSH (--host). Steps follow optimizer.step() (or DataLoader batches); "
                    "the trace, per-step events and the script's output land in a session "
                    "folder. --set changes DataLoader settings without editing the script.",
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
    add_host_options(p)


def add_host_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("on a remote host (over your own ssh)")
    g.add_argument("--host", metavar="HOST",
                   help="run the script on HOST over ssh (an alias of ~/.ssh/config works); "
                        "the script path, its data and its folder are the host's")
    g.add_argument("--remote-python", metavar="PY",
                   help="with --host: the host's interpreter (it needs torch; default python3)")
    g.add_argument("--remote-cwd", metavar="DIR",
                   help="with --host: the script's folder there (default: the remote home)")
    g.add_argument("--ssh-option", dest="ssh_options", action="append", default=[],
                   metavar="OPT", help="with --host: one more argument for ssh (repeatable), "
                   "e.g. --ssh-option=-F --ssh-option=PATH")
    g.add_argument("--remote-cache", metavar="DIR",
                   help="with --host: where the runner and the sessions go there "
                        "(default ~/.cache/stallscope)")


def where_of(args: argparse.Namespace) -> Where:
    """Where the script runs, from the launch options."""
    if getattr(args, "host", None):
        config = os.environ.get("STALLSCOPE_SSH_CONFIG")
        options = (("-F", config) if config else ()) + tuple(args.ssh_options)
        return Where(host=args.host, python=args.remote_python, cwd=args.remote_cwd,
                     ssh_options=options, cache=args.remote_cache)
    for flag in ("remote_python", "remote_cwd", "remote_cache"):
        if getattr(args, flag, None):
            raise StallscopeError(f"--{flag.replace('_', '-')} needs --host")
    return Where(python=args.python, cwd=str(Path(args.cwd).expanduser().resolve())
                 if args.cwd else None)


def script_and_cwd(args: argparse.Namespace, usage: str) -> tuple[Path, list[str], Path]:
    """(script, its arguments, working folder), checked: one line for what is wrong."""
    command = script_command(args, usage)
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


def script_command(args: argparse.Namespace, usage: str) -> list[str]:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise StallscopeError(f"no script given: {usage}")
    return command


def check_sets(sets: list[str]) -> None:
    try:
        parse_sets(sets)
    except OverrideError as exc:
        raise StallscopeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    usage = "stallscope-cli run [options] -- script.py [args]"
    where = where_of(args)
    if where.remote:  # the script, its folder and its data are the host's: checked there
        command = script_command(args, usage)
        script, script_args = command[0], command[1:]
    else:
        path, script_args, _ = script_and_cwd(args, usage)
        script = str(path)
    check_sets(args.sets)
    session = (Path(args.session).expanduser().resolve() if args.session
               else runner_options.default_session_dir(Path(script).name))
    options = {k: getattr(args, k) for k in RUN_OPTIONS}
    if not where.remote:  # a script in this terminal sees one (isatty), as in a plain run
        options["terminal"] = front_terminal()
    job = Job(script=script, args=script_args, session=session, options=options,
              schedule={k: getattr(args, k) for k in runner_options.DEFAULT_SCHEDULE})
    progress = Progress(where.label)
    handle = start(where, job, on_output=terminal_output(where.remote, progress))
    if where.remote:
        say(f"running on {where.host}: {handle.remote_session}; local copy {session}")
    ending = follow(handle, progress)
    if ending.lost:
        say(handle.lost_line())  # the attach line with this mirror's folder
    elif session.is_dir():
        _report(session, args.analyze)
    return ending.exit_status


def terminal_output(remote: bool, progress: Progress | None = None) -> Output:
    """Where the script's output goes: stdout/stderr as written; a remote host's escaped
    (its bytes are untrusted: no control sequence reaches the terminal)."""
    def write(data: bytes, is_err: bool) -> None:
        if progress is not None:
            progress.clear()
        if data:
            OPEN_LINE[0] = not data.endswith(b"\n")
        stream = sys.stderr if is_err else sys.stdout
        if remote:
            stream.write(escape(data.decode("utf-8", errors="replace")))
            stream.flush()
            return
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            stream.write(data.decode("utf-8", errors="replace"))
        else:
            buffer.write(data)
            buffer.flush()
    return write


class Progress:
    """The live progress line on a terminal's stderr (steps, the last step's time, traces
    fetched), redrawn at most every EVERY_S; cleared before the script's output is written."""

    EVERY_S = 0.5

    def __init__(self, where: str) -> None:
        self.where = where
        self.on = sys.stderr.isatty()
        self.steps = self.traces = 0
        self.step_ms = float("nan")
        self.shown = 0
        self.at = 0.0
        self.text = ""

    def take(self, events: list) -> None:
        for e in events:
            if isinstance(e, StepEvent) and e.rank in (0, None):
                self.steps, self.step_ms = e.n + 1, e.wall_ms
            elif isinstance(e, TraceReady):
                self.traces += 1
        now = time.monotonic()
        if not (self.on and self.steps) or now - self.at < self.EVERY_S:
            return
        text = (f"stallscope: {self.where}: step {self.steps} · {self.step_ms:.0f} ms · "
                f"{self.traces} trace{'s' if self.traces != 1 else ''}")
        if text != self.text:
            self.at, self.text = now, text
            self.clear()
            new_line()
            sys.stderr.write("\r" + text)  # (terminal.py passes a carriage return first only)
            sys.stderr.flush()
            self.shown = len(text)

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * self.shown)
            sys.stderr.write("\r")
            sys.stderr.flush()
            self.shown = 0


def follow(handle: RunHandle, progress: Progress | None = None) -> Ending:
    """Follow the run to its end, passing a Ctrl-C on: the first asks the runner to end the
    script (it writes its trace), the second stops it (the one stop rule). A SIGTERM or SIGHUP
    to stallscope (commands/signals.py) stops it at once; a run on a host goes on there after a
    SIGHUP (the terminal closed; it is detached), said with the line that follows it again."""
    interrupts = 0
    while True:
        try:
            while handle.ending is None:
                events = handle.poll()
                if progress is not None:
                    progress.take(events)
                time.sleep(POLL_S)
            if progress is not None:
                progress.clear()
            return handle.ending
        except Terminated as exc:
            if exc.hangup and handle.remote_session is not None:
                say(handle.lost_line())
                raise
            handle.stop(f"stopped: stallscope was sent {exc.name}")
        except KeyboardInterrupt:
            interrupts += 1
            interrupt = getattr(handle, "interrupt", None)
            if interrupts == 1 and interrupt is not None:
                interrupt()
            else:
                handle.stop(INTERRUPTED)


# Whether the script's output ended mid-line (a progress bar's "\r 58/500"): stallscope's own
# lines start on a line of their own, not glued to it or written over it.
OPEN_LINE = [False]


def new_line() -> None:
    if OPEN_LINE[0]:
        sys.stdout.flush()
        sys.stderr.write("\n")
        OPEN_LINE[0] = False


def say(text: str) -> None:
    new_line()
    print(f"stallscope: {text}", file=sys.stderr, flush=True)


def summary_line(s: dict) -> str:
    """One line for a finished session: how it ended, its steps and their steady figures (one
    statistic, core/session/steady.py: step time and data wait per step are means over the
    steady steps, the share is summed wait over elapsed time)."""
    exc = s.get("exception")
    how = (f"the script raised {exc.get('type')}: {exc.get('message')}" if exc
           else s.get("reason") or "no finished record")
    line = f"session {s['session']}: {how} (rc {s['rc']}), {s['steps']:,} steps"
    if "step_ms" in s:
        line += (f"; step {duration(s['step_ms'] * 1e3)}, data wait "
                 f"{duration(s['data_wait_ms'] * 1e3)} "
                 f"({100 * s['data_wait_share']:.0f}%, incl. epoch starts), means over "
                 f"{s['steady_steps']:,} steady step{'s' if s['steady_steps'] != 1 else ''}")
        if "slowest_rank" in s:
            line += f" of the slowest rank ({s['slowest_rank']})"
        line += short_text(bool(s.get("steady_reached")), int(s.get("steady_profiled") or 0))
        if s.get("lineprof"):
            line += f"; {LINEPROF_NOTE}"
    return line


def _report(session: Path, analyze: bool) -> None:
    try:
        s = open_session(session).summary()
    except StallscopeError:
        return
    new_line()
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
