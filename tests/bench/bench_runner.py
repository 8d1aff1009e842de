"""Benchmark: the same CPU training script bare, under hand-written torch.profiler code with the
same schedule, and under stallscope's runner. Goal: runner within 3% of the hand-written code.

    .venv/bin/python tests/bench/bench_runner.py [--runs 7] [--steps 300]

Each variant is a fresh process; the order rotates every round. Three figures per variant, all
medians: the process's wall time, its CPU time (user+sys: steadier than wall on a shared machine),
and the training loop's own time as the script measures it (no interpreter start-up, torch import
or profiler start in it). The runner runs with --no-stop-after-window so
all three do the same number of steps.

The verdict compares the runner with the hand-written schedule in alternating pairs: each round
runs the two back to back (which one first alternates), the pair's ratio cancels the machine's
slow drifts, and the median of the ratios is the figure (goal: within +3%).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "core" / "capture" / "runner.py"

SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1])
hand = sys.argv[2] if len(sys.argv) > 2 else None
torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(steps * 64, 256), torch.randint(0, 10, (steps * 64,)))
loader = DataLoader(data, batch_size=64)
nn = torch.nn
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def train(prof=None):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if prof is not None:
            prof.step()

if hand:
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(hand, use_gzip=True),
                 profile_memory=True) as prof:
        t = time.perf_counter()  # inside `with`: the runner too enters it before the script
        train(prof)
else:
    t = time.perf_counter()
    train()
print(f"LOOP_S={time.perf_counter() - t:.6f}")
"""


def run_once(cmd: list[str], cwd: Path) -> tuple[float, float, float]:
    """(process wall s, process CPU s (user+sys, workers included), training loop s)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{stderr[-2000:]}")
    m = re.search(r"LOOP_S=([0-9.]+)", stdout)
    if not m:
        raise SystemExit(f"no LOOP_S in output of {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime, float(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7, help="runs of each variant (default 7)")
    p.add_argument("--steps", type=int, default=300, help="training steps per run (default 300)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="stallscope-bench-") as tmp:
        tmp = Path(tmp)
        script = tmp / "bench_train.py"
        script.write_text(textwrap.dedent(SCRIPT))
        py = sys.executable
        variants = {
            "bare": lambda i: [py, str(script), str(args.steps)],
            "hand-written profiler": lambda i: [py, str(script), str(args.steps),
                                                str(tmp / f"hand{i}")],
            "stallscope runner": lambda i: [py, str(RUNNER), "--session", str(tmp / f"s{i}"),
                                            "--no-stop-after-window", "--", str(script),
                                            str(args.steps)],
        }
        names = list(variants)
        results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        run_once(variants["bare"](0), tmp)  # warm the file cache
        for i in range(args.runs):
            # hand-written and runner back to back, alternating which goes first; bare apart
            pair = names[1:] if i % 2 == 0 else names[:0:-1]
            order = [names[0], *pair] if i % 4 < 2 else [*pair, names[0]]
            for name in order:
                results[name].append(run_once(variants[name](i), tmp))
            print(f"round {i + 1}/{args.runs} done", file=sys.stderr)

    print(f"\n{args.steps} steps, {args.runs} runs each, medians "
          f"(torch {__import__('torch').__version__}, {sys.platform})")
    cols = ("process wall s", "process CPU s", "training loop s")
    print(f"{'variant':<24}" + "".join(f"{c:>17}" for c in cols))
    med = {}
    for name in names:
        med[name] = [statistics.median(r[k] for r in results[name]) for k in range(3)]
        print(f"{name:<24}" + "".join(f"{v:>17.3f}" for v in med[name]))
    hand, ours = med["hand-written profiler"], med["stallscope runner"]
    print("\nrunner vs hand-written, medians: " + ", ".join(
        f"{c[:-2]} {100 * (o / h - 1):+.1f}%" for c, h, o in zip(cols, hand, ours, strict=True)))
    pairs = list(zip(results["hand-written profiler"], results["stallscope runner"], strict=True))
    print("runner vs hand-written, median of the paired ratios: " + ", ".join(
        f"{c[:-2]} {100 * (statistics.median(o[k] / h[k] for h, o in pairs) - 1):+.1f}%"
        for k, c in enumerate(cols)) + "  (goal: within +3%)")


if __name__ == "__main__":
    main()
