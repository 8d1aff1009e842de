"""The runner's command line: its options, how the app and the CLI build it, how it is read."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .overrides import FORMS, OverrideError, parse_sets
from .tee import parse_terminal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

DEFAULT_SCHEDULE = {"wait": 1, "warmup": 1, "active": 4, "repeat": 1}
TAKES_VALUE = frozenset({"--session", "--wait", "--warmup", "--active", "--repeat",
                         "--nproc-per-node", "--lineprof", "--lineprof-depth", "--set",
                         "--profile-every", "--profile-at", "--terminal"})
WINDOW_OPTIONS = ("profile_every", "profile_at", "profile_epochs")


class _OnOff(argparse.Action):
    """--x / --no-x, as argparse.BooleanOptionalAction (Python 3.9+) on the remote's 3.8."""

    def __init__(self, option_strings: Sequence[str], dest: str, default: bool | None = None,
                 help: str | None = None) -> None:
        names = [n for s in option_strings for n in (s, "--no-" + s[2:])]
        super().__init__(names, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, not str(option_string).startswith("--no-"))

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


ON_OFF = getattr(argparse, "BooleanOptionalAction", _OnOff)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stallscope-runner",
        usage="%(prog)s [options] -- script.py [args]",
        description="Run a training script under torch.profiler into a stallscope session folder.",
    )
    add_run_options(p)
    p.add_argument("--terminal", default="", metavar="STREAMS[:COLSxROWS]",
                   help="the front end's stdout/stderr is a terminal (e.g. stdout,stderr:120x40): "
                        "the script writes to a pseudo-terminal of that size (a stream that is "
                        "itself a terminal gets one anyway)")
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the runner and `stallscope-cli run`."""
    p.add_argument("--session", metavar="DIR",
                   help="session folder (default: <your data folder>/stallscope/sessions/"
                        "<script>-<timestamp>, e.g. ~/.local/share/stallscope/sessions)")
    for key, value in DEFAULT_SCHEDULE.items():
        p.add_argument(f"--{key}", type=int, default=value, metavar="N",
                       help=f"profiler schedule: {key} steps (default {value})")
    p.add_argument("--profile-memory", action=ON_OFF, default=True,
                   help="record allocations (default on)")
    p.add_argument("--record-shapes", action=ON_OFF, default=False,
                   help="record operator input shapes (default off)")
    p.add_argument("--with-stack", action=ON_OFF, default=False,
                   help="record Python stacks (default off; large traces)")
    p.add_argument("--stop-after-window", action=ON_OFF, default=True,
                   help="end the script once the profiling window's trace is written (default on)")
    p.add_argument("--profile-every", type=int, default=0, metavar="N",
                   help="repeated profiling windows: one every N steps (each its own trace; "
                        "the run goes on to its end)")
    p.add_argument("--profile-at", default="", metavar="N,N,...",
                   help="profiling windows starting at these steps (each its own trace)")
    p.add_argument("--profile-epochs", action="store_true",
                   help="a profiling window at the start of every epoch (each its own trace)")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                   help="launch N ranks through torch.distributed.run")
    p.add_argument("--lineprof", default="off", metavar="auto|module:Class.method|off",
                   help="line-profile Dataset.__getitem__ (default off)")
    p.add_argument("--lineprof-depth", type=int, default=0, metavar="N",
                   help="also line-profile functions N calls deep (default 0)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a DataLoader setting without editing the script (repeatable): "
                        "num_workers, pin_memory, persistent_workers, prefetch_factor; "
                        f"forms: {FORMS}")
    p.add_argument("--process-group", action="store_true",
                   help="start a new process group so the app can stop the whole tree")


def build_argv(session: str | os.PathLike, script: str, args: list[str],
               schedule: dict | None = None, options: dict | None = None) -> list[str]:
    """The runner's command line for a session (used by `stallscope-cli run`, tune and the app).
    `options` may hold "sets": a list of `--set` texts."""
    schedule = {**DEFAULT_SCHEDULE, **(schedule or {})}
    options = options or {}
    argv = ["--session", str(session)]
    for key in DEFAULT_SCHEDULE:
        argv += [f"--{key}", str(int(schedule[key]))]
    for key in ("profile_memory", "record_shapes", "with_stack", "stop_after_window"):
        if key in options:
            flag = key.replace("_", "-")
            argv.append(f"--{flag}" if options[key] else f"--no-{flag}")
    if int(options.get("profile_every") or 0) > 0:
        argv += ["--profile-every", str(int(options["profile_every"]))]
    if options.get("profile_at"):
        at = options["profile_at"]
        argv += ["--profile-at", at if isinstance(at, str) else ",".join(str(int(n)) for n in at)]
    if options.get("profile_epochs"):
        argv.append("--profile-epochs")
    if int(options.get("nproc_per_node", 1)) > 1:
        argv += ["--nproc-per-node", str(int(options["nproc_per_node"]))]
    if options.get("lineprof", "off") not in ("off", "", None):
        argv += ["--lineprof", str(options["lineprof"]),
                 "--lineprof-depth", str(int(options.get("lineprof_depth", 0)))]
    for text in options.get("sets") or ():
        argv += ["--set", str(text)]
    if options.get("process_group"):
        argv.append("--process-group")
    if options.get("terminal"):
        argv += ["--terminal", str(options["terminal"])]
    return [*argv, "--", str(script), *args]


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """Options before `--`, the script and its arguments after (a `--` is optional)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    # Without `--`, the first bare word is the script and the rest belongs to it.
    i = 0
    while i < len(argv):
        if not argv[i].startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if argv[i] in TAKES_VALUE else 1
    return argv, []


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, rest = split_argv(argv)
    parser = build_parser()
    opts = parser.parse_args(own)
    if not rest:
        parser.error("no script given: use  [options] -- script.py [args]")
    opts.script, opts.script_args, opts.argv = rest[0], rest[1:], argv
    for key in DEFAULT_SCHEDULE:
        if getattr(opts, key) < 0:
            parser.error(f"--{key} must be >= 0")
    if opts.active < 1:
        parser.error("--active must be >= 1")
    if opts.nproc_per_node < 1:
        parser.error("--nproc-per-node must be >= 1")
    try:
        opts.profile_at = parse_steps(opts.profile_at)
    except ValueError as exc:
        parser.error(str(exc))
    if opts.profile_every < 0:
        parser.error("--profile-every must be >= 1")
    if 0 < opts.profile_every <= opts.warmup + opts.active:
        parser.error(f"--profile-every {opts.profile_every}: windows of --warmup {opts.warmup} "
                     f"+ --active {opts.active} steps need more steps apart")
    try:
        if opts.terminal:
            parse_terminal(opts.terminal)
    except ValueError as exc:
        parser.error(str(exc))
    opts.windows = bool(opts.profile_every or opts.profile_at or opts.profile_epochs)
    try:
        opts.overrides = parse_sets(opts.sets)
    except OverrideError as exc:
        parser.exit(2, f"stallscope: error: {exc}\n")  # one line, before anything is created
    return opts


def parse_steps(text: str) -> list[int]:
    """`--profile-at 100,5000` -> [100, 5000] (sorted, each once)."""
    out = set()
    for word in (w.strip() for w in (text or "").split(",")):
        if not word:
            continue
        if not word.isdigit():
            raise ValueError(f"--profile-at {text}: expected step numbers like 100,5000, "
                             f"not {word!r}")
        out.add(int(word))
    return sorted(out)


def user_data_dir() -> Path:
    """The platform's per-user data folder: $XDG_DATA_HOME or ~/.local/share on Linux,
    ~/Library/Application Support on macOS, %LOCALAPPDATA% on Windows."""
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    xdg = os.environ.get("XDG_DATA_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else home / ".local" / "share"


def sessions_root() -> Path:
    """Where sessions go by default: the user's data folder, never the script's folder nor
    the installed package (the CLI, the runner, the Run dialog and tune trials alike)."""
    return user_data_dir() / "stallscope" / "sessions"


def default_session_dir(script: str, root: str | os.PathLike | None = None) -> Path:
    """A new folder <root>/<script>-<timestamp> (root: sessions_root())."""
    stem = Path(script).stem or "script"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) if root is not None else sessions_root()
    path = base / f"{stem}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{stem}-{stamp}-{n}"
    return path


def rank_from_env() -> int | None:
    """This process's rank when it runs under torchrun with more than one rank."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        return int(os.environ["RANK"]) if world > 1 else None
    except (KeyError, ValueError):
        return None


def drop_option(args: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out
