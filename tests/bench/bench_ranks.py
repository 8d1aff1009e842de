"""Benchmark: a generated 64-rank job analysed serially, on the local pool, and on a Dask
LocalCluster, each through `stallscope-cli analyze RUN_DIR --json` in a fresh process.

    .venv/bin/python tests/bench/bench_ranks.py [--ranks 64] [--repeat 8] [--workers 2]
                                                [--rounds 1] [--job DIR] [--no-dask]

Measures: wall time serial (--workers 1) vs pool (--workers N), alternating, median of
`rounds` pairs; the peak RSS of the whole process tree (the CLI and its workers, sampled every
20 ms with psutil) against workers x one trace's peak (a fresh process analysing the largest
rank) + 200 MB; that pool, serial and LocalCluster print the identical JSON; and that the
injected slow rank is named as the straggler with data loading as its cause. CPU seconds of
the process tree and the cores they average over show what the pool got on a shared machine.
Goals: speed-up >= 1.7x on 2 cores; peak RSS within the bound; identical JSON; straggler named.
The machine may be shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "traces"
CLI = [sys.executable, "-m", "stallscope.core.cli", "analyze"]
SLACK_MB = 200


def tree_peak(cmd: list[str]) -> tuple[float, int, str, str, float]:
    """Run cmd; (seconds, peak RSS of it and all its descendants in bytes, stdout, stderr,
    CPU seconds of the tree as last sampled)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0]
    cpu: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        try:
            root = psutil.Process(proc.pid)
        except psutil.NoSuchProcess:
            return
        while not stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:
                    total += p.memory_info().rss
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            peak[0] = max(peak[0], total)
            stop.wait(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    secs = time.perf_counter() - t0
    stop.set()
    t.join()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err.decode()[-2000:]}")
    return secs, peak[0], out.decode(), err.decode(), sum(cpu.values())


def one_trace_peak(path: Path) -> int:
    """Peak RSS of a fresh process that analyses one rank (load + analysis + summary)."""
    code = ("import resource, sys\n"
            "from stallscope.core.ranks.tasks import analyze_rank\n"
            "r = analyze_rank(sys.argv[1])\n"
            "assert type(r).__name__ == 'RankSummary', r\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip()) * 1024


def make(folder: Path, ranks: int, repeat: int, slow: int) -> list[Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the job generator
    from synth import make_job

    marker = folder / "bench_job.json"
    want = {"ranks": ranks, "repeat": repeat, "slow": slow}
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return sorted(folder.glob("rank*.pt.trace.json.gz"))
    for old in folder.glob("rank*.pt.trace.json.gz"):
        old.unlink()
    t0 = time.perf_counter()
    job = make_job(folder, ranks, FIXTURES / "hta_sampled_rank-0.json.gz", repeat=repeat,
                   slow_rank=slow, slow_us=20_000.0, jitter_us=300.0, seed=1)
    marker.write_text(json.dumps(want))
    print(f"generated {ranks} ranks x {repeat} tiles in {time.perf_counter() - t0:.1f} s")
    return job.paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--job", type=Path, help="folder for the generated job (kept, reused)")
    ap.add_argument("--no-dask", action="store_true")
    a = ap.parse_args()
    slow = a.ranks * 2 // 3
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    tmp = None
    if a.job is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_ranks_")
        a.job = Path(tmp.name)
    a.job.mkdir(parents=True, exist_ok=True)
    paths = make(a.job, a.ranks, a.repeat, slow)
    sizes = [p.stat().st_size for p in paths]
    print(f"job: {len(paths)} ranks, {sum(sizes) / 2**20:,.0f} MiB gzip'd, in {a.job}")

    one = one_trace_peak(max(paths, key=lambda p: p.stat().st_size))
    serial_t, pool_t, serial_cpu, pool_cpu, outs = [], [], [], [], {}
    pool_peak = serial_peak = 0
    for _ in range(a.rounds):
        t, peak, outs["serial"], _, c = tree_peak([*CLI, str(a.job), "--json", "--workers", "1"])
        serial_t.append(t)
        serial_cpu.append(c)
        serial_peak = max(serial_peak, peak)
        t, peak, outs["pool"], _, c = tree_peak([*CLI, str(a.job), "--json", "--workers",
                                                str(a.workers)])
        pool_t.append(t)
        pool_cpu.append(c)
        pool_peak = max(pool_peak, peak)
    s, p = statistics.median(serial_t), statistics.median(pool_t)
    bound = a.workers * one + SLACK_MB * 2**20
    sc, pc = statistics.median(serial_cpu), statistics.median(pool_cpu)
    print(f"serial  {s:6.2f} s  (runs {', '.join(f'{x:.2f}' for x in serial_t)}), "
          f"CPU {sc:.1f} s = {sc / s:.2f} cores, tree peak RSS {serial_peak / 2**20:,.0f} MiB")
    print(f"pool    {p:6.2f} s  (runs {', '.join(f'{x:.2f}' for x in pool_t)}), "
          f"{a.workers} workers, CPU {pc:.1f} s = {pc / p:.2f} cores, tree peak RSS "
          f"{pool_peak / 2**20:,.0f} MiB")
    print(f"speed-up {s / p:.2f}x (goal >= 1.7x): {'ok' if s / p >= 1.7 else 'MISSED'}")
    print(f"one trace's peak {one / 2**20:,.0f} MiB; bound {a.workers} x that + {SLACK_MB} MiB "
          f"= {bound / 2**20:,.0f} MiB: {'ok' if pool_peak <= bound else 'MISSED'}")

    if not a.no_dask:
        from distributed import LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=a.workers, processes=False,
                          protocol="tcp", dashboard_address=None) as cluster:
            t, _, outs["dask"], _, _ = tree_peak([*CLI, str(a.job), "--json", "--scheduler",
                                               cluster.scheduler_address])
        print(f"dask    {t:6.2f} s  (LocalCluster, 1 worker x {a.workers} threads, in-process)")
    same = all(o == outs["pool"] for o in outs.values())
    print(f"identical JSON ({', '.join(outs)}): {'ok' if same else 'MISSED'}")

    doc = json.loads(outs["pool"])
    slowest = doc["stragglers"]["slowest"]
    named = slowest["rank"] == f"rank {slow}" and slowest["cause"] == "data_loading"
    print(f"straggler: {slowest['text']}")
    print(f"injected rank {slow} (data loading +20 ms/step) named: {'ok' if named else 'MISSED'}")
    print(f"load average after: {os.getloadavg()}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
