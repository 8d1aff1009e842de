"""Timeline: steps, every GPU (busy on top, idle by cause below), streams on demand, the CPU
main thread and the other threads that matter, memory, on one shared time axis.

The rows come from gui/lanes.py (plain numpy); each is ONE LaneItem (gui/views/lane_item.py)
that paints O(width in pixels) rectangles whatever the number of events. x is milliseconds since
the analysis window's start; lanes are rows 0..n-1 of an inverted y axis.

Standalone: `python -m stallscope.gui.views.timeline TRACE [--screenshot OUT.png]`.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from stallscope.core import causes
from stallscope.core.report import Report
from stallscope.gui import hover
from stallscope.gui import lanes as lane_model
from stallscope.gui.colors import (
    BUSY_COLOR,
    CAUSE_COLORS,
    COMM_COLOR,
    NOT_CPU_STATES,
    OTHER_THREAD_COLOR,
    STEP_EDGE_COLOR,
    TEXT_ON_COLOR,
    follow_theme,
    plot_theme,
)
from stallscope.gui.views.lane_item import LaneItem, Layer, StepEdges
from stallscope.gui.views.memory import MemoryPlot
from stallscope.gui.widgets import ElidedLabel, set_rich

LABEL_COLUMN_PX = 130  # the lane labels' column, at least


def _chip(color: str, text: str, tip: str = "") -> str:
    return (f'<span title="{tip}" style="white-space:nowrap"><span style="color:{color};">'
            f'&#9632;</span>&nbsp;{text}</span>')


def legend_html(gpu: bool, threads: bool = True, comm: bool = False) -> str:
    """The lane legend: what each colour means, in the trace's own terms (GPU or CPU-only);
    `comm`: the trace has communication on a device."""
    cpu_states = [c for c in causes.CAUSES if c not in NOT_CPU_STATES]
    if gpu:
        apart = [c for c in causes.CAUSES if c in NOT_CPU_STATES]
        parts = [_chip(BUSY_COLOR, "<b>busy</b>",
                       "each pixel column is filled in proportion to its time: a column the "
                       "GPU was busy 13% of is 13% filled (zoom in for single kernels)")]
        if comm:
            parts.append(_chip(COMM_COLOR, "communication",
                               "collectives (NCCL, RCCL, ...) with no other op running: the "
                               "communication the GPU waits on"))
        parts.append("&nbsp;&nbsp;<b>idle:</b>")
        parts += [_chip(CAUSE_COLORS[c], causes.label(c), causes.BY_CODE[c].description)
                  for c in apart[:1]]
        parts.append("&nbsp;&nbsp;<b>while the CPU was in:</b>")
        parts += [_chip(CAUSE_COLORS[c], causes.label(c), causes.BY_CODE[c].description)
                  for c in cpu_states]
        parts += [_chip(CAUSE_COLORS[c], causes.label(c), causes.BY_CODE[c].description)
                  for c in apart[1:]]
    else:
        parts = ["<b>Main thread in:</b>"]
        parts += [_chip(CAUSE_COLORS[c], causes.label(c)) for c in cpu_states]
        if threads:
            parts.append("&nbsp;&nbsp;" + _chip(OTHER_THREAD_COLOR, "<b>other threads' ops</b>"))
    return " &nbsp;".join(parts)


class TimeViewBox(pg.ViewBox):
    """x-only zoom and pan; shift-drag zooms to a box; double-click fits."""

    sig_fit_requested = Signal()

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph override
        if ev.double() and ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self.sig_fit_requested.emit()
            return
        super().mouseClickEvent(ev)

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 - pyqtgraph override
        shift = bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        self.state["mouseMode"] = self.RectMode if shift else self.PanMode
        super().mouseDragEvent(ev, axis)


class TimelineView(QWidget):
    """Lanes + memory plot on one shared time axis, a legend and a hover line."""

    sig_hover_changed = Signal(str)
    sig_range_changed = Signal(float, float)  # absolute µs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: Report | None = None
        self.t0_us = 0.0
        self.span_ms = 1.0
        self.lanes: list[LaneItem] = []
        self.specs: list[lane_model.LaneSpec] = []
        self._items: dict[str, LaneItem] = {}  # every lane built for the report, by key
        self.hover_text = ""
        self.edges: StepEdges | None = None

        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.streams_button = QToolButton()
        self.streams_button.setText("Streams")
        self.streams_button.setCheckable(True)
        self.streams_button.setToolTip("Show one sub-lane per GPU stream (compute, NCCL, copy)")
        self.streams_button.toggled.connect(self._toggle_streams)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.legend, 1)
        top.addWidget(self.streams_button, 0, Qt.AlignmentFlag.AlignTop)

        self.hover_label = ElidedLabel(" ")

        self.graphics = pg.GraphicsLayoutWidget()
        self.view_box = TimeViewBox()
        self.view_box.invertY(True)
        self.view_box.setMouseEnabled(x=True, y=False)
        self.plot = pg.PlotItem(viewBox=self.view_box)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.plot.getAxis("left").setWidth(LABEL_COLUMN_PX)
        self.plot.getAxis("bottom").setStyle(showValues=False)
        self.memory = MemoryPlot()
        self.memory.setXLink(self.plot)
        self.graphics.addItem(self.plot, row=0, col=0)
        self.graphics.addItem(self.memory, row=1, col=0)
        self.colors = plot_theme()
        self._style_plots()
        follow_theme(self.apply_theme)

        self.view_box.sig_fit_requested.connect(self.fit)
        self.view_box.sigXRangeChanged.connect(self._emit_range)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.hover_label)
        layout.addWidget(self.graphics, 1)

    # ------------------------------------------------------------------ building

    def _style_plots(self) -> None:
        c = self.colors
        self.graphics.setBackground(c["bg"])
        self.hover_label.setStyleSheet(f"color: {c['dim']};")
        for item in (self.plot, self.memory):
            for axis in ("left", "bottom"):
                item.getAxis(axis).setTextPen(c["text"])
                item.getAxis(axis).setPen(c["fg"])

    def apply_theme(self, _name: str = "") -> None:
        """Restyle for the app's current theme: recolour what is shown (plots, lane colours,
        memory legend), keeping the lanes' data, the report and the visible range."""
        self.colors = plot_theme()
        self._style_plots()
        for item in self._items.values():
            item.restyle({ls.key: self._color(ls.color) for ls in item.spec.layers},
                         self._text_color(item.spec))
        self.memory.restyle(self.colors)

    def _toggle_streams(self, *_args) -> None:
        """Add or drop the stream sub-lanes: the other lanes keep their items and only move."""
        if self.report is not None:
            x_range = self.view_box.viewRange()[0]
            self._lay_out(self.report)
            self.view_box.setXRange(*x_range, padding=0)

    def clear(self) -> None:
        for item in self.lanes + ([self.edges] if self.edges is not None else []):
            self.plot.removeItem(item)
        self.lanes = []
        self.specs = []
        self._items = {}
        self.edges = None
        self.memory.clear_memory()
        self.report = None

    def set_report(self, report: Report) -> None:
        """Build every lane of `report` (a core.analysis.Report)."""
        self.clear()
        self.report = report
        lo, hi = (float(v) for v in report.window)
        self.t0_us = lo
        self.span_ms = max((hi - lo) / 1000.0, 1e-3)
        self.streams_button.setVisible(bool(report.devices))
        self._lay_out(report)
        self.memory.set_memory(report.memory, self.t0_us, self.span_ms, self.colors)
        self._show_memory_plot(bool(self.memory.lines))
        self.fit()

    def _lay_out(self, report: Report) -> None:
        """The rows of the report (with or without streams), top to bottom: a lane already
        built for this report is moved, not rebuilt."""
        self.specs = lane_model.build_lanes(report, streams=self.streams_button.isChecked())
        comm = any(len(spec.extra.get("comm", ())) for spec in self.specs)
        # Our own labels and colours only: trusted markup.
        set_rich(self.legend, legend_html(bool(report.devices),
                                          any(s.kind == "thread" for s in self.specs), comm))
        tops = np.concatenate([[0.0], np.cumsum([spec.height for spec in self.specs])])
        for item in self.lanes + ([self.edges] if self.edges is not None else []):
            self.plot.removeItem(item)
        self.lanes = []
        for row, spec in enumerate(self.specs):
            kept = self._items.get(spec.key)
            item = kept if kept is not None and kept.spec is spec else \
                self._lane_item(report, row, spec, float(tops[row]))
            self._items[spec.key] = item
            item.move_to(row, float(tops[row]))
            self.lanes.append(item)
            self.plot.addItem(item)
        n = float(tops[-1]) or 1.0
        self.edges = None
        if report.steps:
            lo = self.t0_us
            edges = [(s.start_us - lo) / 1000.0 for s in report.steps]
            edges.append((report.steps[-1].start_us + report.steps[-1].dur_us - lo) / 1000.0)
            self.edges = StepEdges(np.array(edges), n, STEP_EDGE_COLOR)
            self.plot.addItem(self.edges)
        self.plot.getAxis("left").setTicks([[(lane.y + lane.h / 2, lane.label)
                                             for lane in self.lanes], []])
        self._fit_label_column()
        self.view_box.setLimits(xMin=-0.05 * self.span_ms, xMax=1.05 * self.span_ms,
                                minXRange=1e-4, yMin=0, yMax=n, minYRange=n, maxYRange=n)
        self.view_box.setYRange(0, n, padding=0)

    def _fit_label_column(self) -> None:
        """Room for the longest lane label ("stream 108 · communication"): the axis drops a
        label it cannot fit. The memory plot's axis keeps the same width, so x lines up."""
        axis = self.plot.getAxis("left")
        metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
        need = max((metrics.horizontalAdvance(lane.label) for lane in self.lanes), default=0)
        width = max(LABEL_COLUMN_PX, need + 16)
        axis.setWidth(width)
        self.memory.getAxis("left").setWidth(width)

    def _show_memory_plot(self, shown: bool) -> None:
        """Without memory samples there is no memory plot (no empty panel): the lanes carry
        the time axis themselves."""
        in_layout = self.memory in self.graphics.ci.items
        if shown and not in_layout:
            self.graphics.addItem(self.memory, row=1, col=0)
        elif not shown and in_layout:
            self.graphics.removeItem(self.memory)
        self.memory.setVisible(shown)
        axis = self.plot.getAxis("bottom")
        axis.setStyle(showValues=not shown)
        axis.setLabel(None if shown else "time since window start (ms)")
        if shown:
            self.graphics.ci.layout.setRowStretchFactor(0, 3)
            self.graphics.ci.layout.setRowStretchFactor(1, 2)

    def _color(self, color: str) -> str:
        """A layer's colour under the current theme (the steps' tints come from the theme)."""
        return self.colors["steps"][int(color[-1])] if color.startswith("steps:") else color

    def _text_color(self, spec: lane_model.LaneSpec) -> str:
        return TEXT_ON_COLOR if spec.kind == "thread" else self.colors["text"]

    def _lane_item(self, report: Report, row: int, spec: lane_model.LaneSpec,
                   y: float) -> LaneItem:
        layers = [Layer(ls.key, ls.intervals[:, 0], ls.intervals[:, 1], self._color(ls.color),
                        top=ls.band[0], height=ls.band[1], from_top=ls.from_top)
                  for ls in spec.layers]
        item = LaneItem(row, spec.label, layers, spec.kind,
                        hover.describer(spec, report.trace, self.t0_us),
                        texts=spec.texts, text_color=self._text_color(spec), key=spec.key, y=y,
                        height=spec.height)
        item.spec = spec
        item.device = spec.device
        if spec.kind == "gpu":
            item.gaps = spec.extra["gaps"]
        return item

    # ------------------------------------------------------------------ navigation

    def fit(self) -> None:
        self.view_box.setXRange(0.0, self.span_ms, padding=0.01)

    def zoom_to(self, lo_us: float, hi_us: float, pad: float = 0.15) -> None:
        """Show [lo_us, hi_us] (absolute µs) with some context around it."""
        lo, hi = (lo_us - self.t0_us) / 1000.0, (hi_us - self.t0_us) / 1000.0
        width = max(hi - lo, 1e-3)
        self.view_box.setXRange(lo - pad * width, hi + pad * width, padding=0)

    def zoom_to_step(self, index: int) -> None:
        if self.report is None or not (0 <= index < len(self.report.steps)):
            return
        step = self.report.steps[index]
        self.zoom_to(step.start_us, step.start_us + step.dur_us, pad=0.02)

    def x_range_us(self) -> tuple[float, float]:
        lo, hi = self.view_box.viewRange()[0]
        return self.t0_us + lo * 1000.0, self.t0_us + hi * 1000.0

    def _emit_range(self, *_args) -> None:
        lo, hi = self.x_range_us()
        self.sig_range_changed.emit(lo, hi)

    def lane(self, key: str) -> LaneItem | None:
        return next((lane for lane in self.lanes if lane.key == key), None)

    # ------------------------------------------------------------------ hover

    def row_at(self, y: float) -> int | None:
        """Index of the lane at y (lane units), or None."""
        for r, lane in enumerate(self.lanes):
            if lane.y <= y < lane.y + lane.h:
                return r
        return None

    def describe_at(self, x_ms: float, y: float) -> str:
        r = self.row_at(y)
        if r is not None:
            text = self.lanes[r].describe(x_ms)
            if text:
                return f"{hover.fmt_ms(x_ms)}  |  {text}"
            return f"{hover.fmt_ms(x_ms)}  |  {self.lanes[r].label.strip()}: nothing here"
        return hover.fmt_ms(x_ms)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        if self.report is None:
            return
        if self.plot.sceneBoundingRect().contains(pos):
            point = self.view_box.mapSceneToView(pos)
            text = self.describe_at(point.x(), point.y())
        elif self.memory.sceneBoundingRect().contains(pos):
            point = self.memory.getViewBox().mapSceneToView(pos)
            here = self.memory.describe(point.x()) or "no memory data"
            text = f"{hover.fmt_ms(point.x())}  |  {here}"
        else:
            return
        self.set_hover_text(text)

    def set_hover_text(self, text: str) -> None:
        self.hover_text = text
        self.hover_label.setText(text)
        self.sig_hover_changed.emit(text)


def run_standalone(argv: list[str] | None = None) -> int:
    """`python -m stallscope.gui.views.timeline TRACE`: load, analyse, show the timeline."""
    from stallscope.gui.standalone import show_view

    def build(reports):
        view = TimelineView()
        view.set_report(reports[0])
        return view

    return show_view(build, "Show the timeline of one trace.", size=(1400, 700), argv=argv)


if __name__ == "__main__":
    raise SystemExit(run_standalone())
