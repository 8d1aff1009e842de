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
            result = {"rc": rc, "reason": reason or "completed", "ranks": ranks,
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
