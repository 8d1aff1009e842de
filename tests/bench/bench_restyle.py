"""Restyle benchmark: a theme change and the Streams toggle on a timeline already shown.

    .venv/bin/python tests/bench/bench_restyle.py [--copies 111] [--keep]

On kineto_nw0 and on that trace tiled to >= 1,000,000 GPU events (as bench_timeline.py), prints
the time of a render alone (the baseline), of TimelineView.apply_theme (the timeline's part of
a theme change) alone and followed by a render, of a whole theme change (the app's style sheet,
then every follower, then a render) and of the Streams toggle on and off (each followed by a
render), median of 5, wall and CPU. A theme change only recolours (no lanes, coverage or memory
series rebuilt); the stream sub-lanes are built once, on first demand.
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


def timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000


def median_ms(fn, runs: int = 5) -> str:
    walls, cpus = zip(*(timed(fn) for _ in range(runs)), strict=True)
    return f"{statistics.median(walls):7.1f} ms wall, {statistics.median(cpus):7.1f} ms CPU"


def bench(name: str, path: Path, app) -> None:
    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load
    from stallscope.gui import theme
    from stallscope.gui.views.timeline import TimelineView

    report = analyze(load(path))
    view = TimelineView()
    view.resize(1400, 800)
    view.show()
    view.set_report(report)
    view.graphics.grab()
    modes = iter(["dark", "light"] * 10)

    def theme_change():
        theme.apply_theme(app, next(modes))  # the app's sheet, then every follower
        view.graphics.grab()

    def timeline_restyle():  # the timeline's own part, under the theme already applied
        view.apply_theme()
        view.graphics.grab()

    def streams():
        view.streams_button.toggle()
        view.graphics.grab()

    def render():
        view.graphics.grab()

    def restyle_only():
        view.apply_theme()

    print(f"{name}: {report.trace.n_events:,} events")
    print(f"  render only (no change)    {median_ms(render)}")
    print(f"  timeline.apply_theme alone {median_ms(restyle_only)}")
    print(f"  timeline.apply_theme+render{median_ms(timeline_restyle)}")
    print(f"  theme change, whole app    {median_ms(theme_change)}")
    print(f"  Streams toggle (on or off) {median_ms(streams, 6)}")
    view.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=111)
    parser.add_argument("--keep", action="store_true", help="keep the tiled trace")
    args = parser.parse_args()
    if not FIXTURE.exists():
        print(f"fixture missing: {FIXTURE}")
        return 2
    from PySide6.QtWidgets import QApplication

    import stallscope.gui  # noqa: F401  (PySide6 workaround)
    from stallscope.gui.app import install_message_filter

    install_message_filter()
    app = QApplication.instance() or QApplication([])
    bench("kineto_nw0", FIXTURE, app)
    path = Path(tempfile.gettempdir()) / f"stallscope-bench-tiled{args.copies}.pt.trace.json"
    if not path.exists():
        tile_trace(FIXTURE, path, args.copies, gpu_and_annotations)
    try:
        bench(f"kineto_nw0 tiled x{args.copies}", path, app)
    finally:
        if not args.keep:
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
