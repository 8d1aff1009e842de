"""Benchmark: what the runner adds to each unprofiled step of a tight training loop (issue 34).

    .venv/bin/python tests/bench/bench_step_cost.py [--pairs 5] [--steps 20000]

The script does near-empty steps (a one-element batch from a DataLoader, forward, backward,
SGD step) and measures, itself, its steps after the profiled window (the first SKIP steps hold
the runner's default window and its trace writing): wall and CPU time per step. Plain python
and the same script under the runner run in alternating pairs (which goes first alternates); the
figures are the medians, and the runner's added cost per step is the median of the pairs'
differences. Goal: <= 50 µs added per step. What the runner keeps of these steps (record.bin's
step count, events.jsonl's lines) is printed beside it.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "core" / "capture" / "runner.py"
SKIP = 200

SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset

steps, skip = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
torch.set_num_threads(1)
w = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([w], lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(steps, 4)), batch_size=1)
for i, (x,) in enumerate(loader):
    if i == skip:
        t, c = time.perf_counter(), time.process_time()
    loss = (w * x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
n = steps - skip
print(f"STEP_US={1e6 * (time.perf_counter() - t) / n:.3f} "
      f"CPU_US={1e6 * (time.process_time() - c) / n:.3f}")
"""


def run_once(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(wall µs, CPU µs) per step, as the script measured them."""
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    m = re.search(r"STEP_US=([0-9.]+) CPU_US=([0-9.]+)", out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout[-1000:]}{out.stderr[-2000:]}")
    return float(m.group(1)), float(m.group(2))


def kept(session: Path) -> str:
    """What the session holds of the steps: record.bin's steps, events.jsonl's step lines."""
    from stallscope.core.session.reader import open_session
    from stallscope.core.session.record import load_record

    rec = load_record(open_session(session))
    lines = (session / "events.jsonl").read_text().count('"event": "step"')
    lines = lines or (session / "events.jsonl").read_text().count('"event":"step"')
    return f"record.bin {rec.n_steps if rec is not None else 0:,} steps, events.jsonl " \
           f"{lines:,} step lines"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--runner", default=str(RUNNER), help="another checkout's "
                    "core/capture/runner.py (a before/after comparison)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stallscope-bench-") as tmp:
        tmp = Path(tmp)
        script = tmp / "tight.py"
        script.write_text(textwrap.dedent(SCRIPT))
        plain = [sys.executable, str(script), str(args.steps), str(SKIP)]

        def runner(i: int) -> list[str]:
            return [sys.executable, args.runner, "--session", str(tmp / f"s{i}"),
                    "--no-stop-after-window", "--", *plain[1:]]

        results: dict[str, list[tuple[float, float]]] = {"plain": [], "runner": []}
        for i in range(args.pairs):
            order = ("plain", "runner") if i % 2 == 0 else ("runner", "plain")
            for name in order:
                results[name].append(run_once(plain if name == "plain" else runner(i), tmp))
            print(f"pair {i + 1}/{args.pairs}: plain {results['plain'][-1][0]:.1f} µs, "
                  f"runner {results['runner'][-1][0]:.1f} µs per step", file=sys.stderr)
        what = kept(tmp / "s0")
    print(f"{args.steps:,} near-empty steps ({SKIP} skipped), {args.pairs} alternating pairs")
    for k, label in ((0, "wall"), (1, "CPU")):
        p = statistics.median(r[k] for r in results["plain"])
        r = statistics.median(r[k] for r in results["runner"])
        added = statistics.median(b[k] - a[k] for a, b in zip(results["plain"],
                                                              results["runner"], strict=True))
        print(f"{label:>4} per step: plain {p:.1f} µs, runner {r:.1f} µs, added {added:.1f} µs "
              f"(median of pairs; goal <= 50 µs)")
    print(f"kept: {what}")


if __name__ == "__main__":
    main()
