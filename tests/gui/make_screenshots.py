"""Write PNGs of the main window on real traces (for the README and for looking at them).

    .venv/bin/python tests/gui/make_screenshots.py [OUT_DIR]     (default /tmp/stallscope-shots)

kineto_nw0.png          ResNet-50, num_workers=0: the data-loading-bound trace
kineto_nw0_gap.png      the same, zoomed to the worst data-loading gap, hover line filled in
hta_df_index_resolver.png  V100 trace with allocated/reserved memory
compare_nw0_nw4.png     num_workers 0 -> 4: deltas and both summaries
ranks.png               two ranks of one job (hta_sampled_rank-0/1) in one folder
cpu_only.png            a trace without GPU activity
kineto_nw0_dark.png     the dark theme
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "traces"


def fixture(prefix: str) -> Path:
    return sorted(FIXTURES.glob(prefix + "*"))[0]


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("/tmp/stallscope-shots")
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("STALLSCOPE_CONFIG_DIR", tempfile.mkdtemp(prefix="stallscope-cfg-"))
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from stallscope.gui import theme
    from stallscope.gui.main_window import MainWindow

    theme.apply_theme(app, "light")

    def shot(name: str, path: Path, compare: Path | None = None, after=None) -> None:
        window = MainWindow()
        window.resize(1400, 900)
        window.show()
        window.open_path(str(path))
        window.wait_for_load()
        if compare is not None:
            window.open_compare(str(compare))
            window.wait_for_load()
        if window.messages.level == "error":
            raise SystemExit(f"{name}: {window.messages.text}")
        if after is not None:
            after(window)
        app.processEvents()
        window.grab().save(str(out / name))
        print(out / name)
        window.close()
        window.deleteLater()
        app.processEvents()

    def worst_gap(window) -> None:
        view = window.analysis
        view.show_worst_gap("data_loading")
        report = view.report
        lo, hi = report.worst_gap("data_loading")
        x = ((lo + hi) / 2 - view.timeline.t0_us) / 1000
        view.timeline.set_hover_text(view.timeline.describe_at(x, 1.5))

    nw0 = fixture("kineto_nw0")
    shot("kineto_nw0.png", nw0)
    shot("kineto_nw0_gap.png", nw0, after=worst_gap)
    shot("hta_df_index_resolver.png", fixture("hta_df_index_resolver"))
    shot("compare_nw0_nw4.png", nw0, compare=fixture("kineto_nw4_worker0.1623212756351"))
    with tempfile.TemporaryDirectory() as tmp:
        for r in (0, 1):
            shutil.copy(fixture(f"hta_sampled_rank-{r}"), tmp)
        shot("ranks.png", Path(tmp))
    shot("cpu_only.png", fixture("hta_cpu_only"))
    theme.apply_theme(app, "dark")
    shot("kineto_nw0_dark.png", nw0)
    theme.apply_theme(app, "light")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
