"""`--nproc-per-node N`: launch torch.distributed.run with the runner; every rank writes its
own events.rank<N>.jsonl, stdout.rank<N>.log and trace; the launcher writes the summary.

Ranks the script launches itself (Lightning's DDP launcher, torch elastic): RankSpawns hooks the
script's process's spawn points and gives the relaunch environment to those children alone."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import layout
from .environment import import_torch, torch_info
from .exits import EXIT_SETUP, SetupError, say
from .options import DEFAULT_SCHEDULE, drop_option, split_argv
from .script import check_script
from .tee import FdTee
from .writer import EventLog, run_info, write_run_json


def run_distributed(opts: argparse.Namespace, session: Path, script: Path, runner: Path) -> int:
    log = EventLog(session / layout.EVENTS, None)
    tee = FdTee(session / layout.STDOUT_LOG)
    t0 = time.time()
    try:
        try:
            check_script(script)
            info = torch_info(import_torch())
            write_run_json(session, run_info(opts, script, info))
            own, _ = split_argv(opts.argv)
            rank_args = [a for a in drop_option(drop_option(own, "--nproc-per-node"), "--session")
                         if a != "--process-group"]
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                   "--nproc-per-node", str(opts.nproc_per_node), str(runner),
                   *rank_args, "--session", str(session), "--", str(script), *opts.script_args]
            log.emit(layout.STARTED, script=str(script), args=opts.script_args, cwd=os.getcwd(),
                     pid=os.getpid(), python=sys.executable, session=str(session),
                     nproc_per_node=opts.nproc_per_node, command=cmd,
                     schedule={k: getattr(opts, k) for k in DEFAULT_SCHEDULE}, **info)
            proc = subprocess.Popen(cmd)

            def forward(signum, frame):
                proc.send_signal(signum)

            signal.signal(signal.SIGTERM, forward)
            rc = proc.wait()
            ranks = rank_results(session)
            reasons = {r.get("reason") for r in ranks.values()}
            reason = reasons.pop() if len(reasons) == 1 else "ranks ended differently"
            if rc < 0:
                reason = f"killed by {signal.Signals(-rc).name}"
            result: dict[str, Any] = {
                "rc": rc, "reason": reason or "completed", "ranks": ranks,
                "traces": sorted(f"{layout.TRACES}/{p.name}" for p in
                                 (session / layout.TRACES).glob(f"*{layout.TRACE_SUFFIX}"))}
        except SetupError as exc:
            say(f"error: {exc}")
            result = {"rc": EXIT_SETUP, "reason": str(exc), "error": str(exc)}
    finally:
        tee.close()
    result["wall_s"] = round(time.time() - t0, 3)
    log.finish(**result)
    return int(result["rc"]) if result["rc"] >= 0 else 128 - int(result["rc"])


def rank_results(session: Path) -> dict:
    ranks = {}
    for path in sorted(session.glob(layout.EVENT_GLOB)):
        rank = layout.rank_of_file(path.name)
        if rank is None:
            continue
        last = None
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == layout.FINISHED:
                last = record
        ranks[str(rank)] = ({"rc": last.get("rc"), "reason": last.get("reason"),
                             "steps": last.get("steps")} if last
                            else {"rc": None, "reason": "ended without a finished record"})
    return ranks


# ------------------------------------------------------- processes the script launches itself

RELAUNCH_DIR = Path(__file__).resolve().with_name("relaunch")  # holds sitecustomize.py
RELAUNCH_ENV = "STALLSCOPE_RELAUNCH"
JOB = ("MASTER_ADDR", "MASTER_PORT")  # a distributed job's rendezvous (torchrun, Lightning)
RANK_WAIT_S = 60.0
PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*[dmtu]*(\.exe)?", re.IGNORECASE)
VALUED = ("-W", "-X", "--check-hash-based-pycs")  # interpreter options that take the next word


def rank_options(opts: argparse.Namespace, session: Path) -> list[str]:
    """The runner's options for one rank of this run (no launcher options, its session)."""
    own, _ = split_argv(opts.argv)
    return [*[a for a in drop_option(drop_option(own, "--nproc-per-node"), "--session")
              if a != "--process-group"], "--session", str(session)]


def script_run_by(argv: list[str]) -> str | None:
    """The script a Python command line runs (`python [options] script args`) with PYTHONPATH
    and site honoured, or None: -c, -m, stdin, a bare interpreter, and -E, -I or -S (such a
    Python never imports relaunch/sitecustomize.py)."""
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word == "-" or not word.startswith("-"):
            break
        if word in VALUED:
            i += 2
            continue
        i += 1
        if word.startswith("--"):
            continue
        for j, flag in enumerate(word[1:], 1):
            if flag in "cmEIS":
                return None  # -c code, -m module (also -Bc, -mmodule), -E, -I, -S
            if flag in "WX":
                i += j == len(word) - 1  # -W value, as against -Wvalue
                break
    return argv[i] if i < len(argv) and argv[i] != "-" else None


class RankSpawns:
    """Decides which processes the script's process starts are ranks of its own job, and
    gives those alone the relaunch environment (relaunch/ first on PYTHONPATH, the run's
    options in STALLSCOPE_RELAUNCH); every other child gets exactly the environment it was
    given. A rank is a Python that runs the profiled script, started by the script's process
    itself, whose environment says it is one rank of a job of more than one process with a
    rendezvous address (WORLD_SIZE > 1, RANK or LOCAL_RANK, MASTER_ADDR and MASTER_PORT: what
    Lightning's DDP launcher and torch elastic set)."""

    def __init__(self, script: str, runner: str, options: list[str]) -> None:
        self.script, self.runner, self.pid = script, runner, os.getpid()
        self.spec = json.dumps({"script": script, "runner": runner, "parent": self.pid,
                                "options": options})
        self.pids: list[int] = []  # the ranks started, to wait for
        self.relaunch = f"{RELAUNCH_ENV}={self.spec}".encode()  # as /proc/PID/environ has it
        self.active = True
        self.execve = os.execve

    def is_rank(self, argv: Any, executable: Any = None, cwd: Any = None,
                env: Any = None) -> bool:
        if not self.active or isinstance(argv, (str, bytes)):
            return False
        try:
            words = [os.fsdecode(a) for a in argv]
            program = os.fsdecode(executable) if executable is not None else words[0]
            script = script_run_by(words)
            where = os.fsdecode(cwd) if cwd is not None else os.getcwd()
        except (TypeError, IndexError, ValueError, OSError):
            return False
        if script is None or not self.python(program):
            return False
        env = os.environ if env is None else env
        try:
            if launched_rank(env) is None or not all(env.get(k) for k in JOB):
                return False
        except (AttributeError, TypeError):
            return False
        return os.path.realpath(os.path.join(where, script)) == self.script

    @staticmethod
    def python(program: str) -> bool:
        if PYTHON_NAME.fullmatch(os.path.basename(program)):
            return True
        return bool(sys.executable) and os.path.realpath(program) == os.path.realpath(
            sys.executable)

    def environment(self, env: Any) -> dict:
        """A copy of `env` (None: os.environ) with the relaunch added."""
        out = {**(os.environ if env is None else env)}
        path = out.get("PYTHONPATH")  # kept as it is: the rank gets it back exactly
        if path is None or str(path).split(os.pathsep)[0] != str(RELAUNCH_DIR):
            first = str(RELAUNCH_DIR)
            out["PYTHONPATH"] = first if path is None else first + os.pathsep + str(path)
        out[RELAUNCH_ENV] = self.spec
        return out

    def started(self, pid: Any) -> None:
        if isinstance(pid, int) and pid > 0 and pid not in self.pids:
            self.pids.append(pid)

    def running(self) -> list[int]:
        """The ranks started that still run (Linux: /proc): children of this process, not
        yet reaped, that run the runner or are about to (their environment still holds the
        relaunch: the sitecustomize has not yet turned them into the runner)."""
        return [pid for pid in self.pids if self.runs_a_rank(pid)]

    def runs_a_rank(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rfind(b")") + 2:].split()
            if fields[:1] == [b"Z"] or fields[1:2] != [str(self.pid).encode()]:
                return False
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = [w for w in f.read().split(b"\0") if w]
            if not words:
                # between two programs: the sitecustomize's os.execv of the runner has
                # replaced the process's memory but not yet laid out its arguments
                return True
            if os.fsencode(self.runner) in words:
                return True
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            return False
        # an environment read as nothing is one read across that same exec
        return not environ or self.relaunch in environ.split(b"\0")

    def install(self):
        """Hook the spawn points of the script's process; returns the undo callable."""
        hooks = []
        popen: Any = subprocess.Popen
        original_init = popen.__init__
        signature = inspect.signature(original_init)
        spawns = self

        def __init__(self, *args, **kwargs):
            if os.getpid() != spawns.pid or not spawns.active:
                return original_init(self, *args, **kwargs)
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError:
                return original_init(self, *args, **kwargs)  # let Popen say what is wrong
            given = bound.arguments
            if given.get("shell") or not spawns.is_rank(
                    given.get("args"), given.get("executable"), given.get("cwd"),
                    given.get("env")):
                return original_init(self, *args, **kwargs)
            given["env"] = spawns.environment(given.get("env"))
            original_init(*bound.args, **bound.kwargs)
            spawns.started(getattr(self, "pid", None))

        hooks.append((popen, "__init__", original_init, __init__))
        for name in ("posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                hooks.append((os, name, getattr(os, name), self.spawn_hook(getattr(os, name))))
        for name in ("execv", "execve"):
            if hasattr(os, name):
                hooks.append((os, name, getattr(os, name), self.exec_hook(getattr(os, name))))
        for owner, name, original, hook in hooks:
            hook.__wrapped__ = original  # the undo mark
            hook.__doc__ = original.__doc__
            setattr(owner, name, hook)

        def undo() -> None:
            self.active = False
            for owner, name, original, hook in hooks:
                if getattr(owner, name, None) is hook:  # else a later hook wraps ours: inert now
                    setattr(owner, name, original)

        return undo

    def spawn_hook(self, original):
        def posix_spawn(path, argv, env, *args, **kwargs):
            if os.getpid() == self.pid and self.is_rank(argv, path, None, env):
                pid = original(path, argv, self.environment(env), *args, **kwargs)
                self.started(pid)
                return pid
            return original(path, argv, env, *args, **kwargs)

        return posix_spawn

    def exec_hook(self, original):
        """os.execv / execve in a process the script's process forked (os.spawnv*, a fork
        that runs a rank): the new program is the script's child."""
        def execute(path, argv, *env):
            given = env[0] if env else None
            if (os.getpid() != self.pid and os.getppid() == self.pid
                    and self.is_rank(argv, path, None, given)):
                return self.execve(path, argv, self.environment(given))
            return original(path, argv, *env)

        return execute


def relaunch_children(opts: argparse.Namespace, session: Path, script: Path, runner: Path):
    """Make every re-run of the script by the script itself as one rank of its job
    (Lightning's DDP launcher) start under the runner as that rank: only such a child is given
    relaunch/sitecustomize.py first on PYTHONPATH; the script's process and every other child
    keep the user's environment. Returns the undo callable, which waits for the ranks."""
    spawns = RankSpawns(os.path.realpath(script), str(runner), rank_options(opts, session))
    unhook = spawns.install()

    def undo() -> None:
        try:
            wait_for_ranks(spawns)
        finally:
            unhook()

    return undo


def wait_for_ranks(spawns: RankSpawns, timeout: float = RANK_WAIT_S) -> None:
    """When the script ends, the ranks it launched finish too (writing their traces and
    `finished` records) before the runner ends what the script left running."""
    deadline = time.monotonic() + timeout
    while spawns.running() and time.monotonic() < deadline:
        time.sleep(0.05)


def launched_rank(env: Any = None) -> int | None:
    """The rank the script gave this process (or `env`) by launching others (WORLD_SIZE > 1
    and RANK, or LOCAL_RANK on one node), else None."""
    env = os.environ if env is None else env
    try:
        if int(env.get("WORLD_SIZE", "1")) <= 1:
            return None
        if "RANK" in env:
            return int(env["RANK"])
        if env.get("NODE_RANK", "0") == "0" and "LOCAL_RANK" in env:
            return int(env["LOCAL_RANK"])
    except (ValueError, TypeError):
        return None
    return None


def adopt_rank(log, writer, rank: int) -> None:
    """The runner's process turned out to be rank `rank` of a job the script launched: its
    events, stdout log and traces take that rank's names, as under torchrun (the files are
    renamed while open, so what was written stays)."""
    session = log.path.parent
    events = session / layout.events_name(rank)
    stdout = session / layout.stdout_name(rank)
    for old, new in ((log.path, events), (session / layout.STDOUT_LOG, stdout)):
        try:
            if old.exists() and not new.exists():
                os.replace(old, new)
        except OSError:
            return
    log.path, log.rank = events, rank
    if hasattr(writer, "stem"):
        writer.stem = layout.trace_stem(writer.stem, rank)
    say(f"the script launched its own processes: this one is rank {rank} "
        f"({events.name}); every rank is profiled")
