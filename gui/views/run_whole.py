"""The whole run: step time over every step (decimated to the plot's width, redrawn on zoom),
data wait beneath, epoch starts marked, profiled windows shaded (a click opens that window's
trace), and the run's stalls named with what they cost.

    panel = WholeRunPanel()
    panel.show_record(record, session_path)   # core/session/record.Record
    panel.sig_trace_clicked.connect(open_trace)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QScrollArea, QSplitter, QVBoxLayout, QWidget

from stallscope.core.render.run_text import render_run
from stallscope.core.session.record import Record
from stallscope.core.session.stalls import RunReport, analyze_run, main_loader
from stallscope.core.units import duration
from stallscope.gui.colors import (
    ALLOCATED_COLOR,
    BUSY_COLOR,
    CAUSE_COLORS,
    MUTED_TEXT,
    STEP_EDGE_COLOR,
    qcolor,
)
from stallscope.gui.views.run_charts import StepAxis, swatch
from stallscope.gui.widgets import plain_tooltip

STEP_COLOR = BUSY_COLOR
WAIT_COLOR = CAUSE_COLORS["data_loading"]
EPOCH_COLOR = CAUSE_COLORS["data_loading"]  # an epoch start is a wait on the DataLoader
SAVE_COLOR = STEP_EDGE_COLOR
RSS_COLOR = MUTED_TEXT
MAX_POINTS = 4000  # never more points than this on a curve, whatever the run's length
OUTLIER = 3.0      # a mean over 3x the 95th percentile is drawn off scale, marked


def robust_top(values: np.ndarray) -> tuple[float | None, np.ndarray]:
    """(the y axis's top, the points above it) so that a few outliers (a 34 s first step)
    cannot flatten the rest: None (auto range) when there is no outlier."""
    finite = values[np.isfinite(values)]
    if len(finite) < 3:
        return None, np.zeros(len(values), dtype=bool)
    high = float(np.percentile(finite, 95, method="lower"))
    out = np.isfinite(values) & (values > OUTLIER * high)
    if not out.any() or high <= 0:
        return None, np.zeros(len(values), dtype=bool)
    return 1.15 * float(np.nanmax(np.where(out, np.nan, values))), out


class WindowRegion(pg.LinearRegionItem):
    """A profiled window; a click asks for its trace."""

    def __init__(self, lo: float, hi: float, trace: str, on_click) -> None:
        super().__init__((lo, hi), movable=False, brush=qcolor(STEP_COLOR, 45),
                         pen=pg.mkPen(qcolor(STEP_COLOR, 120)))
        self.trace, self._on_click = trace, on_click
        self.setToolTip(plain_tooltip(f"profiled steps {int(lo + 0.5)}-{int(hi - 0.5)}: click "
                                      f"to open {Path(trace).name}"))
        self.setZValue(-10)

    def mouseClickEvent(self, ev):  # noqa: N802 - pyqtgraph API
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self._on_click(self.trace)


class WholeRunChart(pg.GraphicsLayoutWidget):
    sig_trace_clicked = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.record: Record | None = None
        self.session: Path | None = None
        self.step_plot = self.addPlot(row=0, col=0, axisItems={"bottom": StepAxis("bottom")})
        self.wait_plot = self.addPlot(row=1, col=0, axisItems={"bottom": StepAxis("bottom")})
        self.wait_plot.setTitle(f"{swatch(WAIT_COLOR)} data wait (ms per step)", size="9pt")
        self.wait_plot.setXLink(self.step_plot)
        self.mem_plot = self.addPlot(row=2, col=0, axisItems={"bottom": StepAxis("bottom")})
        self._set_titles(epochs=True, saves=True, rss=True, cuda=True)
        self.mem_plot.setLabel("bottom", "step")
        self.mem_plot.setXLink(self.step_plot)
        for plot in (self.step_plot, self.wait_plot, self.mem_plot):
            plot.showGrid(y=True, alpha=0.2)
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.setMouseEnabled(x=True, y=False)
        self.ci.layout.setRowStretchFactor(0, 3)
        # the step time keeps most of the room; the small plots keep their title and two
        # ticks apart (the memory plot was 15 px high, its labels on each other), the memory
        # plot the step axis too
        for plot in (self.wait_plot, self.mem_plot):
            plot.getAxis("left").setStyle(maxTickLevel=0)  # major ticks only
        self.step_plot.setMinimumHeight(90)
        self._fit_memory(True)
        self.step_plot.getAxis("bottom").setStyle(showValues=False)  # the steps: under the last
        self.rss_curve = self.mem_plot.plot([], [], pen=pg.mkPen(RSS_COLOR, width=1.2))
        self.cuda_curve = self.mem_plot.plot([], [], pen=pg.mkPen(ALLOCATED_COLOR, width=1.2))
        self.max_curve = self.step_plot.plot([], [], pen=pg.mkPen(None),
                                             fillLevel=0,
                                             brush=pg.mkBrush(QColor(STEP_COLOR).lighter(175)))
        self.mean_curve = self.step_plot.plot([], [], pen=pg.mkPen(STEP_COLOR, width=1.5))
        self.wait_curve = self.wait_plot.plot([], [], pen=pg.mkPen(WAIT_COLOR, width=1.2),
                                              fillLevel=0,
                                              brush=pg.mkBrush(QColor(WAIT_COLOR).lighter(150)))
        self.epoch_marks = pg.ScatterPlotItem(symbol="t", size=9, pen=pg.mkPen(None),
                                              brush=pg.mkBrush(EPOCH_COLOR))
        self.step_plot.addItem(self.epoch_marks)
        self.save_marks = pg.ScatterPlotItem(symbol="d", size=8, pen=pg.mkPen(None),
                                             brush=pg.mkBrush(SAVE_COLOR))
        self.step_plot.addItem(self.save_marks)
        self.regions: list[WindowRegion] = []
        self.epochs = np.zeros(0)
        self.saves = np.zeros(0)
        self.off_scale = {}  # plot -> (its up-arrow marks, the text naming the highest)
        for plot in (self.step_plot, self.wait_plot):
            marks = pg.ScatterPlotItem(symbol="t1", size=10, pen=pg.mkPen(None),
                                       brush=pg.mkBrush(MUTED_TEXT))
            text = pg.TextItem("", color=MUTED_TEXT, anchor=(0, 0))
            plot.addItem(marks)
            plot.addItem(text)
            self.off_scale[plot] = (marks, text)
        self.step_plot.sigXRangeChanged.connect(self._redraw)

    MEMORY_FROM = 420  # px of chart from which the memory plot has room beside the others

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if hasattr(self, "mem_plot"):  # Qt resizes it while it is being built
            self._fit_memory(self.height() >= self.MEMORY_FROM)

    def _fit_memory(self, shown: bool) -> None:
        """The memory plot below the others when there is room for it; on a short chart it
        goes (the step time keeps its room) and the data wait plot carries the step axis."""
        for plot, axis in ((self.wait_plot, 0 if shown else 44), (self.mem_plot, 44)):
            plot.setMaximumHeight(88 + axis if shown or plot is self.wait_plot else 0)
            plot.setMinimumHeight(72 + axis if shown or plot is self.wait_plot else 0)
        self.mem_plot.setVisible(shown)
        axis = self.wait_plot.getAxis("bottom")
        axis.setStyle(showValues=not shown)
        if shown:
            axis.showLabel(False)
        else:
            self.wait_plot.setLabel("bottom", "step")

    def _set_titles(self, epochs: bool, saves: bool, rss: bool, cuda: bool) -> None:
        """Legends naming only what the run has (no torch.save or CUDA line on a run without
        either), each with its unit."""
        marks = ((f" &nbsp; {swatch(EPOCH_COLOR)} epoch start" if epochs else "")
                 + (f" &nbsp; {swatch(SAVE_COLOR)} torch.save" if saves else ""))
        self.step_plot.setTitle(f"{swatch(STEP_COLOR)} step time (ms; the light band: the "
                                f"slowest step of each point){marks} &nbsp; shaded: profiled "
                                "(click to open)", size="9pt")
        series = [f"{swatch(RSS_COLOR)} process RSS"] if rss else []
        series += [f"{swatch(ALLOCATED_COLOR)} CUDA allocated"] if cuda else []
        self.mem_plot.setTitle(" &nbsp; ".join(series or ["memory: not recorded"])
                               + (" (MB, the peak of each point)" if series else ""),
                               size="9pt")

    def show_record(self, record: Record, session: Path | None = None) -> None:
        self.record, self.session = record, session
        main = main_loader(record)
        self.epochs = np.array([e.get("n", 0) for e in record.epochs if e.get("loader") == main],
                               dtype=np.float64)
        self.saves = np.array([e.get("n", 0) for e in record.saves], dtype=np.float64)
        every = record.overview(MAX_POINTS)
        self._set_titles(epochs=bool(len(self.epochs)), saves=bool(len(self.saves)),
                         rss=bool(np.isfinite(every["rss_max"]).any()),
                         cuda=bool(np.isfinite(every["cuda_max"]).any()))
        for r in self.regions:
            self.step_plot.removeItem(r)
        self.regions = [WindowRegion(w.first - 0.5, w.last + 0.5, self._trace_path(w.trace),
                                     self.sig_trace_clicked.emit) for w in record.windows]
        for r in self.regions:
            self.step_plot.addItem(r)
        self._redraw(None, None, full=True)
        n = max(record.n_steps, 1)
        self.step_plot.setXRange(-0.5, n - 0.5, padding=0.01)
        self.mem_plot.enableAutoRange(axis="y")

    def _trace_path(self, trace: str) -> str:
        p = Path(trace)
        return str(p if p.is_absolute() or self.session is None else self.session / p)

    def _redraw(self, _view=None, _range=None, full: bool = False) -> None:
        rec = self.record
        if rec is None:
            return
        lo, hi = (None, None) if full else self.step_plot.viewRange()[0]
        width = max(100, int(self.step_plot.width()))
        v = rec.overview(min(MAX_POINTS, width), lo, None if hi is None else hi + 1)
        x = v["x"]
        end = hi + 1 if hi is not None else rec.n_steps
        edges = np.r_[x, max(end, x[-1] + 1) if len(x) else end] - 0.5  # point k spans its steps
        self.max_curve.setData(edges, v["wall_max"], stepMode="center")
        self.mean_curve.setData(edges, v["wall_mean"], stepMode="center")
        self.wait_curve.setData(edges, v["wait_mean"], stepMode="center")
        for curve, key in ((self.rss_curve, "rss_max"), (self.cuda_curve, "cuda_max")):
            y = v[key]
            shown = bool(np.isfinite(y).any())
            curve.setVisible(shown)
            curve.setData(edges if shown else [], y if shown else [],
                          stepMode="center" if shown else None)
        top = self._scale(self.step_plot, edges, v["wall_mean"], v["x"], v["wall_max"])
        self._scale(self.wait_plot, edges, v["wait_mean"], v["x"])
        for marks, at, lift in ((self.epoch_marks, self.epochs, 0.0),
                                (self.save_marks, self.saves, 0.06 * top)):
            if len(at) and len(x):  # on top of the point (bucket) holding the step
                idx = np.clip(np.searchsorted(x, at, side="right") - 1, 0, len(x) - 1)
                marks.setData(at, np.minimum(v["wall_max"][idx], top) + lift)  # saves above
            else:
                marks.setData([], [])

    def _scale(self, plot, edges: np.ndarray, y: np.ndarray, x: np.ndarray,
               band: np.ndarray | None = None) -> float:
        """The plot's y range from its mean curve `y`, robust to outliers (robust_top): those
        are marked with an arrow at the top; the highest point off scale (of `band`, the
        slowest step of each point, when given) is named. Returns the top."""
        marks, text = self.off_scale[plot]
        band = y if band is None else band
        top, out = robust_top(y)
        if top is None:
            top = 1.15 * float(np.nanmax(y)) if len(y) and np.isfinite(y).any() else 0.0
        over = np.isfinite(band) & (band > top)
        if top <= 0 or not over.any():
            plot.enableAutoRange(axis="y")
            marks.setData([], [])
            text.setText("")
            return float(np.nanmax(band)) if len(band) and np.isfinite(band).any() else 0.0
        plot.disableAutoRange(axis="y")
        plot.setYRange(0, top, padding=0)
        centres = (edges[:-1] + edges[1:]) / 2
        marks.setData(centres[out], np.full(int(out.sum()), 0.96 * top))
        worst = int(np.nanargmax(np.where(over, band, np.nan)))
        where = "step" if edges[worst + 1] - edges[worst] <= 1 else "from step"
        more = int(over.sum()) - 1
        text.setText(f"{where} {int(x[worst]):,}: {duration(float(band[worst]) * 1e3)} "
                     f"(off scale{f', and {more:,} more' if more else ''})")
        text.setAnchor((1, 0) if worst > len(centres) / 2 else (0, 0))  # inside the plot
        text.setPos(centres[worst], 0.93 * top)
        return top


class WholeRunPanel(QWidget):
    """The chart above, the stalls (plain text) beneath."""

    sig_trace_clicked = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.chart = WholeRunChart()
        self.chart.setMinimumHeight(280)  # its plots' least heights (no memory plot then)
        self.chart.sig_trace_clicked.connect(self.sig_trace_clicked)
        self.stalls = QLabel("")
        self.stalls.setTextFormat(Qt.TextFormat.PlainText)
        self.stalls.setWordWrap(True)
        self.stalls.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.stalls.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stalls.setContentsMargins(6, 4, 6, 4)
        scroll = QScrollArea()
        scroll.setWidget(self.stalls)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setMinimumHeight(44)  # two lines; the chart takes what is left
        self.summary = QLabel("")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.summary.setStyleSheet(f"color: {MUTED_TEXT};")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.chart)
        split.addWidget(scroll)
        split.setStretchFactor(0, 5)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(split, 1)
        self.report: RunReport | None = None

    def show_record(self, record: Record, session: Path | None = None) -> RunReport:
        self.report = analyze_run(record)
        self.chart.show_record(record, session)
        head, _, body = render_run(self.report).partition("\n\n")
        self.summary.setText(" · ".join(" ".join(line.split()) for line in head.splitlines()))
        self.stalls.setText(body.strip() or "No stall over the whole run.")
        return self.report
