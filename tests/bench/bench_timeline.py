"""Timeline benchmark: a real trace tiled to >= 1,000,000 GPU events.

    .venv/bin/python tests/bench/bench_timeline.py [--copies 111] [--keep]

Prints: load and analysis time (core), time to first paint after analysis (lanes built and the
timeline + memory plot rendered offscreen into an image), and the time of zoom/pan redraws
(each one: set the x range, render the plots into an image). Goal: a redraw under 50 ms.
The tiled file is cached in the temp dir between runs (--keep leaves it there).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "gui"))

from trace_tiling import gpu_and_annotations, tile_trace  # noqa: E402

FIXTURE = ROOT.parent / "shared" / "fixtures" / "traces" / \
    "kineto_nw0_worker0.1623143089861.pt.trace.json.gz"
GPU_EVENTS_PER_COPY = 9096


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def timed_cpu(fn):
    """Wall and CPU seconds: on a shared machine CPU time shows the cost without the waiting."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=111)
    parser.add_argument("--keep", action="store_true", help="keep the tiled trace")
    args = parser.parse_args()
    if not FIXTURE.exists():
        print(f"fixture missing: {FIXTURE}")
        return 2
    path = Path(tempfile.gettempdir()) / f"stallscope-bench-tiled{args.copies}.pt.trace.json"
    if not path.exists():
        print(f"tiling {FIXTURE.name} x{args.copies} -> {path} ...", flush=True)
        _, dt = timed(lambda: tile_trace(FIXTURE, path, args.copies, gpu_and_annotations))
        print(f"  tiled in {dt:.1f} s")
    print(f"trace: {path.stat().st_size / 1e6:,.0f} MB")

    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load

    trace, t_load = timed(lambda: load(path))
    report, t_analyze = timed(lambda: analyze(trace))
    import numpy as np

    from stallscope.core.kineto import GPU_CATS

    n_gpu = int(np.isin(trace.cat, np.array(GPU_CATS, dtype=np.int8)).sum())
    dev = next(iter(report.devices))
    print(f"events: {trace.n_events:,} ({n_gpu:,} GPU), steps {len(report.steps)}, "
          f"idle gaps {report.devices[dev].idle_gaps:,}, "
          f"memory samples {len(report.memory[dev].ts):,}")
    print(f"core: load {t_load:.2f} s, analyze {t_analyze:.2f} s")

    from PySide6.QtWidgets import QApplication

    import stallscope.gui  # noqa: F401  (PySide6 workaround)
    from stallscope.gui.app import install_message_filter
    from stallscope.gui.views.timeline import TimelineView

    install_message_filter()
    app = QApplication.instance() or QApplication([])
    view = TimelineView()
    view.resize(1400, 800)
    view.show()
    app.processEvents()

    def first_paint():
        view.set_report(report)
        return view.graphics.grab()

    image, t_first = timed(first_paint)
    image.save(str(Path(tempfile.gettempdir()) / "stallscope-bench-first.png"))
    print(f"first paint after analysis: {1000 * t_first:.0f} ms (lanes built + rendered)")

    span = view.span_ms
    ranges = [(0, span), (0.4 * span, 0.5 * span), (0.45 * span, 0.46 * span),
              (0.455 * span, 0.4551 * span), (0.2 * span, 0.21 * span)]
    for k in range(10):  # pans at a 5% view
        lo = (0.1 + 0.07 * k) * span
        ranges.append((lo, lo + 0.05 * span))
    ranges.append((0, span))
    redraws, cpu = [], []
    for lo, hi in ranges:
        def redraw(lo=lo, hi=hi):
            view.view_box.setXRange(lo, hi, padding=0)
            return view.graphics.grab()

        _, dt, dc = timed_cpu(redraw)
        redraws.append(dt * 1000)
        cpu.append(dc * 1000)
    drawn = {lane.label: sum(lane.last_drawn.values()) for lane in view.lanes}
    print("zoom/pan redraw wall (ms): " + ", ".join(f"{t:.0f}" for t in redraws))
    print("zoom/pan redraw CPU  (ms): " + ", ".join(f"{t:.0f}" for t in cpu))
    print(f"redraw wall median {statistics.median(redraws):.1f} ms, max {max(redraws):.1f} ms; "
          f"CPU median {statistics.median(cpu):.1f} ms, max {max(cpu):.1f} ms (goal < 50 ms)")
    print(f"rectangles drawn at the last (full) view: {drawn}")
    if not args.keep:
        path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
