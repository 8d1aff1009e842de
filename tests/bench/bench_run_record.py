"""The whole-run record at a million steps: what writing a step costs the training loop, the
file's size, reading and analysing it, and the run view drawing and zooming it.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_run_record.py [--steps N]

Steps go through the runner's own writer (capture/record.RunRecord.step, as the EventLog calls
it), with an epoch start every 1,000 steps and a torch.save every 5,000.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def write(path: Path, steps: int) -> tuple[float, list[dict]]:
    from stallscope.core.capture.record import RunRecord

    events: list[dict] = []
    rec = RunRecord(path, lambda kind, **f: events.append({"event": kind, **f}))
    rng = np.random.default_rng(1)
    wall = rng.gamma(20, 0.5, steps) + np.linspace(0, 3, steps)  # ~10 ms, slowly growing
    loader = type("Loader", (), {"num_workers": 8, "persistent_workers": False})()
    it = type("Iterator", (), {"_stallscope_site": "train.py:40"})()
    clock = time.perf_counter
    t0 = time.perf_counter()
    for n in range(steps):
        pause = 0.8 if n % 1000 == 0 else 0.0
        w = (float(wall[n]) + pause * 1e3) / 1e3
        t = clock()
        if pause:  # an epoch start, through the record's own hooks
            rec.iterator_started(loader, it, t - w)
        rec.fetched(it, t - w, t - w + 0.001 + pause, True)  # the batch came first
        rec.step({"wall_ms": w * 1e3, "data_wait_ms": 1.0 + pause * 1e3, "batches": 1,
                  "phase": "wait", "rss": 900 << 20})
    took = time.perf_counter() - t0
    rec.close()
    return took, events


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    args = ap.parse_args()
    from stallscope.core.session.record import read_record
    from stallscope.core.session.stalls import analyze_run

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "record.bin"
        took, events = write(path, args.steps)
        size = path.stat().st_size
        print(f"write   {args.steps:,} steps in {took:.2f} s = {took / args.steps * 1e6:.2f} µs "
              f"a step (struct pack + one write())")
        print(f"size    {size / 2**20:.2f} MiB ({size / args.steps:.2f} B a step)")
        t = time.perf_counter()
        rec = read_record(path)
        rec.epochs = [e for e in events if e["event"] == "epoch"]
        rec.loaders = {0: "train.py:40"}
        print(f"read    {(time.perf_counter() - t) * 1e3:.1f} ms ({rec.n_steps:,} steps, "
              f"{len(rec.blocks)} blocks, {len(rec.steps):,} at full resolution)")
        t = time.perf_counter()
        for _ in range(10):
            rec.overview(2000)
        print(f"overview(2000) {(time.perf_counter() - t) * 100:.2f} ms")
        t = time.perf_counter()
        run = analyze_run(rec)
        print(f"analyze {(time.perf_counter() - t) * 1e3:.1f} ms; stalls:")
        for s in run.stalls:
            print(f"        {s.title}")

        from PySide6.QtWidgets import QApplication

        app = QApplication.instance() or QApplication(sys.argv[:1])
        from stallscope.gui.views.run_whole import WholeRunPanel

        panel = WholeRunPanel()
        panel.resize(1400, 700)
        panel.show()
        app.processEvents()
        t = time.perf_counter()
        panel.show_record(rec)
        app.processEvents()
        panel.chart.repaint()
        print(f"draw    {(time.perf_counter() - t) * 1e3:.1f} ms (show_record + first paint)")
        plot = panel.chart.step_plot
        times = []
        for lo, hi in ((0, 1e6), (400_000, 600_000), (990_000, 1_000_000), (10, 60),
                       (0, 1e6)):
            t = time.perf_counter()
            plot.setXRange(lo * args.steps / 1e6, hi * args.steps / 1e6, padding=0)
            app.processEvents()
            panel.chart.repaint()
            times.append((time.perf_counter() - t) * 1e3)
        print("zoom    " + ", ".join(f"{x:.1f}" for x in times) + " ms per zoom (redraw + "
              f"paint); points drawn <= {len(panel.chart.mean_curve.getData()[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
