"""Benchmark: `tune` against the exhaustive grid of the same settings, on two workloads.

    .venv/bin/python tests/bench/bench_tune.py [--workload demo|cpu|both] [--item-ms 2.0]

Workloads: the bundled demo (JPEG decode + resize in __getitem__), and a script whose
__getitem__ burns a known CPU time per item (--item-ms, a busy loop) with a fixed compute per
step. For each: one tune (core/tune, as `stallscope-cli tune` runs it), then every combination
of the values the tune searches, each a trial run exactly like the tune's trials:
num_workers in 0, 1, 2, 4 ... up to the usable cores; pin_memory false/true (true does nothing
without CUDA, but a grid search by hand would still try it); persistent_workers false/true and
prefetch_factor 2/4 when there are workers.

Figures (goals from issue 13):
  quality  the settings the tune kept against the grid's best settings, head to head: --pairs
           rounds of one trial each, back to back, alternating which goes first; the median of
           the pairs' step-time ratios (goal: within +5%). Single trials are noisy on a shared
           machine (the grid's best is partly the luckiest of 18 samples), pairs cancel drift.
           The grid's own single figures are printed beside it.
  cost     the tune's wall time over the grid's (goal: at most 40%)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "resources" / "demo" / "train_demo.py"

CPU_SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

ITEM_S = float(sys.argv[1]) / 1000.0
STEP_S = float(sys.argv[2]) / 1000.0
torch.set_num_threads(1)

def burn(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

class Costly(Dataset):
    def __len__(self):
        return 4096
    def __getitem__(self, i):
        burn(ITEM_S)
        return torch.zeros(16), torch.zeros(1)

model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Costly(), batch_size=16, num_workers=0)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    burn(STEP_S)
"""


def grid(cores: int, cuda: bool) -> list[dict]:
    from stallscope.core.tune import ladder

    out = []
    for workers in ladder(cores):
        pins = (False, True)
        if workers == 0:
            out += [{"num_workers": 0, "pin_memory": p, "persistent_workers": False,
                     "prefetch_factor": None} for p in pins]
            continue
        for pin, persistent, prefetch in itertools.product(pins, (False, True), (2, 4)):
            out.append({"num_workers": workers, "pin_memory": pin,
                        "persistent_workers": persistent, "prefetch_factor": prefetch})
    return out


def same(a: dict, b: dict) -> bool:
    """Settings equal as torch uses them (prefetch_factor None = 2 with workers)."""
    from stallscope.core.capture.overrides import effective

    return effective(a) == effective(b)


def bench(name: str, script: Path, args: list[str], out: Path, cores: int,
          pairs: int) -> dict:
    from stallscope.core.jobs import run_job
    from stallscope.core.tune import TuneConfig, table, tune_job
    from stallscope.core.tune.memory import memory_limit
    from stallscope.core.tune.trial import Launch, Trial, changes_from, run_trial

    print(f"\n== {name}: {script.name} {' '.join(args)}", flush=True)
    cfg = TuneConfig(script=script, args=args, cwd=script.parent, out=out / f"{name}-tune",
                     max_workers=cores)
    t = time.perf_counter()
    result = run_job(tune_job(cfg, on_trial=lambda tr, _r: print(
        f"  tune trial {tr.index} {tr.label}: {tr.step_ms and round(tr.step_ms, 1)} ms "
        f"({tr.status})", flush=True)))
    tune_s = time.perf_counter() - t
    print(table(result))
    best = result.best_trial
    base = result.baseline_trial
    if best is None or base is None or not result.selector:
        raise SystemExit(f"{name}: the tune did not measure the script ({result.stopped})")

    cuda = False
    from stallscope.core.tune.job import TRIAL_SCHEDULE

    launch = Launch(script, args, script.parent, sys.executable,
                    {"wait": 1 + min(cores, 8), **TRIAL_SCHEDULE}, site=result.selector)
    limit = memory_limit()
    trials = []
    t = time.perf_counter()
    for i, settings in enumerate(grid(cores, cuda), 1):
        changes = changes_from(base.settings, settings)
        trial = Trial(i, f"{i:02d}-grid", settings, changes)
        run_trial(launch, trial, out / f"{name}-grid", time.monotonic() + 600, limit)
        trials.append(trial)
        print(f"  grid {i:2d} {trial.label:<60} {trial.step_ms and round(trial.step_ms, 1)} ms "
              f"({trial.status}, {trial.wall_s:.1f} s)", flush=True)
    grid_s = time.perf_counter() - t
    ok = [tr for tr in trials if tr.ok]
    grid_best = min(ok, key=lambda tr: tr.step_ms)
    kept = next((tr for tr in ok if same(tr.settings, best.settings)), best)
    ratios = []
    if not same(grid_best.settings, best.settings):
        for i in range(pairs):
            first, second = (best, grid_best) if i % 2 == 0 else (grid_best, best)
            got = {}
            for which in (first, second):
                trial = Trial(i, f"pair{i:02d}-{'tune' if which is best else 'grid'}",
                              which.settings, changes_from(base.settings, which.settings))
                run_trial(launch, trial, out / f"{name}-pairs", time.monotonic() + 600, limit)
                got[which is best] = trial.step_ms
            if got.get(True) and got.get(False):
                ratios.append(got[True] / got[False])
                print(f"  pair {i + 1}: tune's {got[True]:.1f} ms, grid's best "
                      f"{got[False]:.1f} ms", flush=True)
    return {"name": name, "tune_s": tune_s, "grid_s": grid_s, "tune_trials": len(result.trials),
            "grid_trials": len(trials), "grid_best": grid_best, "kept_in_grid": kept,
            "tune_best": best, "baseline": base,
            "paired": statistics.median(ratios) if ratios else 1.0, "pairs": len(ratios)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("demo", "cpu", "both"), default="both")
    p.add_argument("--item-ms", type=float, default=2.0,
                   help="CPU time of one __getitem__ in the cpu workload (default 2.0)")
    p.add_argument("--step-ms", type=float, default=20.0,
                   help="compute per step in the cpu workload (default 20.0)")
    p.add_argument("--pairs", type=int, default=4,
                   help="head-to-head rounds of the tune's and the grid's best settings "
                        "(default 4)")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from stallscope.core.tune import usable_cores

    cores = usable_cores()
    rows = []
    with tempfile.TemporaryDirectory(prefix="stallscope-bench-tune-") as tmp:
        out = Path(tmp)
        if args.workload in ("demo", "both"):
            rows.append(bench("demo", DEMO, [], out, cores, args.pairs))
        if args.workload in ("cpu", "both"):
            script = out / "cpu_bound.py"
            script.write_text(textwrap.dedent(CPU_SCRIPT))
            rows.append(bench("cpu", script, [str(args.item_ms), str(args.step_ms)], out, cores,
                              args.pairs))

    print(f"\n{cores} usable cores; step times are medians of the steady steps of one trial")
    print(f"{'workload':<9}{'tune keeps':<44}{'quality':>9}{'tune s':>8}{'grid s':>8}"
          f"{'cost':>7}")
    for r in rows:
        kept, gbest = r["kept_in_grid"], r["grid_best"]
        cost = r["tune_s"] / r["grid_s"]
        print(f"{r['name']:<9}{r['tune_best'].label:<44}{100 * (r['paired'] - 1):>+8.1f}%"
              f"{r['tune_s']:>8.0f}{r['grid_s']:>8.0f}{100 * cost:>6.0f}%")
        print(f"{'':<9}grid's best: {gbest.label} ({gbest.step_ms:.1f} ms in the grid; the "
              f"tune's settings {kept.step_ms:.1f} ms there); head to head: median of "
              f"{r['pairs']} paired ratios" if r["pairs"] else
              f"{'':<9}the grid's best settings are the tune's")
        print(f"{'':<9}tune measured {r['tune_best'].step_ms:.1f} ms (as written "
              f"{r['baseline'].step_ms:.1f} ms); {r['tune_trials']} tune trials vs "
              f"{r['grid_trials']} grid trials")
    print("goals: quality within +5%, cost at most 40%")


if __name__ == "__main__":
    main()
