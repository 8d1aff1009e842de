"""Memory plot: allocated and reserved CUDA memory per device, reserved drops marked.

The x axis is milliseconds since the analysis window's start, shared with the timeline
(`setXLink`). Lines are downsampled ('peak', so spikes survive) and clipped to the view, so a
trace with hundreds of thousands of [memory] events stays fluid.

Standalone: `python -m stallscope.gui.views.memory TRACE`.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen

from stallscope.core import units
from stallscope.core.memory import MemoryStats
from stallscope.gui.colors import ALLOCATED_COLOR, LIGHT_PLOT, RESERVED_COLOR, plot_theme

_DEVICE_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine)


def byte_scale(peak: float) -> tuple[float, str]:
    """Divisor and unit so the y axis reads in MiB or GiB (binary, like the summary's text),
    not in raw bytes."""
    if peak >= 2 * 1024**3:
        return float(1024**3), "GiB"
    return float(1024**2), "MiB"


class GridLines(pg.GraphicsObject):
    """The plot's grid as one cheap item: a cosmetic, non-antialiased line per major and minor
    tick of both axes, clipped to the view. pyqtgraph's showGrid() paints the grid from each
    axis over the whole view and cost ~2/5 of a zoom/pan redraw at 1M events."""

    def __init__(self, plot: pg.PlotItem, alpha: float = 0.15) -> None:
        super().__init__()
        self.plot, self.alpha = plot, alpha
        self.setZValue(-100)
        self.setFlag(self.GraphicsItemFlag.ItemIgnoresParentOpacity, True)

    def boundingRect(self) -> QRectF:
        return self.plot.getViewBox().viewRect()

    def paint(self, painter: QPainter, *_args) -> None:
        vb = self.plot.getViewBox()
        rect = vb.viewRect()
        size = vb.size()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        for axis, lo, hi, px, vertical in (
                ("bottom", rect.left(), rect.right(), size.width(), True),
                ("left", rect.top(), rect.bottom(), size.height(), False)):
            levels = self.plot.getAxis(axis).tickValues(lo, hi, px)
            for level, (_spacing, values) in enumerate(levels[:2]):
                color = QColor(self.plot.getAxis(axis).pen().color())
                color.setAlphaF(self.alpha * (1.0 if level == 0 else 0.5))
                pen = QPen(color)
                pen.setCosmetic(True)
                painter.setPen(pen)
                if vertical:
                    painter.drawLines([QLineF(v, rect.top(), v, rect.bottom()) for v in values])
                else:
                    painter.drawLines([QLineF(rect.left(), v, rect.right(), v) for v in values])


HEADROOM = 1.4  # the y range's top over the highest line, when the legend fits in it


class MemoryPlot(pg.PlotItem):
    """One PlotItem holding, per CUDA device, an allocated and a reserved line and drop marks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.setMouseEnabled(x=True, y=False)
        self.grid = GridLines(self)
        self.addItem(self.grid, ignoreBounds=True)
        for axis in ("left", "bottom"):
            self.getAxis(axis).setStyle(tickLength=0)  # as under showGrid: the grid is the tick
        self.getViewBox().sigRangeChanged.connect(self._grid_moved)
        self.getViewBox().sigResized.connect(self._fit_height)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.getAxis("left").setWidth(130)
        self.getAxis("bottom").setLabel("time since window start (ms)")
        self.legend = self.addLegend(offset=(8, 4), colCount=4)
        self.colors = LIGHT_PLOT
        self.lines: dict[int, tuple[pg.PlotDataItem, pg.PlotDataItem | None]] = {}
        self.drops: dict[int, pg.ScatterPlotItem] = {}
        self._empty_text: pg.TextItem | None = None
        self._series: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.scale, self.unit = float(1024**2), "MiB"
        self.peak = 0.0  # the highest line, in `unit`s: what the legend must stay above
        self.device_label: Callable[[int], str] = _gpu_label

    def _grid_moved(self, *_args) -> None:
        self.grid.prepareGeometryChange()
        self.grid.update()

    def clear_memory(self) -> None:
        for alloc, reserved in self.lines.values():
            self.removeItem(alloc)
            if reserved is not None:
                self.removeItem(reserved)
        for scatter in self.drops.values():
            self.removeItem(scatter)
        if self._empty_text is not None:
            self.removeItem(self._empty_text)
            self._empty_text = None
        self.legend.clear()
        self.peak = 0.0
        self.lines.clear()
        self.drops.clear()
        self._series.clear()

    def restyle(self, colors: dict) -> None:
        """The theme's colours on what is shown (a theme change): legend, drop marks, the
        empty note; the series stay (allocated and reserved keep their colours)."""
        self.colors = colors
        self.grid.update()
        self.legend.setLabelTextColor(colors["text"])
        for _sample, label in self.legend.items:
            label.setText(label.text)  # the label renders its colour into its HTML
        self.legend.setBrush(pg.mkBrush(*colors["legend_bg"]))
        for scatter in self.drops.values():
            scatter.setBrush(pg.mkBrush(colors["bg"]))
        if self._empty_text is not None:
            self._empty_text.setColor(colors["dim"])

    def set_memory(self, memory: dict[int, MemoryStats], t0_us: float, span_ms: float,
                   colors: dict | None = None,
                   device_label: Callable[[int], str] | None = None) -> None:
        """`memory`: Report.memory (device id -> MemoryStats); `t0_us`: the window start;
        `device_label`: Report.trace.device_label ("GPU 0", "MTIA 17")."""
        self.clear_memory()
        self.device_label = device_label or _gpu_label
        self.restyle(colors or LIGHT_PLOT)
        series = {dev: m for dev, m in sorted(memory.items()) if len(m.ts)}
        if not series:
            self._show_empty("No CUDA memory events in this trace", span_ms)
            return
        peak = max(float(np.nanmax(m.reserved)) if len(m.reserved) and np.isfinite(
            m.reserved).any() else float(np.nanmax(m.allocated)) for m in series.values())
        self.scale, self.unit = byte_scale(peak)
        self.getAxis("left").setLabel(f"memory ({self.unit})")
        for i, (dev, m) in enumerate(series.items()):
            style = _DEVICE_STYLES[i % len(_DEVICE_STYLES)]
            x = (np.asarray(m.ts, dtype=np.float64) - t0_us) / 1000.0
            alloc = np.asarray(m.allocated, dtype=np.float64) / self.scale
            reserved = np.asarray(m.reserved, dtype=np.float64) / self.scale
            self._series[dev] = (x, alloc, reserved)
            # legend labels are HTML (pyqtgraph's LabelItem): the device id escaped
            suffix = f" {html.escape(self.device_label(dev))}" if len(series) > 1 else ""
            a_item = self._line(x, alloc, ALLOCATED_COLOR, style, f"allocated{suffix}")
            r_item = None
            if np.isfinite(reserved).any():
                r_item = self._line(x, reserved, RESERVED_COLOR, style, f"reserved{suffix}")
            else:  # 2021 traces record no totals: allocated is the running sum of Bytes
                self.legend.addItem(pg.PlotDataItem([], []), f"reserved{suffix}: not recorded")
            self.lines[dev] = (a_item, r_item)
            drop_x, drop_y = self._drop_points(m, x, reserved, t0_us)
            scatter = pg.ScatterPlotItem(
                drop_x, drop_y, symbol="t", size=9, pen=pg.mkPen(RESERVED_COLOR),
                brush=pg.mkBrush(self.colors["bg"]))
            self.addItem(scatter)
            if len(drop_x):
                self.legend.addItem(scatter, f"reserved drop{suffix} ({len(drop_x)})")
            self.drops[dev] = scatter
        self.peak = peak / self.scale
        self._fit_height()

    def _fit_height(self, *_args) -> None:
        """From zero (memory is an amount) to enough above the highest line for the legend's
        rows: their height is in pixels, so a short plot (a small window) or a legend of
        several rows needs more than the usual 40%, or the legend hides the lines' start."""
        if self.peak <= 0:
            return
        view_h = self.getViewBox().height()
        legend_bottom = self.legend.pos().y() + self.legend.boundingRect().height() + 4
        free = 1.0 - legend_bottom / view_h if view_h > 0 else 0.0
        top = self.peak / max(free, 0.25) if free < 1 / HEADROOM else self.peak * HEADROOM
        self.setYRange(0, top, padding=0)

    def _line(self, x, y, color, style, name) -> pg.PlotDataItem:
        item = pg.PlotDataItem(x, y, pen=pg.mkPen(color, width=1, style=style), name=name)
        self.addItem(item)  # clipping needs the ViewBox, so only once the item is in it
        item.setClipToView(True)
        item.setDownsampling(auto=True, method="peak")
        return item

    def _drop_points(self, m: MemoryStats, x, reserved, t0_us) -> tuple[np.ndarray, np.ndarray]:
        drop_ts = np.asarray(m.drop_ts, dtype=np.float64)
        if not len(drop_ts) or not len(x):
            return np.empty(0), np.empty(0)
        # A drop is marked at the level reserved memory fell to.
        idx = np.clip(np.searchsorted(np.asarray(m.ts, dtype=np.float64), drop_ts, "right") - 1,
                      0, len(x) - 1)
        return (drop_ts - t0_us) / 1000.0, reserved[idx]

    def _show_empty(self, text: str, span_ms: float) -> None:
        self.getAxis("left").setLabel("memory")
        self._empty_text = pg.TextItem(text, color=self.colors["dim"], anchor=(0.5, 0.5))
        self.addItem(self._empty_text)
        self._empty_text.setPos(span_ms / 2.0, 0.5)
        self.setYRange(0, 1)

    def describe(self, x_ms: float) -> str | None:
        """Allocated / reserved at x, for the hover line."""
        parts = []
        for dev, (x, alloc, reserved) in self._series.items():
            i = int(np.searchsorted(x, x_ms, "right")) - 1
            if 0 <= i < len(x):
                kept = "not recorded" if not np.isfinite(reserved[i]) else \
                    units.mib(reserved[i] * self.scale)
                parts.append(f"{self.device_label(dev)}: allocated "
                             f"{units.mib(alloc[i] * self.scale)}, reserved {kept}")
        return " | ".join(parts) if parts else None


def _gpu_label(dev: int) -> str:
    """Until every caller passes Report.trace.device_label (gui/views/timeline.py)."""
    return f"GPU {dev}"


def main(argv: list[str] | None = None) -> int:
    from stallscope.gui.standalone import show_view

    def build(reports):
        report = reports[0]
        view = pg.GraphicsLayoutWidget()
        plot = MemoryPlot()
        view.addItem(plot)
        colors = plot_theme()
        view.setBackground(colors["bg"])
        lo, hi = report.window
        plot.set_memory(report.memory, lo, max((hi - lo) / 1000.0, 1e-3), colors,
                        report.trace.device_label)
        plot.setXRange(0, (hi - lo) / 1000.0)
        view.plot = plot
        return view

    return show_view(build, "Show the memory plot of one trace.", size=(1400, 400), argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
