"""`stallscope-cli tune [options] -- script.py [args]`: measure DataLoader settings, keep the
best, print the line to change. Each trial is a session folder inside one tune folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stallscope.core import units
from stallscope.core.commands.run import (
    add_launch_options,
    script_and_cwd,
    script_command,
    where_of,
)
from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job
from stallscope.core.tune import TuneConfig, load_result, table, tune_job, verdict
from stallscope.core.tune.job import DEFAULT_BUDGET_S
from stallscope.core.tune.memory import parse_size
from stallscope.core.tune.search import MOST_WORKERS

USAGE = "stallscope-cli tune [options] -- script.py [args]"


def register(sub) -> None:
    p = sub.add_parser(
        "tune", help="find the DataLoader settings that make the steps fastest, by measuring",
        usage=USAGE,
        description="Run the unmodified script repeatedly with other DataLoader settings "
                    "(num_workers up to the usable cores while step time improves beyond the "
                    "noise, past them while the workers wait on I/O, the fewest workers as "
                    "fast kept). Each trial's figure is its steady step time (elapsed over >= "
                    "20 unprofiled steps after the warm-up / their count); the leader is "
                    "repeated against the script as written in alternating pairs and kept "
                    "only when its gain is beyond the noise, before pin_memory, "
                    "persistent_workers, prefetch_factor are tried beside it with the budget "
                    "left. The budget is a ceiling. Prints each trial, the verdict with its "
                    "interval and the line to change; the speed-up is the confirmed one. "
                    "Ctrl-C keeps the finished trials.",
    )
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                   help=f"time for all trials together (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--out", metavar="DIR",
                   help="tune folder (default ~/.local/share/stallscope/sessions/"
                        "tune-<script>-<time>)")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory the trials may use, e.g. 8G (default: STALLSCOPE_MEMORY_LIMIT "
                        "or the free memory)")
    p.add_argument("--max-workers", type=int, metavar="N",
                   help="most num_workers to try (default: the usable cores, or "
                        f"{MOST_WORKERS} when the workers wait on I/O rather than compute; "
                        "memory bounds it too)")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                   help="run every trial under torchrun with N ranks; the slowest rank's "
                        "step time counts (default 1)")
    p.add_argument("--max-trials", type=int, metavar="N",
                   help="stop after N trials, the script as written included")
    p.add_argument("--json", action="store_true", help="print tune.json's content on stdout")
    add_launch_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- script.py [args]")
    p.set_defaults(func=run)


def progress_line(trial) -> str:
    text = f"trial {trial.index} ({trial.label}): "
    if trial.ok:
        text += (f"{units.ms(trial.step_ms * 1e3)} per step, data wait "
                 f"{units.ms(trial.data_wait_ms * 1e3)} over {trial.steady_steps} steady steps")
        if trial.rank is not None:
            text += f" (slowest rank {trial.rank})"
        if trial.worker_cpu is not None:
            text += (f", workers on a CPU {units.pct(trial.worker_cpu)} of the time they "
                     "could run")
        if trial.busy:
            text += (f", busy machine (others used {units.pct(trial.others or 0)} of the CPU, "
                     f"this trial waited for one {units.pct(trial.steal or 0)} of the time)")
        if trial.utilization is not None:
            text += f", GPU {units.pct(trial.utilization)}"
    else:
        text += trial.status + (f": {trial.message}" if trial.message else "")
    if trial.peak_rss:
        text += f", peak RSS {units.size(trial.peak_rss)}"
    if trial.wall_s:
        text += f" ({trial.wall_s:.1f} s)"
    return text


def run(args: argparse.Namespace) -> int:
    where = where_of(args)
    if where.remote:  # --host: the script and its folder are the host's, one trial at a time
        command = script_command(args, USAGE)
        script, script_args, cwd = Path(command[0]), command[1:], Path.cwd()
    else:
        script, script_args, cwd = script_and_cwd(args, USAGE)
    if args.budget <= 0:
        raise StallscopeError("--budget must be > 0 seconds")
    if args.max_workers is not None and args.max_workers < 1:
        raise StallscopeError("--max-workers must be >= 1")
    if args.max_trials is not None and args.max_trials < 1:
        raise StallscopeError("--max-trials must be >= 1")
    if args.nproc_per_node < 1:
        raise StallscopeError("--nproc-per-node must be >= 1")
    cfg = TuneConfig(script=script, args=script_args, cwd=cwd, python=args.python,
                     out=Path(args.out) if args.out else None, budget_s=args.budget,
                     memory_limit=parse_size(args.memory_limit) if args.memory_limit else None,
                     max_workers=args.max_workers, max_trials=args.max_trials,
                     nproc_per_node=args.nproc_per_node,
                     where=where if where.remote else None)
    cfg.out = cfg.folder()
    say(f"tuning {script.name}{f' on {where.host}' if where.remote else ''}: trials go to "
        f"{cfg.out}")
    if where.remote:
        say("the trials run on the host: their memory and their workers' CPU time are not "
            "sampled there (no memory guard; the worker-CPU hint is left out)")

    def on_trial(trial, result) -> None:
        say(progress_line(trial))

    try:
        result = run_job(tune_job(cfg, on_trial=on_trial))
    except KeyboardInterrupt:
        kept = load_result(cfg.out) if (cfg.out / "tune.json").exists() else None
        done = [t for t in kept.trials if t.status != "interrupted"] if kept else []
        if kept is not None and kept.trials:
            print(table(kept), file=sys.stderr)
        say(f"interrupted: {len(done)} finished trial{'s' if len(done) != 1 else ''} kept in "
            f"{cfg.out} (tune.json)")
        return 130
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=str))
    out = sys.stderr if args.json else sys.stdout
    print(table(result), file=out)
    for line in verdict(result):
        print(line, file=out)
    before, after = result.sessions
    if result.confirmed and before and after:
        print(f"the claim's two sessions: stallscope-cli compare {before} {after}", file=out)
    print(f"trials: {result.folder} (tune.json; open any two sessions in the compare view, or "
          f"stallscope-cli compare BEFORE AFTER)", file=out)
    base = result.baseline_trial
    return 0 if base is not None and base.ok else 1


def say(text: str) -> None:
    print(f"stallscope: {text}", file=sys.stderr, flush=True)
