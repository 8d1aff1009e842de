"""Summary panel: utilization per device, idle by cause, per-step stacked bars, memory, advice.

Clicking a cause (bar or row) emits sig_cause_activated(cause); clicking advice emits
sig_advice_activated(index). The window zooms the timeline to the matching worst gap.

Standalone: `python -m stallscope.gui.views.summary TRACE`.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.compare import STEP_PARTS, primary_device, step_breakdown, step_ms
from stallscope.gui.colors import (
    BUSY_COLOR,
    CAUSE_COLORS,
    CAUSE_ORDER,
    cause_label,
    follow_theme,
    plot_theme,
    qcolor,
)

STEP_PART_COLORS = {"compute": BUSY_COLOR, "data_loading": CAUSE_COLORS["data_loading"],
                    "optimizer": CAUSE_COLORS["optimizer"], "idle": CAUSE_COLORS["uncovered"]}
STEP_PART_LABELS = {"compute": "GPU compute", "data_loading": "idle: data loading",
                    "optimizer": "idle: optimizer", "idle": "idle: other"}
# Without a GPU the same bar splits the step's CPU time.
CPU_STEP_PART_LABELS = {"compute": "", "data_loading": "waiting for data",
                        "optimizer": "optimizer", "idle": "other"}


def _step_legend_text(labels: dict[str, str]) -> str:
    return " ".join(f'<span style="color:{STEP_PART_COLORS[p]}">&#9632;</span> {labels[p]}'
                    for p in STEP_PARTS if labels[p])


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet("font-weight: 600; font-size: 13px; margin-top: 8px;")
    return label


def fmt_ms_us(us: float) -> str:
    ms = us / 1000.0
    return f"{ms / 1000:,.2f} s" if ms >= 10_000 else f"{ms:,.1f} ms"


class CauseBar(QWidget):
    """One horizontal bar split by idle cause; click a segment to jump to that cause."""

    sig_cause_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: dict[str, float] = {}
        self.empty_color = "#e9ecef"
        self.setMinimumHeight(22)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(300, 22)

    def set_values(self, values: dict[str, float]) -> None:
        self.values = {c: float(values.get(c, 0.0)) for c in CAUSE_ORDER}
        self.update()

    def segments(self) -> list[tuple[str, QRectF]]:
        total = sum(self.values.values())
        if total <= 0:
            return []
        x, out = 0.0, []
        for cause in CAUSE_ORDER:
            w = self.width() * self.values[cause] / total
            if w > 0:
                out.append((cause, QRectF(x, 0, w, self.height())))
            x += w
        return out

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt API
        painter = QPainter(self)
        painter.setPen(Qt.PenStyle.NoPen)
        segs = self.segments()
        if not segs:
            painter.setBrush(QColor(self.empty_color))
            painter.drawRect(self.rect())
        for cause, rect in segs:
            painter.setBrush(qcolor(CAUSE_COLORS[cause]))
            painter.drawRect(rect)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        for cause, rect in self.segments():
            if rect.contains(event.position()):
                self.sig_cause_clicked.emit(cause)
                return


class SummaryPanel(QScrollArea):
    sig_cause_activated = Signal(str)
    sig_advice_activated = Signal(int)

    def __init__(self, parent: QWidget | None = None, compact: bool = False) -> None:
        super().__init__(parent)
        self.compact = compact
        self.report = None
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        self.setWidget(body)
        self.box = QVBoxLayout(body)
        self.box.setContentsMargins(10, 6, 10, 10)
        self.box.setSpacing(4)

        self.title = QLabel()
        self.title.setStyleSheet("font-size: 15px; font-weight: 700;")
        self.title.setWordWrap(True)
        _shrinkable(self.title)
        self.subtitle = QLabel()
        self.subtitle.setWordWrap(True)
        _shrinkable(self.subtitle)
        self.box.addWidget(self.title)
        self.box.addWidget(self.subtitle)

        self.box.addWidget(section("GPU utilization"))
        self.util_grid = QGridLayout()
        self.util_grid.setHorizontalSpacing(8)
        self.box.addLayout(self.util_grid)
        self.no_gpu_label = QLabel("No GPU activity in this trace: only the CPU main thread "
                                   "was recorded (a CPU-only run, or CUDA activity was off).")
        self.no_gpu_label.setWordWrap(True)
        self.no_gpu_label.setStyleSheet("color: #c92a2a;")
        self.box.addWidget(self.no_gpu_label)

        self.cause_heading = section("GPU idle time by cause (click to find the worst gap)")
        self.box.addWidget(self.cause_heading)
        self.cause_bar = CauseBar()
        self.cause_bar.sig_cause_clicked.connect(self.sig_cause_activated)
        self.box.addWidget(self.cause_bar)
        self.cause_list = QListWidget()
        self.cause_list.setFrameShape(QFrame.Shape.NoFrame)
        self.cause_list.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.cause_list.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.cause_list.itemClicked.connect(
            lambda item: self.sig_cause_activated.emit(item.data(Qt.ItemDataRole.UserRole)))
        self.box.addWidget(self.cause_list)

        self.box.addWidget(section("Advice (click one to see it on the timeline)"))
        self.advice_box = QVBoxLayout()
        self.advice_box.setSpacing(6)
        self.box.addLayout(self.advice_box)
        self.advice_cards: list[AdviceCard] = []

        self.step_heading = section("Per step: where the GPU's time went")
        self.box.addWidget(self.step_heading)
        self.step_plot = pg.PlotWidget()
        self.step_plot.setMinimumHeight(150 if compact else 180)
        self.step_plot.setMaximumHeight(200 if compact else 240)
        self.step_plot.setMenuEnabled(False)
        self.step_plot.setMouseEnabled(x=False, y=False)
        self.step_plot.hideButtons()
        self.step_plot.getAxis("left").setLabel("ms")
        self.step_legend = QLabel(_step_legend_text(STEP_PART_LABELS))
        self.step_legend.setWordWrap(True)
        _shrinkable(self.step_legend)
        self.step_bars: dict[str, pg.BarGraphItem] = {}
        self.box.addWidget(self.step_plot)
        self.box.addWidget(self.step_legend)

        self.box.addWidget(section("Memory"))
        self.memory_label = QLabel()
        self.memory_label.setWordWrap(True)
        _shrinkable(self.memory_label)
        self.box.addWidget(self.memory_label)

        self.box.addStretch(1)
        self._title_override: str | None = None
        self._style()
        follow_theme(self.apply_theme)

    def _style(self) -> None:
        self.colors = c = plot_theme()
        self.subtitle.setStyleSheet(f"color: {c['dim']};")
        self.step_plot.setBackground(c["bg"])
        for axis in ("left", "bottom"):
            self.step_plot.getAxis(axis).setTextPen(c["text"])
            self.step_plot.getAxis(axis).setPen(c["fg"])
        self.cause_bar.empty_color = c["track"]

    def apply_theme(self, _name: str = "") -> None:
        self._style()
        if self.report is not None:
            self.set_report(self.report, self._title_override)

    # ------------------------------------------------------------------ filling

    def set_report(self, report, title: str | None = None) -> None:
        self.report = report
        self._title_override = title
        trace = report.trace
        name = title or getattr(trace.path, "name", str(trace.path))
        self.title.setText(name)
        self.title.setToolTip(str(trace.path))
        lo, hi = report.window
        rank = f", rank {trace.rank}" if trace.rank is not None else ""
        steps = (f"{len(report.steps)} steps, mean step {step_ms(report):,.1f} ms"
                 if report.steps else "no ProfilerStep annotations: whole trace")
        self.subtitle.setText(f"window {fmt_ms_us(hi - lo)} · {steps}{rank}")
        self._fill_utilization(report)
        self._fill_causes(report)
        self._fill_steps(report)
        self._fill_memory(report)
        self._fill_advice(report)

    def _fill_utilization(self, report) -> None:
        while self.util_grid.count():
            w = self.util_grid.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self.util_bars: dict[str, QProgressBar] = {}
        for row, (dev, stats) in enumerate(sorted(report.devices.items())):
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setValue(round(1000 * stats.utilization))
            bar.setTextVisible(False)
            bar.setFixedHeight(14)
            c = self.colors
            bar.setStyleSheet(f"QProgressBar {{ border: 1px solid {c['track_border']}; "
                              f"border-radius: 3px; background: {c['track']}; }} "
                              f"QProgressBar::chunk {{ background: {BUSY_COLOR}; }}")
            self.util_grid.addWidget(QLabel(f"GPU {dev}"), 2 * row, 0)
            self.util_grid.addWidget(bar, 2 * row, 1)
            self.util_grid.addWidget(QLabel(f"<b>{100 * stats.utilization:.1f}%</b>"), 2 * row, 2)
            text = QLabel(f"busy {fmt_ms_us(stats.busy_us)}, idle {fmt_ms_us(stats.idle_us)} "
                          f"in {stats.idle_gaps:,} gaps")
            text.setStyleSheet(f"color: {self.colors['dim']};")
            _shrinkable(text)
            self.util_grid.addWidget(text, 2 * row + 1, 1, 1, 2)
            self.util_bars[dev] = bar
        self.util_grid.setColumnStretch(1, 1)
        self.no_gpu_label.setVisible(not report.devices)
        # Without a GPU there is no idle GPU time to split: hide what would be all zeros, and
        # let the per-step bars tell how much of each step waits for data.
        for w in (self.cause_heading, self.cause_bar, self.cause_list):
            w.setVisible(bool(report.devices))
        for w in (self.step_heading, self.step_plot, self.step_legend):
            w.setVisible(bool(report.steps))
        gpu = bool(report.devices)
        self.step_heading.setText("Per step: where the GPU's time went" if gpu
                                  else "Per step: where the main thread's time went")
        self.step_legend.setText(_step_legend_text(STEP_PART_LABELS if gpu
                                                   else CPU_STEP_PART_LABELS))

    def _fill_causes(self, report) -> None:
        dev = primary_device(report)
        stats = report.devices.get(dev) if dev is not None else None
        by_cause = stats.idle_by_cause if stats else {}
        self.cause_bar.set_values(by_cause)
        self.cause_list.clear()
        idle = sum(by_cause.values())
        for cause in CAUSE_ORDER:
            us = by_cause.get(cause, 0.0)
            share = 100 * us / idle if idle else 0.0
            item = QListWidgetItem(f"{cause_label(cause):<14}  {fmt_ms_us(us):>12}   "
                                   f"{share:5.1f}% of idle")
            item.setData(Qt.ItemDataRole.UserRole, cause)
            # the list's own text colour, so the dark theme stays readable
            item.setForeground(self.cause_list.palette().text() if us > 0
                               else qcolor(self.colors["dim"]))
            item.setIcon(_chip(CAUSE_COLORS[cause]))
            item.setToolTip(f"Zoom the timeline to the longest {cause_label(cause)} gap")
            self.cause_list.addItem(item)
        rows = self.cause_list.count()
        self.cause_list.setFixedHeight(rows * (self.cause_list.sizeHintForRow(0) + 1) + 4)
        if len(report.devices) > 1:
            self.cause_bar.setToolTip(f"GPU {dev} (the busiest device)")

    def _fill_steps(self, report) -> None:
        for item in self.step_bars.values():
            self.step_plot.removeItem(item)
        self.step_bars = {}
        parts = step_breakdown(report)
        n = len(report.steps)
        x = np.arange(n, dtype=float)
        bottom = np.zeros(n)
        for part in STEP_PARTS:
            height = parts[part] / 1000.0
            bars = pg.BarGraphItem(x=x, height=height, y0=bottom, width=0.7,
                                   brush=STEP_PART_COLORS[part], pen=pg.mkPen(None))
            self.step_plot.addItem(bars)
            self.step_bars[part] = bars
            bottom = bottom + height
        labels = [(i, _short_step(s.name)) for i, s in enumerate(report.steps)]
        stride = max(1, n // 12)
        self.step_plot.getAxis("bottom").setTicks([labels[::stride], []])
        self.step_plot.setXRange(-0.6, max(n - 0.4, 0.6), padding=0)
        self.step_plot.setYRange(0, float(bottom.max()) * 1.05 if n else 1.0, padding=0)
        self.step_parts = parts

    def _fill_memory(self, report) -> None:
        lines = []
        for dev, m in sorted(report.memory.items()):
            if not len(m.ts) and not m.cuda_malloc_count:
                continue
            peak_a = "-" if m.peak_allocated is None else f"{m.peak_allocated / 2**20:,.0f} MiB"
            peak_r = "-" if m.peak_reserved is None else f"{m.peak_reserved / 2**20:,.0f} MiB"
            lines.append(f"<b>GPU {dev}</b>: peak allocated {peak_a}, peak reserved {peak_r}; "
                         f"reserved shrank {m.reserved_drops}×; cudaMalloc "
                         f"{m.cuda_malloc_count}×, cudaFree {m.cuda_free_count}×")
        why = "profile_memory was off" if report.devices else "no GPU in this trace"
        self.memory_label.setText("<br>".join(lines) if lines else
                                  f"No CUDA memory events recorded ({why}).")

    def _fill_advice(self, report) -> None:
        for card in self.advice_cards:
            self.advice_box.removeWidget(card)
            card.deleteLater()
        self.advice_cards = []
        for i, advice in enumerate(report.advice):
            card = AdviceCard(advice.title, advice.evidence, advice.fix, self.colors)
            card.sig_clicked.connect(lambda i=i: self.sig_advice_activated.emit(i))
            self.advice_box.addWidget(card)
            self.advice_cards.append(card)
        if not report.advice:
            card = AdviceCard("Nothing stands out", "No advice rule fired on this trace.", "",
                              self.colors, clickable=False)
            self.advice_box.addWidget(card)
            self.advice_cards.append(card)

    @property
    def advice_count(self) -> int:
        return len(self.report.advice) if self.report is not None else 0


class AdviceCard(QFrame):
    """One piece of advice: title, the numbers behind it, the fix. Clicking it emits."""

    sig_clicked = Signal()

    def __init__(self, title: str, evidence: str, fix: str, colors: dict,
                 clickable: bool = True) -> None:
        super().__init__()
        self.setObjectName("AdviceCard")
        border = CAUSE_COLORS["data_loading"] if clickable else colors["track_border"]
        self.setStyleSheet(f"#AdviceCard {{ border: 1px solid {colors['track_border']}; "
                           f"border-left: 4px solid {border}; border-radius: 4px; "
                           f"background: {colors['bg']}; }}")
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 6, 8, 6)
        box.setSpacing(2)
        self.title = QLabel(f"<b>{html.escape(title)}</b>")
        self.evidence = QLabel(html.escape(evidence))
        self.evidence.setStyleSheet(f"color: {colors['dim']};")
        self.fix = QLabel(f"<b>Fix:</b> {html.escape(fix)}") if fix else None
        for label in (self.title, self.evidence, self.fix):
            if label is not None:
                label.setWordWrap(True)
                _shrinkable(label)
                box.addWidget(label)
        self.text = "\n".join([title, evidence] + ([f"Fix: {fix}"] if fix else []))
        self.clickable = clickable
        if clickable:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
            self.setToolTip("Show this on the timeline")

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self.clickable and event.button() == Qt.MouseButton.LeftButton:
            self.sig_clicked.emit()


def _shrinkable(label: QLabel) -> None:
    """Let a label wrap or clip instead of widening the panel (long file names)."""
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(0)


def _short_step(name: str) -> str:
    return name.replace("ProfilerStep", "")


def _chip(color: str):
    from PySide6.QtGui import QIcon, QPixmap

    pix = QPixmap(12, 12)
    pix.fill(QColor(color))
    return QIcon(pix)


def main(argv: list[str] | None = None) -> int:
    from stallscope.gui.standalone import show_view

    def build(reports):
        panel = SummaryPanel()
        panel.set_report(reports[0])
        return panel

    return show_view(build, "Show the summary panel of one trace.", size=(460, 900), argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
