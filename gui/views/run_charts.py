"""The run view's charts: step time and data-wait per step (the profiled window shaded), and
the process's memory per step. Drawn from core/session's StepColumns, one curve per series.

    charts = RunCharts()
    charts.draw(columns)     # after new step events
    charts.reset()           # a plain frame before the first step (no "ms (x0.001)")
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from stallscope.core.session.events import StepColumns
from stallscope.gui.colors import (
    ALLOCATED_COLOR,
    BUSY_COLOR,
    CAUSE_COLORS,
    MUTED_TEXT,
    RESERVED_COLOR,
    qcolor,
)

STEP_COLOR = BUSY_COLOR
WAIT_COLOR = CAUSE_COLORS["data_loading"]
RSS_COLOR = MUTED_TEXT
MB = 1 << 20


class StepAxis(pg.AxisItem):
    """Ticks on whole steps only, never scaled (no "x0.001")."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph API
        ticks = [(sp, vals) for sp, vals in super().tickValues(minVal, maxVal, size) if sp >= 1]
        return ticks or [(1.0, list(np.arange(np.ceil(minVal), np.floor(maxVal) + 1)))]


def swatch(color: str) -> str:
    return f"<span style='color:{color}'>&#9632;</span>"


class RunCharts(pg.GraphicsLayoutWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.step_plot = self.addPlot(row=0, col=0, axisItems={"bottom": StepAxis("bottom")})
        self.step_plot.setTitle(f"{swatch(STEP_COLOR)} step time &nbsp; {swatch(WAIT_COLOR)} "
                                "data-wait &nbsp; (ms per step)", size="10pt")
        self.step_plot.showGrid(y=True, alpha=0.2)
        self.step_plot.setLabel("left", "ms")
        self.window_region = pg.LinearRegionItem(movable=False,
                                                 brush=qcolor(STEP_COLOR, 35),
                                                 pen=pg.mkPen(None))
        self.window_region.setZValue(-10)
        self.step_plot.addItem(self.window_region)
        self.step_curve = self.step_plot.plot(
            [-0.5, 0.5], [0], stepMode="center", fillLevel=0,
            pen=pg.mkPen(STEP_COLOR, width=1.5), brush=pg.mkBrush(QColor(STEP_COLOR).lighter(170)))
        self.wait_curve = self.step_plot.plot(
            [-0.5, 0.5], [0], stepMode="center", fillLevel=0,
            pen=pg.mkPen(WAIT_COLOR, width=1.5), brush=pg.mkBrush(QColor(WAIT_COLOR).lighter(140)))
        self.window_label = pg.TextItem("profiled", color=STEP_COLOR, anchor=(0, 0))
        self.step_plot.addItem(self.window_label)

        self.mem_plot = self.addPlot(row=1, col=0, axisItems={"bottom": StepAxis("bottom")})
        self.mem_plot.setTitle(f"{swatch(RSS_COLOR)} process RSS (MB)", size="10pt")
        self.mem_plot.showGrid(y=True, alpha=0.2)
        self.mem_plot.setLabel("bottom", "step")
        for plot in (self.step_plot, self.mem_plot):
            plot.getAxis("left").enableAutoSIPrefix(False)  # "ms", never "ms (x0.001)"
        self.mem_plot.setXLink(self.step_plot)
        self.rss_curve = self.mem_plot.plot([], [], pen=pg.mkPen(RSS_COLOR, width=1.5))
        self.alloc_curve = self.mem_plot.plot([], [], pen=pg.mkPen(ALLOCATED_COLOR, width=1.5))
        self.reserved_curve = self.mem_plot.plot([], [], pen=pg.mkPen(RESERVED_COLOR, width=1.5))
        for curve in (self.step_curve, self.wait_curve, self.rss_curve, self.alloc_curve,
                      self.reserved_curve):
            curve.setClipToView(True)
        self.ci.layout.setRowStretchFactor(0, 3)
        self.ci.layout.setRowStretchFactor(1, 2)
        self.reset()

    def reset(self) -> None:
        """Before the first step: a plain frame (steps 0..10, 0..100 ms, 0..1000 MB), not an
        auto range around nothing."""
        self._following = False
        self.window_region.setVisible(False)
        self.window_label.setVisible(False)
        for curve in (self.rss_curve, self.alloc_curve, self.reserved_curve):
            curve.setData([], [])
        self.step_curve.setData([-0.5, 0.5], [0])
        self.wait_curve.setData([-0.5, 0.5], [0])
        self.step_curve.setVisible(False)  # nothing to draw yet
        self.wait_curve.setVisible(False)
        self.step_plot.disableAutoRange()
        self.mem_plot.disableAutoRange()
        self.step_plot.setXRange(-0.5, 10.5, padding=0)
        self.step_plot.setYRange(0, 100, padding=0)
        self.mem_plot.setYRange(0, 1000, padding=0)

    def draw(self, s: StepColumns) -> None:
        n = s.n
        if n == 0:
            return
        if not self._following:  # the first steps: the plots follow the data from now on
            self._following = True
            self.step_curve.setVisible(True)
            self.wait_curve.setVisible(True)
            self.step_plot.enableAutoRange()
            self.mem_plot.enableAutoRange()
        edges = np.arange(n + 1, dtype=np.float64) - 0.5  # step k is drawn centred on k
        wall = s["wall_ms"]
        self.step_curve.setData(edges, np.nan_to_num(wall))
        self.wait_curve.setData(edges, np.nan_to_num(s["data_wait_ms"]))
        x = np.arange(n, dtype=np.float64)
        self.rss_curve.setData(x, s["rss"] / MB)
        if np.isfinite(s["cuda_allocated"]).any():
            self.alloc_curve.setData(x, s["cuda_allocated"] / MB)
            self.reserved_curve.setData(x, s["cuda_reserved"] / MB)
            self.mem_plot.setTitle(f"{swatch(RSS_COLOR)} process RSS &nbsp; "
                                   f"{swatch(ALLOCATED_COLOR)} CUDA allocated &nbsp; "
                                   f"{swatch(RESERVED_COLOR)} CUDA reserved (MB)", size="10pt")
        if s.active:
            lo, hi = s.active[0] - 0.5, s.active[-1] + 0.5
            self.window_region.setRegion((lo, hi))
            self.window_region.setVisible(True)
            self.window_label.setPos(lo, float(np.nanmax(wall)))
            self.window_label.setVisible(True)
