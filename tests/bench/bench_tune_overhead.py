"""Benchmark: what a tune trial costs the script it measures (issue 21, the claim below a plain
rerun on the I/O-bound workload).

    .venv/bin/python tests/bench/bench_tune_overhead.py [--workers 0,8] [--rounds 3]

The I/O-bound script of tests/bench/bench_tune.py (a sleep per sample), measured three ways in
rotating order each round, every figure the steady rule (elapsed over the steps after the
warm-up / their count):
  plain    plain python, the settings applied to DataLoader(...) (bench_tune's wrapper)
  runner   stallscope's runner as a tune trial starts it (no profiling window), to the end
  trial    the same under core/tune/trial.run_trial: the tune watching it (process-tree
           samples, step events) and stopping it once its steady window is measured
A fixed cost per step of the runner shows as the same ms/step added at 0 and at 8 workers
(a larger share of the short steps: the speed-up shrinks); the watcher's cost as trial - runner.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

import bench_tune  # noqa: E402  (its scripts and plain-run wrapper)


def runner_run(script: Path, args: list[str], workers: int, tmp: Path, watched: bool) -> float:
    from stallscope.core.session.reader import open_session
    from stallscope.core.tune.trial import UNPROFILED, Launch, Trial, run_trial

    launch = Launch(script, args, script.parent, sys.executable, dict(UNPROFILED))
    changes = {"num_workers": workers} if workers else {}
    name = f"{'trial' if watched else 'runner'}-{workers}-{time.monotonic_ns()}"
    if watched:
        trial = Trial(1, name, changes, changes)
        run_trial(launch, trial, tmp, time.monotonic() + 600, 1 << 40)
        if trial.step_ms is None:
            raise SystemExit(f"trial {name}: {trial.status} {trial.message}")
        return trial.step_ms
    import subprocess

    session = tmp / name
    proc = subprocess.run(launch.command(session, changes), cwd=script.parent,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"runner {name} failed:\n{proc.stderr[-2000:]}")
    found = open_session(session).steady()
    assert found is not None
    return found[1].step_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="0,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sample-ms", type=float, default=5.0)
    p.add_argument("--samples", type=int, default=3600)
    a = p.parse_args()
    workers = [int(w) for w in a.workers.split(",")]
    ways = ("plain", "runner", "trial")
    figures: dict[tuple[int, str], list[float]] = {(w, k): [] for w in workers for k in ways}
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="stallscope-bench-overhead-") as name:
        tmp = Path(name)
        (tmp / "plain.py").write_text(textwrap.dedent(bench_tune.PLAIN))
        script = tmp / "io_bound.py"
        script.write_text(textwrap.dedent(bench_tune.IO_SCRIPT))
        args = [str(a.sample_ms), str(a.samples)]
        for r in range(a.rounds):
            for w in workers:
                order = ways[r % 3:] + ways[:r % 3]
                for way in order:
                    if way == "plain":
                        ms = bench_tune.plain_run(script, args, {"num_workers": w}, tmp)[0]
                    else:
                        ms = runner_run(script, args, w, tmp, way == "trial")
                    figures[(w, way)].append(ms)
                    print(f"  round {r + 1} workers={w} {way:<6} {ms:7.2f} ms per step",
                          flush=True)
    print(f"\nmedians (load average {os.getloadavg()[0]:.1f}):")
    med = {k: statistics.median(v) for k, v in figures.items()}
    for w in workers:
        plain = med[(w, "plain")]
        print(f"  workers={w}: plain {plain:.2f}  runner {med[(w, 'runner')]:.2f} "
              f"({med[(w, 'runner')] - plain:+.2f} ms)  trial {med[(w, 'trial')]:.2f} "
              f"({med[(w, 'trial')] - plain:+.2f} ms)")
    if len(workers) == 2:
        lo, hi = workers
        for way in ways:
            print(f"  speed-up {lo}->{hi} workers, {way}: "
                  f"{med[(lo, way)] / med[(hi, way)]:.2f}x")
    print(json.dumps({f"{w}:{k}": v for (w, k), v in figures.items()}))


if __name__ == "__main__":
    main()
