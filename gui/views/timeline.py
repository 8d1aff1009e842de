"""Timeline: steps, per-GPU busy/idle lanes coloured by cause, CPU main-thread phases, memory.

Rendering follows Tracy: every lane is ONE graphics item that paints rectangles straight from
numpy arrays. Each lane keeps a small level-of-detail pyramid (the intervals with gaps below
g, 4g, 16g, ... merged, built once); a paint picks the level just under 3 px, takes the visible
slice with `np.searchsorted` and merges what is closer than 3 px. A paint therefore draws
O(width in pixels) rectangles whatever the number of events.

x is milliseconds since the analysis window's start (so axis labels read 0 … 1234 ms, never
raw µs epoch numbers); lanes are rows 0..n-1 of an inverted y axis.

Standalone: `python -m stallscope.gui.views.timeline TRACE`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from stallscope.core import intervals as iv
from stallscope.gui.colors import (
    BUSY_COLOR,
    CAUSE_COLORS,
    CAUSE_ORDER,
    cause_label,
    follow_theme,
    plot_theme,
    qcolor,
    tint,
)
from stallscope.gui.views.memory import MemoryPlot

MERGE_PX = 3.0
DENSITY_LEVELS = 5
PHASE_ORDER = ("data_loading", "cpu_ops", "optimizer", "sync")
PHASE_LABELS = {"data_loading": "CPU data loading", "cpu_ops": "CPU ops",
                "optimizer": "CPU optimizer", "sync": "CPU sync"}


# ----------------------------------------------------------------------------- interval math


def merge_close(starts: np.ndarray, ends: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge consecutive sorted, non-overlapping intervals separated by less than `gap`."""
    if len(starts) < 2 or gap <= 0:
        return starts, ends
    keep = (starts[1:] - ends[:-1]) >= gap
    first = np.empty(int(keep.sum()) + 1, dtype=np.int64)
    first[0] = 0
    first[1:] = np.flatnonzero(keep) + 1
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(starts) - 1
    return starts[first], ends[last]


class IntervalPyramid:
    """Level-of-detail copies of one lane: level k has every gap below base * 4**k merged."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.set = iv.union(iv.as_intervals(starts, ends))
        self.starts, self.ends = self.set[:, 0].copy(), self.set[:, 1].copy()
        self.levels: list[tuple[float, np.ndarray, np.ndarray]] = [(0.0, self.starts, self.ends)]
        if len(self.starts) > 256:
            span = float(self.ends[-1] - self.starts[0])
            gap = span / 4_000_000.0
            s, e = self.starts, self.ends
            while len(s) > 256 and gap < span:
                s, e = merge_close(s, e, gap)
                self.levels.append((gap, s, e))
                gap *= 4.0

    def __len__(self) -> int:
        return len(self.starts)

    def visible(self, lo: float, hi: float, merge: float) -> tuple[np.ndarray, np.ndarray]:
        """Intervals overlapping [lo, hi], gaps below `merge` closed."""
        level = 0
        for i, (gap, _, _) in enumerate(self.levels):
            if gap <= merge:
                level = i
        _, s, e = self.levels[level]
        i0 = int(np.searchsorted(e, lo, "left"))
        i1 = int(np.searchsorted(s, hi, "right"))
        return merge_close(s[i0:i1], e[i0:i1], merge)

    def density(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Fraction of each [s, e] the original intervals cover (1 for unmerged ones)."""
        width = e - s
        return np.divide(iv.measure_in(self.set, s, e), width, out=np.ones_like(width),
                         where=width > 0)


# ----------------------------------------------------------------------------- lane item


class Layer:
    """One colour inside a lane: a pyramid of intervals drawn at a fraction of the row height."""

    def __init__(self, key: str, starts, ends, color: str, alpha: int = 255,
                 height: float = 0.8) -> None:
        self.key = key
        self.pyramid = IntervalPyramid(starts, ends)
        # Merged blocks are drawn paler the less of them the intervals really cover, so a
        # zoomed-out lane that is 57% busy does not look 100% busy.
        # Never fainter than 30%: a lone sub-pixel event must still show.
        self.brushes = [QBrush(qcolor(color, round(alpha * (0.3 + 0.7 * (k + 1) / DENSITY_LEVELS))))
                        for k in range(DENSITY_LEVELS)]
        self.height = height


class LaneItem(pg.GraphicsObject):
    """ONE graphics item per lane, painting its layers from numpy arrays."""

    def __init__(self, row: int, label: str, layers: Sequence[Layer], kind: str,
                 describe: Callable[[float], str | None] | None = None,
                 texts: tuple[np.ndarray, np.ndarray, Sequence[str]] | None = None,
                 text_color: str = "#212529") -> None:
        super().__init__()
        self.row = row
        self.label = label
        self.kind = kind
        self.layers = list(layers)
        self.texts = texts  # (starts, ends, names), drawn where they fit
        self.text_pen = QPen(qcolor(text_color))
        self._describe = describe
        self.last_drawn: dict[str, int] = {}
        lo = min((float(ly.pyramid.starts[0]) for ly in self.layers if len(ly.pyramid)),
                 default=0.0)
        hi = max((float(ly.pyramid.ends[-1]) for ly in self.layers if len(ly.pyramid)),
                 default=1.0)
        self._bounds = QRectF(lo, row, max(hi - lo, 1e-9), 1.0)
        self.setFlag(self.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def layer(self, key: str) -> Layer:
        return next(ly for ly in self.layers if ly.key == key)

    def describe(self, x_ms: float) -> str | None:
        return self._describe(x_ms) if self._describe is not None else None

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._bounds

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph hook
        self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        px_per_ms = abs(painter.transform().m11())
        if px_per_ms <= 0:
            return
        view = self.viewRect()
        lo, hi = (view.left(), view.right()) if view is not None else (
            self._bounds.left(), self._bounds.right())
        merge = MERGE_PX / px_per_ms
        min_w = 1.0 / px_per_ms
        painter.setPen(Qt.PenStyle.NoPen)
        for layer in self.layers:
            s, e = layer.pyramid.visible(lo, hi, merge)
            self.last_drawn[layer.key] = len(s)
            if not len(s):
                continue
            s = np.maximum(s, lo - min_w)
            w = np.maximum(np.minimum(e, hi + min_w) - s, min_w)
            top = self.row + (1.0 - layer.height) / 2.0
            level = np.ceil(layer.pyramid.density(s, s + w) * DENSITY_LEVELS).astype(np.int64)
            level = np.clip(level, 1, DENSITY_LEVELS) - 1
            for k in np.unique(level).tolist():
                pick = level == k
                painter.setBrush(layer.brushes[k])
                painter.drawRects([QRectF(x, top, ww, layer.height) for x, ww in
                                   zip(s[pick].tolist(), w[pick].tolist(), strict=True)])
        if self.texts is not None:
            self._paint_texts(painter, lo, hi, px_per_ms)

    def _paint_texts(self, painter: QPainter, lo: float, hi: float, px_per_ms: float) -> None:
        """Step names centred in their step when they fit (never per-event items)."""
        starts, ends, names = self.texts
        i0 = int(np.searchsorted(ends, lo, "left"))
        i1 = int(np.searchsorted(starts, hi, "right"))
        if i1 <= i0:
            return
        font = QFont(painter.font())
        font.setPointSizeF(8.5)
        metrics = QFontMetrics(font)
        transform = painter.transform()
        painter.save()
        painter.resetTransform()
        painter.setFont(font)
        painter.setPen(self.text_pen)
        for i in range(i0, min(i1, i0 + 400)):
            x0, x1 = max(starts[i], lo), min(ends[i], hi)
            if (x1 - x0) * px_per_ms < 40:
                continue
            rect = transform.mapRect(QRectF(x0, self.row, x1 - x0, 1.0))
            text = metrics.elidedText(names[i], Qt.TextElideMode.ElideRight,
                                      int(rect.width()) - 6)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


# ----------------------------------------------------------------------------- plot pieces


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


def fmt_ms(ms: float) -> str:
    if abs(ms) >= 1000:
        return f"{ms / 1000:.3f} s"
    if abs(ms) >= 1:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.1f} µs"


def _legend_chip(color: str, text: str) -> QLabel:
    label = QLabel(f'<span style="color:{color}; font-size:14px;">&#9632;</span> {text}')
    label.setToolTip(text)
    return label


class TimelineView(QWidget):
    """Lanes + memory plot on one shared time axis, a cause legend and a hover line."""

    sig_hover_changed = Signal(str)
    sig_range_changed = Signal(float, float)  # absolute µs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = None
        self.t0_us = 0.0
        self.span_ms = 1.0
        self.lanes: list[LaneItem] = []
        self.hover_text = ""
        self._extra_items: list[pg.GraphicsItem] = []

        self.legend_row = QHBoxLayout()
        self.legend_row.setSpacing(14)
        self.legend_row.addWidget(_legend_chip(BUSY_COLOR, "GPU busy"))
        self.legend_row.addSpacing(10)
        self.legend_row.addWidget(QLabel("<b>GPU idle, while the CPU was in:</b>"))
        for cause in CAUSE_ORDER:
            self.legend_row.addWidget(_legend_chip(CAUSE_COLORS[cause], cause_label(cause)))
        self.legend_row.addStretch(1)

        self.hover_label = QLabel(" ")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.graphics = pg.GraphicsLayoutWidget()
        self.view_box = TimeViewBox()
        self.view_box.invertY(True)
        self.view_box.setMouseEnabled(x=True, y=False)
        self.plot = pg.PlotItem(viewBox=self.view_box)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=False, alpha=0.12)
        self.plot.getAxis("left").setWidth(130)
        self.plot.getAxis("bottom").setStyle(showValues=False)
        self.memory = MemoryPlot()
        self.memory.setXLink(self.plot)
        self.graphics.addItem(self.plot, row=0, col=0)
        self.graphics.addItem(self.memory, row=1, col=0)
        self.graphics.ci.layout.setRowStretchFactor(0, 3)
        self.graphics.ci.layout.setRowStretchFactor(1, 2)
        self.colors = plot_theme()
        self._style_plots()
        follow_theme(self.apply_theme)

        self.view_box.sig_fit_requested.connect(self.fit)
        self.memory.getViewBox().sigRangeChanged.connect(lambda *_: None)
        self.view_box.sigXRangeChanged.connect(self._emit_range)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 0)
        layout.setSpacing(2)
        layout.addLayout(self.legend_row)
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
        """Restyle for the app's current theme, keeping the report and the visible range."""
        self.colors = plot_theme()
        self._style_plots()
        if self.report is not None:
            x_range = self.view_box.viewRange()[0]
            self.set_report(self.report)
            self.view_box.setXRange(*x_range, padding=0)

    def clear(self) -> None:
        for item in self.lanes + self._extra_items:
            self.plot.removeItem(item)
        self.lanes = []
        self._extra_items = []
        self.memory.clear_memory()
        self.report = None

    def set_report(self, report) -> None:
        """Build every lane of `report` (a core.analysis.Report)."""
        self.clear()
        self.report = report
        lo, hi = (float(v) for v in report.window)
        self.t0_us = lo
        self.span_ms = max((hi - lo) / 1000.0, 1e-3)
        rows: list[LaneItem] = []
        if report.steps:
            rows.append(self._steps_lane(len(rows), report.steps))
        for dev in sorted(report.devices, key=_device_sort_key):
            rows.append(self._device_lane(len(rows), dev, report.devices[dev]))
        for phase in PHASE_ORDER:
            if phase in report.phases:
                rows.append(self._phase_lane(len(rows), phase, report.phases[phase]))
        self.lanes = rows
        for lane in rows:
            self.plot.addItem(lane)
        self._add_step_boundaries(report.steps)
        if not report.devices:
            self._add_note("No GPU activity in this trace: showing the CPU main thread only.")
        n = max(len(rows), 1)
        self.plot.getAxis("left").setTicks([[(r + 0.5, lane.label) for r, lane in
                                             enumerate(rows)], []])
        self.view_box.setLimits(xMin=-0.05 * self.span_ms, xMax=1.05 * self.span_ms,
                                minXRange=1e-4, yMin=0, yMax=n, minYRange=n, maxYRange=n)
        self.view_box.setYRange(0, n, padding=0)
        self.memory.set_memory(report.memory, self.t0_us, self.span_ms, self.colors)
        # Without memory samples the plot only carries the time axis: give the lanes the room.
        self.graphics.ci.layout.setRowStretchFactor(1, 2 if self.memory.lines else 1)
        self.graphics.ci.layout.setRowStretchFactor(0, 3 if self.memory.lines else 6)
        self.fit()

    def _steps_lane(self, row: int, steps) -> LaneItem:
        starts = np.array([(s.start_us - self.t0_us) / 1000.0 for s in steps])
        ends = starts + np.array([s.dur_us / 1000.0 for s in steps])
        names = [s.name for s in steps]
        # Neighbouring steps touch, so even and odd steps are separate layers (two tints).
        tints = self.colors["steps"]
        layers = [Layer("steps", starts[0::2], ends[0::2], tints[0], height=0.9),
                  Layer("odd_steps", starts[1::2], ends[1::2], tints[1], height=0.9)]

        def describe(x: float) -> str | None:
            i = int(np.searchsorted(starts, x, "right")) - 1
            if 0 <= i < len(starts) and x <= ends[i]:
                return (f"{names[i]}: start {fmt_ms(starts[i])}, "
                        f"duration {fmt_ms(ends[i] - starts[i])}")
            return None

        return LaneItem(row, "steps", layers, "steps", describe, texts=(starts, ends, names),
                        text_color=self.colors["text"])

    def _device_lane(self, row: int, dev: str, stats) -> LaneItem:
        to_ms = self._to_ms
        busy = to_ms(stats.busy)
        gaps = to_ms(stats.gaps)
        spans = to_ms(stats.cause_spans)
        codes = np.asarray(stats.cause_codes, dtype=np.int64)
        layers = []
        # Drawn least important first: where a zoomed-out pixel holds several causes, the
        # one a user most needs to see (data loading) ends up on top.
        for code, cause in reversed(list(enumerate(CAUSE_ORDER))):
            pick = codes == code
            layers.append(Layer(cause, spans[pick, 0], spans[pick, 1],
                                tint(CAUSE_COLORS[cause], 0.35), height=0.92))
        layers.append(Layer("busy", busy[:, 0], busy[:, 1], BUSY_COLOR, height=0.56))
        lane = LaneItem(row, f"GPU {dev}", layers, "gpu",
                        self._gpu_describer(dev, busy, gaps, spans, codes))
        lane.device = dev
        lane.gaps = gaps
        return lane

    def _phase_lane(self, row: int, phase: str, intervals) -> LaneItem:
        iv = self._to_ms(intervals)
        layer = Layer(phase, iv[:, 0], iv[:, 1], CAUSE_COLORS.get(phase, "#666666"), height=0.6)
        starts, ends = layer.pyramid.starts, layer.pyramid.ends
        label = PHASE_LABELS.get(phase, phase)

        def describe(x: float) -> str | None:
            i = int(np.searchsorted(starts, x, "right")) - 1
            if 0 <= i < len(starts) and x <= ends[i]:
                return (f"{label}: start {fmt_ms(starts[i])}, "
                        f"duration {fmt_ms(ends[i] - starts[i])}")
            return None

        return LaneItem(row, label, [layer], "cpu", describe)

    def _gpu_describer(self, dev, busy, gaps, spans, codes) -> Callable[[float], str | None]:
        events = self._device_events(dev)

        def describe(x: float) -> str | None:
            g = int(np.searchsorted(gaps[:, 0], x, "right")) - 1 if len(gaps) else -1
            if g >= 0 and x <= gaps[g, 1]:
                k = int(np.searchsorted(spans[:, 0], x, "right")) - 1 if len(spans) else -1
                cause = CAUSE_ORDER[codes[k]] if k >= 0 and x <= spans[k, 1] else "uncovered"
                return (f"GPU {dev} idle gap: start {fmt_ms(gaps[g, 0])}, duration "
                        f"{fmt_ms(gaps[g, 1] - gaps[g, 0])}, cause here: {cause_label(cause)}")
            name = events(x)
            if name is not None:
                return name
            b = int(np.searchsorted(busy[:, 0], x, "right")) - 1 if len(busy) else -1
            if b >= 0 and x <= busy[b, 1]:
                return (f"GPU {dev} busy: start {fmt_ms(busy[b, 0])}, "
                        f"duration {fmt_ms(busy[b, 1] - busy[b, 0])}")
            return None

        return describe

    def _device_events(self, dev: str) -> Callable[[float], str | None]:
        """Name of the GPU event under x on device `dev` (from the trace's columns)."""
        trace = getattr(self.report, "trace", None)
        if trace is None:
            return lambda x: None
        try:
            dev_id = int(dev)
        except ValueError:
            return lambda x: None
        pick = np.flatnonzero(np.asarray(trace.device) == dev_id)
        starts = (np.asarray(trace.start)[pick] - self.t0_us) / 1000.0
        ends = (np.asarray(trace.end)[pick] - self.t0_us) / 1000.0
        name_ids = np.asarray(trace.name)[pick]
        names = trace.names

        def lookup(x: float) -> str | None:
            i = int(np.searchsorted(starts, x, "right"))
            lo = max(0, i - 256)
            hit = np.flatnonzero(ends[lo:i] >= x)
            if not len(hit):
                return None
            j = lo + int(hit[-1])
            return (f"GPU {dev}: {names[name_ids[j]]}  start {fmt_ms(starts[j])}, "
                    f"duration {fmt_ms(ends[j] - starts[j])}")

        return lookup

    def _add_step_boundaries(self, steps) -> None:
        if not steps:
            return
        edges = np.array([(s.start_us - self.t0_us) / 1000.0 for s in steps]
                         + [(steps[-1].start_us + steps[-1].dur_us - self.t0_us) / 1000.0])
        n = max(len(self.lanes), 1)
        x = np.repeat(edges, 2)
        y = np.tile([0.0, float(n)], len(edges))
        pen = pg.mkPen("#7a8794", width=1, style=Qt.PenStyle.DashLine)
        curve = pg.PlotCurveItem(x, y, connect="pairs", pen=pen)
        self.plot.addItem(curve)
        self._extra_items.append(curve)

    def _add_note(self, text: str) -> None:
        note = pg.TextItem(text, color="#ff8a8a" if self.colors["dark"] else "#c92a2a",
                           anchor=(0.5, 0.0))
        note.setPos(self.span_ms / 2.0, 0.05)
        self.plot.addItem(note)
        self._extra_items.append(note)
        self.note_text = text

    def _to_ms(self, intervals) -> np.ndarray:
        arr = np.asarray(intervals, dtype=np.float64).reshape(-1, 2)
        return (arr - self.t0_us) / 1000.0

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

    # ------------------------------------------------------------------ hover

    def describe_at(self, x_ms: float, row: float) -> str:
        r = int(np.floor(row))
        if 0 <= r < len(self.lanes):
            text = self.lanes[r].describe(x_ms)
            if text:
                return f"{fmt_ms(x_ms)}  |  {text}"
            return f"{fmt_ms(x_ms)}  |  {self.lanes[r].label}: nothing here"
        return fmt_ms(x_ms)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        if self.report is None:
            return
        if self.plot.sceneBoundingRect().contains(pos):
            point = self.view_box.mapSceneToView(pos)
            text = self.describe_at(point.x(), point.y())
        elif self.memory.sceneBoundingRect().contains(pos):
            point = self.memory.getViewBox().mapSceneToView(pos)
            text = f"{fmt_ms(point.x())}  |  {self.memory.describe(point.x()) or 'no memory data'}"
        else:
            return
        self.set_hover_text(text)

    def set_hover_text(self, text: str) -> None:
        self.hover_text = text
        self.hover_label.setText(text)
        self.sig_hover_changed.emit(text)


def _device_sort_key(dev: str) -> tuple[int, str]:
    return (int(dev), dev) if dev.isdigit() else (1 << 30, dev)


def run_standalone(argv: list[str] | None = None, memory_only: bool = False) -> int:
    """`python -m stallscope.gui.views.timeline TRACE`: load, analyse, show the timeline."""
    from stallscope.gui.standalone import show_view

    def build(reports):
        view = TimelineView()
        view.set_report(reports[0])
        if memory_only:
            view.plot.hide()
        return view

    return show_view(build, "Show the timeline of one trace.", size=(1400, 700), argv=argv)


if __name__ == "__main__":
    raise SystemExit(run_standalone())
