"""Benchmark: what running over ssh costs (issue 32), against a real sshd on 127.0.0.1
(tests/sshd.py), so the clocks of both ends are one.

    .venv/bin/python tests/bench/bench_remote.py [--steps 40] [--rounds 3]

  start    start() to the handle: ssh, deploy check (the runner folder reused), agent start
  lag      each step event: written by the runner (its "t") -> handed out by poll() here,
           median and max (the follow stream polls the session every 0.1 s when idle)
  trace    trace_ready written -> the TraceReady out of poll() (the trace mirrored first)
  total    start() to the Ending, remote vs local, same script
The figures depend on the machine's load: the script's `uptime` line is printed with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from scripts import training  # noqa: E402
from sshd import Sshd  # noqa: E402

from stallscope.core.launch import Job, Where, start  # noqa: E402
from stallscope.core.session.events import StepEvent, TraceReady  # noqa: E402


def one(where: Where, script: Path, session: Path) -> dict:
    t0 = time.time()
    run = start(where, Job(script=str(script), session=session,
                           schedule={"wait": 5, "warmup": 1, "active": 2},
                           options={"stop_after_window": False}))
    started = time.time() - t0
    lags, trace_lag = [], None
    while run.running:
        for e in run.poll():
            now = time.time()
            if isinstance(e, StepEvent):
                lags.append(now - e.t)
            elif isinstance(e, TraceReady):
                trace_lag = now - e.t
        time.sleep(0.02)
    return {"start_s": started, "lag_med_ms": 1000 * statistics.median(lags),
            "lag_max_ms": 1000 * max(lags), "trace_ms": 1000 * (trace_lag or float("nan")),
            "total_s": time.time() - t0, "steps": len(lags)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    opts = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        server = Sshd.start(folder / "sshd")
        try:
            script = folder / "train.py"
            script.write_text(training(items=8 * opts.steps, item_s=0.002, step_s=0.05))
            remote = Where(host=server.alias, python=sys.executable,
                           ssh_options=server.options, cache=str(folder / "cache"))
            rows = []
            for r in range(opts.rounds):
                for name, where in (("remote", remote), ("local", Where())):
                    row = one(where, script, folder / f"{name}-{r}")
                    rows.append((name, row))
                    print(f"{name:6} start {row['start_s']:.2f} s  lag {row['lag_med_ms']:.0f}"
                          f" ms (max {row['lag_max_ms']:.0f})  trace {row['trace_ms']:.0f} ms"
                          f"  total {row['total_s']:.1f} s  steps {row['steps']}", flush=True)
        finally:
            server.stop()
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
