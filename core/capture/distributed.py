"""`--nproc-per-node N`: launch torch.distributed.run with the runner; every rank writes its
own events.rank<N>.jsonl, stdout.rank<N>.log and trace; the launcher writes the summary."""

from __future__ import annotations

import argparse
import json
import os
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
RANK_OF = "STALLSCOPE_RANK_OF"  # in a relaunched rank's environment: the launching runner's pid
RANK_WAIT_S = 60.0


def rank_options(opts: argparse.Namespace, session: Path) -> list[str]:
    """The runner's options for one rank of this run (no launcher options, its session)."""
    own, _ = split_argv(opts.argv)
    return [*[a for a in drop_option(drop_option(own, "--nproc-per-node"), "--session")
              if a != "--process-group"], "--session", str(session)]


def relaunch_children(opts: argparse.Namespace, session: Path, script: Path, runner: Path):
    """Make every re-run of the script by the script itself (Lightning's DDP launcher) start
    under the runner as its rank: child Pythons find relaunch/sitecustomize.py first on
    PYTHONPATH. Returns the undo callable."""
    options = rank_options(opts, session)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", RELAUNCH_ENV)}
    path = saved["PYTHONPATH"]
    os.environ["PYTHONPATH"] = str(RELAUNCH_DIR) + (os.pathsep + path if path else "")
    os.environ[RELAUNCH_ENV] = json.dumps({
        "script": os.path.realpath(script), "runner": str(runner), "parent": os.getpid(),
        "options": options})

    def undo() -> None:
        wait_for_ranks()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    return undo


def relaunched_ranks() -> list[int]:
    """The pids of the ranks this runner's script launched that still run (Linux: /proc)."""
    mark = f"{RANK_OF}={os.getpid()}".encode()
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    out = []
    for name in names:
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            if stat[stat.rfind(b")") + 2:][:1] != b"Z":
                out.append(int(name))
        except (OSError, ValueError):
            continue
    return out


def wait_for_ranks(timeout: float = RANK_WAIT_S) -> None:
    """When the script ends, the ranks it launched finish too (writing their traces and
    `finished` records) before the runner ends what the script left running."""
    deadline = time.monotonic() + timeout
    while relaunched_ranks() and time.monotonic() < deadline:
        time.sleep(0.05)


def launched_rank() -> int | None:
    """The rank the script gave this process by launching others (WORLD_SIZE > 1 and
    RANK, or LOCAL_RANK on one node), else None."""
    try:
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return None
        if "RANK" in os.environ:
            return int(os.environ["RANK"])
        if os.environ.get("NODE_RANK", "0") == "0" and "LOCAL_RANK" in os.environ:
            return int(os.environ["LOCAL_RANK"])
    except ValueError:
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
