"""The whole run's figures against the script's own clock (issue 34), at a million steps.

    .venv/bin/python tests/bench/bench_whole_run_clock.py [--steps 1000000] [--fetch-s 0]

A tight loop over a DataLoader (batch_size=None, num_workers=0, optionally sleeping --fetch-s in
each item) runs under the runner to its end and prints its time.perf_counter() elapsed and its
time inside next(). Beside them: analyze's whole-run figures (elapsed from step 0's end, the
steady step time x steps, the data wait share incl. epoch starts) and the ratio of each. The goal
is every ratio within 2% of 1. The data wait is the runner's whole hook around next(), its own
cost included, plus the call's entry and return (calibrated at the start); what still lies
outside it (a fraction of a µs a fetch, and the preemptions that land there on a loaded
machine) shows on a loop of ~10 µs fetches only. State the load (`uptime`) beside any figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from scripts import clocked_loop  # noqa: E402 - the tests' own script, run at this scale

RUNNER = ROOT / "core" / "capture" / "runner.py"



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--fetch-s", type=float, default=0.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "clocked.py"
        fetch = f"time.sleep({args.fetch_s!r})" if args.fetch_s else "pass"
        script.write_text(clocked_loop(args.steps, fetch))
        session = Path(tmp) / "session"
        load = os.getloadavg()[0]
        start = time.monotonic()
        proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session),
                               "--no-stop-after-window", "--no-profile-memory", "--",
                               str(script)], capture_output=True, text=True, cwd=tmp)
        took = time.monotonic() - start
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        line = next(x for x in proc.stdout.splitlines() if x.startswith("CLOCK "))
        mine = json.loads(line.removeprefix("CLOCK "))
        out = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "analyze",
                              str(session), "--json"], capture_output=True, text=True)
        run = json.loads(out.stdout)["run"]
    share = mine["waited"] / mine["elapsed"]
    rows = [("elapsed (s)", mine["elapsed"], run["elapsed_s"]),
            ("step time x steps (s)", mine["elapsed"], run["step_ms"] * args.steps / 1e3),
            ("data wait share", share, run["data_wait_share"])]
    print(f"{args.steps:,} steps, fetch {args.fetch_s} s; load {load:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end; the run took {took:.0f} s")
    print(f"{'':24}{'script':>12}{'stallscope':>12}{'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:24}{a:12.4f}{b:12.4f}{b / a if a else float('nan'):8.3f}")
    print(f"steady steps {run['steady_steps']:,}, step {run['step_ms'] * 1e3:.1f} µs, "
          f"start-up {run['startup_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
