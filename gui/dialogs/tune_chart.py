"""The tune dialog's chart: step time per trial (bars), its data wait (narrow bars inside), the
best in green, the script as written in grey, failed or skipped trials as red crosses."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from stallscope.core.tune.trial import Trial
from stallscope.gui.colors import (
    BETTER_COLOR,
    BUSY_COLOR,
    CAUSE_COLORS,
    MUTED_TEXT,
    WORSE_COLOR,
    plot_theme,
    qcolor,
)

WAIT_COLOR = CAUSE_COLORS["data_loading"]


class TrialAxis(pg.AxisItem):
    """Whole trial numbers only."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        lo, hi = int(np.ceil(max(minVal, 1))), int(np.floor(maxVal))
        return [(1.0, [float(v) for v in range(lo, hi + 1)])]


class TuneChart(pg.PlotWidget):
    """Step time per trial (bars), its data wait (narrow bars inside), the best in green,
    failed trials as red crosses on the axis."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, axisItems={"bottom": TrialAxis("bottom")})
        theme = plot_theme()
        self.setBackground(theme["bg"])
        self.setMenuEnabled(False)
        self.setMouseEnabled(False, False)
        self.hideButtons()
        self.showGrid(y=True, alpha=0.2)
        self.setLabel("left", "ms per step")
        self.setLabel("bottom", "trial")
        self.getAxis("left").enableAutoSIPrefix(False)
        self.steps = pg.BarGraphItem(x=[], height=[], width=0.7)
        self.waits = pg.BarGraphItem(x=[], height=[], width=0.3, brush=qcolor(WAIT_COLOR),
                                     pen=pg.mkPen(None))
        self.failed = pg.ScatterPlotItem(symbol="x", size=14, pen=pg.mkPen(WORSE_COLOR, width=2),
                                         brush=qcolor(WORSE_COLOR))
        for item in (self.steps, self.waits, self.failed):
            self.addItem(item)
        self.labels: list[pg.TextItem] = []
        self.setXRange(0.4, 6.6, padding=0)
        self.setYRange(0, 100, padding=0)

    def set_trials(self, trials: list[Trial], best: int | None, baseline: int | None,
                   done: bool = False) -> None:
        """`best`: the trial the verdict keeps (green only when it is not the script as
        written: keeping the script's settings is no better setting); `done`: the tune is
        over, so no room is kept for trials to come."""
        ok = [t for t in trials if t.ok and t.step_ms is not None]
        x = np.array([t.index for t in ok], dtype=float)
        step = np.array([t.step_ms for t in ok], dtype=float)
        wait = np.array([t.data_wait_ms or 0.0 for t in ok], dtype=float)
        # the script as written is grey each time it runs (the noise check repeats it)
        brushes = [qcolor(BETTER_COLOR) if t.index == best and t.changes else
                   qcolor(MUTED_TEXT) if t.index == baseline or not t.changes
                   else qcolor(BUSY_COLOR) for t in ok]
        self.steps.setOpts(x=x, height=step, brushes=brushes, pen=pg.mkPen(None))
        self.waits.setOpts(x=x, height=wait)
        bad = [t.index for t in trials if not t.ok]
        self.failed.setData(x=np.array(bad, dtype=float), y=np.zeros(len(bad)))
        for label in self.labels:
            self.removeItem(label)
        self.labels = []
        for t in ok:
            assert t.step_ms is not None  # an OK trial measured its step time
            # step times only: a speed-up is the verdict's, confirmed in pairs (issue 31)
            text = f"{t.step_ms:.0f} ms"
            label = pg.TextItem(text, color=plot_theme()["text"], anchor=(0.5, 1.0))
            label.setPos(t.index, t.step_ms)
            self.addItem(label)
            self.labels.append(label)
        top = float(step.max()) if len(step) else 100.0
        slots = len(trials) if done else max(6, len(trials))
        self.setXRange(0.4, max(slots, 1) + 0.6, padding=0)
        self.setYRange(0, top * 1.3, padding=0)
