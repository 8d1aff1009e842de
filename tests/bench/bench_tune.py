"""Benchmark: `tune` against the exhaustive grid of plain runs, on three workloads (issue 21).

    .venv/bin/python tests/bench/bench_tune.py [--workload demo|cpu|io|iterable|all] [--tunes 2]
                                              [--background N]   # N busy loops beside it

Workloads: the bundled demo (JPEG decode + resize in __getitem__, on a CPU), a script whose
__getitem__ burns a known CPU time per item (a busy loop) with a fixed compute per step, one
whose __getitem__ sleeps a known time per sample (I/O: object stores, network file
systems), where workers past the core count still help, and an IterableDataset that shards
its stream by worker and sleeps part of each sample and computes the rest. CPU work is burnt
by the thread's CPU clock (a busy loop on the wall clock would finish while its process waits
for a core, so more processes than cores would look faster than they are). The cpu workload
runs 512 steps: at 128, the batches 16 workers x prefetch 4 had queued were still draining at
the end of the run (per quarter 53.8, 25.5, 22.8, 22.7 ms) and read as its steady figure.

A *plain run* is the script under plain python, no profiler and no stallscope: a small wrapper
applies the settings to DataLoader(...) (as a user editing the line would) and notes the time
each batch is asked for. Its figure is the same steady rule tune uses, on the plain run's own
clock: elapsed from the batch after the warm-up (workers x prefetch_factor queued batches and
4 more) to the end of the last step, over the count. Its cost is the process's wall time.

Figures:
  pick     the plain figure of tune's settings over the grid's best plain figure (head to
           head in --pairs alternating pairs when they differ; goal: within +5%)
  claim    tune's claimed speed-up over the plain reruns' speed-up of the same settings (the
           script as written and tune's pick, --pairs alternating pairs run right after that
           tune, so both are measured under the same load; goal: within 15%), per tune
  cost     tune's wall time over the grid's (sum of its plain runs; goal: at most 40%)
  agree    --tunes runs of tune on the same script keep the same settings or all say
           "within noise"
  fewest   the fewest workers among the grid's settings within 5% of its best (plain
           figures): tune's pick should have no more (issue 31: it kept 16 workers where 2
           were as fast)
  load     the 1-minute load average at each workload's start and end, and per trial (the tune's
           progress lines): the workers' CPU share, others' share of the machine's CPU and the
           trial's run-queue share (core/tune/cpu.py; BUSY: other work took the CPU from it)
tune's settings are the ones its verdict keeps (the confirmed leader, else the script as
written) and its claim the confirmed speed-up (1.00x when it keeps the script's settings).
The grid: num_workers 0, 1, 2, 4, 8, 16 x persistent_workers false/true x prefetch_factor 2/4
(pin_memory does nothing without CUDA, so it is left out on a CPU).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "resources" / "demo" / "train_demo.py"
WORKERS = (0, 1, 2, 4, 8, 16)

CPU_SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

ITEM_S = float(sys.argv[1]) / 1000.0
STEP_S = float(sys.argv[2]) / 1000.0
ITEMS = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
torch.set_num_threads(1)

def burn(seconds):  # CPU time, as a decoder spends it: a worker that waits on a core
    end = time.thread_time() + seconds  # does not get its work done meanwhile
    while time.thread_time() < end:
        pass

class Costly(Dataset):
    def __len__(self):
        return ITEMS
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

IO_SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

SAMPLE_S = float(sys.argv[1]) / 1000.0
SAMPLES = int(sys.argv[2])
torch.set_num_threads(1)

class Remote(Dataset):
    def __len__(self):
        return SAMPLES
    def __getitem__(self, i):
        time.sleep(SAMPLE_S)  # waiting on an object store: off the CPU
        return torch.zeros(16), torch.zeros(1)

model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Remote(), batch_size=8, num_workers=0)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.004)
"""

ITERABLE_SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

SLEEP_S = float(sys.argv[1]) / 1000.0
BURN_S = float(sys.argv[2]) / 1000.0
SAMPLES = int(sys.argv[3])
torch.set_num_threads(1)

class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, SAMPLES, step):  # each worker its own shard
            time.sleep(SLEEP_S)                  # the read
            end = time.thread_time() + BURN_S    # the decode (CPU time)
            while time.thread_time() < end:
                pass
            yield torch.zeros(16), torch.zeros(1)

model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Stream(), batch_size=8, num_workers=0)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.004)
"""

PLAIN = """
import json, os, runpy, sys, time
from torch.utils.data import DataLoader, dataloader

SETTINGS = json.loads(os.environ["BENCH_SET"])
stamps = []
original_init = DataLoader.__init__

def init(self, *args, **kwargs):
    kwargs.update(SETTINGS)
    if not kwargs.get("num_workers"):
        kwargs.pop("prefetch_factor", None)
        kwargs["persistent_workers"] = False
    original_init(self, *args, **kwargs)

original_next = dataloader._BaseDataLoaderIter.__next__

def timed_next(self):
    stamps.append(time.perf_counter())
    return original_next(self)

DataLoader.__init__ = init
dataloader._BaseDataLoaderIter.__next__ = timed_next
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
try:
    runpy.run_path(script, run_name="__main__")
finally:
    end = time.perf_counter()
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump({"stamps": stamps, "end": end}, f)
"""


def grid() -> list[dict]:
    out = [{"num_workers": 0, "persistent_workers": False, "prefetch_factor": None}]
    for workers, persistent, prefetch in itertools.product(WORKERS[1:], (False, True), (2, 4)):
        out.append({"num_workers": workers, "persistent_workers": persistent,
                    "prefetch_factor": prefetch})
    return out


def label(settings: dict) -> str:
    s = {k: v for k, v in settings.items() if k != "pin_memory"}
    if not s.get("num_workers"):
        return "num_workers=0"
    text = f"num_workers={s['num_workers']}"
    if s.get("persistent_workers"):
        text += ", persistent"
    if (s.get("prefetch_factor") or 2) != 2:
        text += f", prefetch={s['prefetch_factor']}"
    return text


def key(settings: dict) -> tuple:
    workers = int(settings.get("num_workers") or 0)
    if not workers:
        return (0, False, 2)
    return (workers, bool(settings.get("persistent_workers")),
            int(settings.get("prefetch_factor") or 2))


def plain_run(script: Path, args: list[str], settings: dict, tmp: Path) -> tuple[float, float]:
    """(steady ms per step, wall seconds) of one plain run with these settings."""
    out = tmp / "plain.json"
    env = {**os.environ, "BENCH_SET": json.dumps({k: v for k, v in settings.items()
                                                  if k != "pin_memory" and v is not None}),
           "BENCH_OUT": str(out)}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, str(tmp / "plain.py"), str(script), *args], env=env,
                          cwd=script.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"plain run {label(settings)} failed:\n{proc.stderr[-2000:]}")
    wall = time.perf_counter() - t
    data = json.loads(out.read_text())
    stamps, end = data["stamps"], data["end"]
    workers, _, prefetch = key(settings)
    first = 1 + workers * prefetch + 4
    if len(stamps) - first < 10:
        first = 1
    return 1e3 * (end - stamps[first]) / (len(stamps) - first), wall


def paired(script: Path, args: list[str], a: dict, b: dict, pairs: int, tmp: Path) -> list:
    """Plain-figure ratios a/b over alternating pairs."""
    ratios = []
    for i in range(pairs):
        order = (a, b) if i % 2 == 0 else (b, a)
        got = {}
        for which in order:
            got[key(which)] = plain_run(script, args, which, tmp)[0]
        ratios.append(got[key(a)] / got[key(b)])
    return ratios


def pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def run_tune(name: str, script: Path, args: list[str], out: Path) -> tuple:
    from stallscope.core.jobs import run_job
    from stallscope.core.tune import TuneConfig, table, tune_job, verdict

    cfg = TuneConfig(script=script, args=args, cwd=script.parent, out=out)
    t = time.perf_counter()
    result = run_job(tune_job(cfg, on_trial=lambda tr, _r: print(
        f"    trial {tr.index} {tr.label}: "
        f"{'-' if tr.step_ms is None else f'{tr.step_ms:.1f} ms'} over {tr.steady_steps} "
        f"steps ({tr.status}, {tr.wall_s or 0:.1f} s; workers on a CPU {pct(tr.worker_cpu)} "
        f"of the time they could run, others {pct(tr.others)} of the CPU, waited "
        f"{pct(tr.steal)}{', BUSY' if tr.busy else ''}; load {os.getloadavg()[0]:.1f})",
        flush=True)))
    seconds = time.perf_counter() - t
    print(table(result))
    print("\n".join(verdict(result)), flush=True)
    return result, seconds


def bench(name: str, script: Path, args: list[str], tmp: Path, tunes: int, pairs: int) -> dict:
    load0 = os.getloadavg()[0]
    print(f"\n== {name}: {script.name} {' '.join(args)}   (load {os.getloadavg()[0]:.1f})",
          flush=True)
    tuned, checks = [], []
    for i in range(tunes):
        print(f"  tune {i + 1}", flush=True)
        tuned.append(run_tune(name, script, args, tmp / f"{name}-tune{i + 1}"))
        # its claim against plain reruns right after it: an I/O-bound pick's 7 ms steps are
        # CPU-bound on 2 cores while the script as written sleeps, so the speed-up moves with
        # the machine's load; reruns minutes later (after the grid) compare two loads
        checks.append(rerun(script, args, tuned[-1][0], pairs, tmp))
        print(f"    claim {checks[-1][0]:.2f}x, plain rerun pairs "
              f"{', '.join(f'{x:.2f}' for x in checks[-1][1])} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    result, tune_s = tuned[0]
    pick = result.kept_trial.settings
    print(f"  grid of {len(grid())} plain runs", flush=True)
    figures, grid_s = {}, 0.0
    for settings in grid():
        ms, wall = plain_run(script, args, settings, tmp)
        figures[key(settings)] = (settings, ms)
        grid_s += wall
        print(f"    {label(settings):<36} {ms:8.1f} ms per step  ({wall:.1f} s)", flush=True)
    best_settings, best_ms = min(figures.values(), key=lambda sm: sm[1])
    fewest = min((key(s)[0] for s, ms in figures.values() if ms <= 1.05 * best_ms))
    if key(best_settings) == key(pick):
        quality = [1.0]
    else:
        quality = paired(script, args, pick, best_settings, pairs, tmp)
    claim, plain_gain = checks[0]
    agree = len({key(r.kept_trial.settings) for r, _ in tuned}) == 1
    print(f"  load average now {os.getloadavg()[0]:.1f}", flush=True)
    return {"name": name, "load": (load0, os.getloadavg()[0]), "tune_s": tune_s,
            "grid_s": grid_s, "pick": label(pick),
            "grid_best": label(best_settings), "grid_best_ms": best_ms,
            "pick_ms_in_grid": figures.get(key(pick), (None, None))[1],
            "quality": statistics.median(quality), "claim": claim,
            "plain": statistics.median(plain_gain), "plain_pairs": plain_gain,
            "decision": result.outcome, "interval": result.interval or result.leader_interval,
            "fewest": fewest, "pick_workers": key(pick)[0],
            "trials": len(result.trials), "agree": agree,
            "picks": [label(r.kept_trial.settings) + f" ({r.outcome})" for r, _ in tuned],
            "claims": [(c, statistics.median(p)) for c, p in checks],
            "climb": next((n for n in result.notes if "CPU" in n or "I/O" in n), ""),
            "notes": result.notes + ([result.busy] if result.busy else []), "result": result}


def rerun(script: Path, args: list[str], result, pairs: int, tmp: Path) -> tuple:
    """(tune's claim, plain-run ratios of the script as written over tune's pick)."""
    pick, base = result.kept_trial.settings, result.baseline_trial.settings
    claim = result.speedup or 1.0  # the confirmed one; keeping the script's settings: 1.0
    if key(pick) == key(base):
        return claim, [1.0]
    return claim, paired(script, args, base, pick, pairs, tmp)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("demo", "cpu", "io", "iterable", "all"),
                   default="all")
    p.add_argument("--tunes", type=int, default=2, help="tune runs per workload (default 2)")
    p.add_argument("--pairs", type=int, default=3,
                   help="alternating pairs of plain runs per head-to-head (default 3)")
    p.add_argument("--item-ms", type=float, default=2.0,
                   help="CPU time of one __getitem__ in the cpu workload (default 2.0)")
    p.add_argument("--step-ms", type=float, default=20.0,
                   help="compute per step in the cpu workload (default 20.0)")
    p.add_argument("--items", type=int, default=8192,
                   help="cpu workload samples (default 8192: 512 steps, about 16 s quiet; "
                        "at 128 steps 16 workers x prefetch 4 never reach steady state)")
    p.add_argument("--sample-ms", type=float, default=5.0,
                   help="sleep of one __getitem__ in the io workload (default 5.0)")
    p.add_argument("--samples", type=int, default=4800, help="io workload samples (4800)")
    p.add_argument("--epochs", type=int, default=12, help="demo epochs (default 12)")
    p.add_argument("--stream-sleep-ms", type=float, default=4.0,
                   help="sleep of one sample in the iterable workload (default 4.0)")
    p.add_argument("--stream-burn-ms", type=float, default=1.0,
                   help="CPU time of one sample in the iterable workload (default 1.0)")
    p.add_argument("--stream-samples", type=int, default=3200,
                   help="iterable workload samples (default 3200)")
    p.add_argument("--background", type=int, default=0, metavar="N",
                   help="N busy-loop processes for the whole bench: a steady background load")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))

    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.background)]
    try:
        rows = bench_all(args)
    finally:
        for b in burners:
            b.kill()
    report(rows, args.background)


def bench_all(args) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="stallscope-bench-tune-") as name:
        tmp = Path(name)
        (tmp / "plain.py").write_text(textwrap.dedent(PLAIN))
        if args.workload in ("io", "all"):
            script = tmp / "io_bound.py"
            script.write_text(textwrap.dedent(IO_SCRIPT))
            rows.append(bench("io", script, [str(args.sample_ms), str(args.samples)], tmp,
                              args.tunes, args.pairs))
        if args.workload in ("iterable", "all"):
            script = tmp / "iterable_sharded.py"
            script.write_text(textwrap.dedent(ITERABLE_SCRIPT))
            rows.append(bench("iterable", script, [str(args.stream_sleep_ms),
                                                   str(args.stream_burn_ms),
                                                   str(args.stream_samples)],
                              tmp, args.tunes, args.pairs))
        if args.workload in ("cpu", "all"):
            script = tmp / "cpu_bound.py"
            script.write_text(textwrap.dedent(CPU_SCRIPT))
            rows.append(bench("cpu", script, [str(args.item_ms), str(args.step_ms),
                                              str(args.items)], tmp, args.tunes, args.pairs))
        if args.workload in ("demo", "all"):
            rows.append(bench("demo", DEMO, ["--epochs", str(args.epochs)], tmp, args.tunes,
                              args.pairs))
    return rows


def report(rows: list, background: int) -> None:
    from stallscope.core.tune import usable_cores

    print(f"\n{usable_cores()} usable cores, load average {os.getloadavg()[0]:.1f} "
          "(a shared machine: figures move with the other work on it)"
          + (f"; {background} busy-loop process(es) ran beside the bench" if background else ""))
    for r in rows:
        there = r["pick_ms_in_grid"]
        print(f"{r['name']} (load {r['load'][0]:.1f} -> {r['load'][1]:.1f}): tune keeps "
              f"{r['pick']} ({r['decision']}; {r['interval'] or '-'}), "
              f"{r['trials']} trials; grid's best {r['grid_best']} "
              f"({r['grid_best_ms']:.1f} ms; tune's pick "
              + ("not in the grid" if there is None else f"{there:.1f} ms there") + ")")
        print(f"   pick {100 * (r['quality'] - 1):+.1f}% vs the grid's best (goal <= +5%)   "
              f"claim {r['claim']:.2f}x vs plain rerun {r['plain']:.2f}x "
              f"({100 * (r['claim'] / r['plain'] - 1):+.0f}%, goal within 15%; pairs "
              f"{', '.join(f'{x:.2f}' for x in r['plain_pairs'])})")
        print(f"   cost {r['tune_s']:.0f} s vs grid {r['grid_s']:.0f} s = "
              f"{100 * r['tune_s'] / r['grid_s']:.0f}% (goal <= 40%)   tunes agree: "
              f"{'yes' if r['agree'] else 'NO'} ({'; '.join(r['picks'])})")
        print("   each tune's claim vs plain reruns right after it: " + "; ".join(
            f"{c:.2f}x vs {p:.2f}x ({100 * (c / p - 1):+.0f}%)" for c, p in r["claims"]))
        print(f"   workers: tune kept {r['pick_workers']}, the fewest within 5% of the grid's "
              f"best: {r['fewest']} ("
              + ("MORE" if r["pick_workers"] > r["fewest"] else
                 "ok" if r["quality"] <= 1.05 else "fewer, but slower") + ")")
        busy = sum(t.busy for t in r["result"].trials)
        print(f"   busy trials (other work took the CPU from them): {busy} of "
              f"{len(r['result'].trials)}")
        for note in r["notes"]:
            print(f"   note: {note}")


if __name__ == "__main__":
    main()
