"""Compare two runs: a delta table (step time, utilization, each idle cause) over the two
summaries side by side, so a user sees at a glance whether a fix worked.

Standalone: `python -m stallscope.gui.views.compare BEFORE AFTER [--screenshot OUT.png]`.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.compare import Metric, compare_reports
from stallscope.gui.colors import (
    BETTER_COLOR,
    CAUSE_COLORS,
    CAUSE_ORDER,
    MUTED_TEXT,
    WORSE_COLOR,
    cause_label,
    plot_theme,
    tint,
)
from stallscope.gui.views.summary import SummaryPanel

VERDICT_TEXT = {"better": "✓ better", "worse": "✗ worse", "same": "≈ same", "n/a": ""}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "":
        return f"{value:,.0f}"
    if unit == "%":
        return f"{value:.1f}%"
    return f"{value:,.1f} {unit}"


def _fmt_change(m: Metric) -> str:
    if m.delta is None:
        return "-"
    if m.unit == "":
        text = f"{m.delta:+,.0f}"
    elif m.unit == "%":
        text = f"{m.delta:+.1f} pts"  # percentage points, not percent of percent
    else:
        text = f"{m.delta:+,.1f} {m.unit}"
    if m.rel is not None and m.unit != "%":
        text += f"  ({100 * m.rel:+.0f}%)"
    return text


class DeltaTable(QTableWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(5)
        self.setHorizontalHeaderLabels(["metric", "before", "after", "change", ""])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.metrics: list[Metric] = []

    def set_metrics(self, metrics: list[Metric]) -> None:
        self.metrics = metrics
        self.setRowCount(len(metrics))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, m in enumerate(metrics):
            label = m.label.replace("GPU idle/step: ", "   ↳ ")  # children of "GPU idle/step"
            cells = [label, _fmt(m.before, m.unit), _fmt(m.after, m.unit), _fmt_change(m),
                     VERDICT_TEXT[m.verdict]]
            color = {"better": BETTER_COLOR, "worse": WORSE_COLOR}.get(m.verdict, MUTED_TEXT)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if c >= 3:
                    item.setForeground(QBrush(QColor(color)))
                    if m.verdict in ("better", "worse"):
                        item.setFont(bold)
                self.setItem(r, c, item)

    def metric_by_key(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)


class CauseDeltaChart(pg.PlotWidget):
    """GPU idle per step by cause, before (pale) beside after (solid): did the fix work?"""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.getAxis("left").setLabel("GPU idle per step (ms)")
        self.bars: list[pg.BarGraphItem] = []
        self.values: dict[str, tuple[float, float]] = {}

    def set_metrics(self, metrics: list[Metric]) -> None:
        colors = plot_theme()
        self.setBackground(colors["bg"])
        for axis in ("left", "bottom"):
            self.getAxis(axis).setTextPen(colors["text"])
            self.getAxis(axis).setPen(colors["fg"])
        for bar in self.bars:
            self.removeItem(bar)
        self.bars = []
        by_key = {m.key: m for m in metrics}
        self.values = {c: (by_key[f"idle_{c}_ms"].before or 0.0, by_key[f"idle_{c}_ms"].after
                           or 0.0) for c in CAUSE_ORDER if f"idle_{c}_ms" in by_key}
        ticks = []
        for i, (cause, (before, after)) in enumerate(self.values.items()):
            color = CAUSE_COLORS[cause]
            self.bars.append(pg.BarGraphItem(x=[i - 0.18], height=[before], width=0.34,
                                             brush=tint(color, 0.55), pen=pg.mkPen(None)))
            self.bars.append(pg.BarGraphItem(x=[i + 0.18], height=[after], width=0.34,
                                             brush=color, pen=pg.mkPen(None)))
            ticks.append((i, cause_label(cause)))
        for bar in self.bars:
            self.addItem(bar)
        self.getAxis("bottom").setTicks([ticks, []])
        top = max((max(v) for v in self.values.values()), default=1.0)
        self.setXRange(-0.6, len(self.values) - 0.4, padding=0)
        self.setYRange(0, top * 1.1 or 1.0, padding=0)


class CompareView(QWidget):
    """Before/after: deltas on top, both summaries below."""

    sig_cause_activated = Signal(str, str)  # side ("before"/"after"), cause

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel()
        self.heading.setStyleSheet("font-size: 15px; font-weight: 700;")
        self.heading.setWordWrap(True)
        self.verdict_label = QLabel()
        self.verdict_label.setWordWrap(True)
        self.table = DeltaTable()
        self.before = SummaryPanel(compact=True)
        self.after = SummaryPanel(compact=True)
        for side, panel in (("before", self.before), ("after", self.after)):
            panel.sig_cause_activated.connect(
                lambda c, side=side: self.sig_cause_activated.emit(side, c))
        sides = QSplitter(Qt.Orientation.Horizontal)
        for title, panel in (("BEFORE", self.before), ("AFTER", self.after)):
            box = QWidget()
            lay = QVBoxLayout(box)
            lay.setContentsMargins(0, 0, 0, 0)
            tag = QLabel(title)
            tag.setStyleSheet("font-weight: 700; letter-spacing: 2px;"
                              " padding-left: 10px;")
            lay.addWidget(tag)
            lay.addWidget(panel, 1)
            sides.addWidget(box)
        top = QHBoxLayout()
        top.addWidget(self.heading, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(top)
        layout.addWidget(self.verdict_label)
        self.chart = CauseDeltaChart()
        left = QWidget()
        left_box = QVBoxLayout(left)
        left_box.setContentsMargins(0, 0, 0, 0)
        left_box.addWidget(self.table, 3)
        left_box.addWidget(QLabel("<b>GPU idle per step by cause</b>: faded = before, "
                                  "solid = after"))
        left_box.addWidget(self.chart, 2)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(sides)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 5)
        split.setSizes([470, 930])
        layout.addWidget(split, 1)
        self.metrics: list[Metric] = []

    def set_reports(self, before, after, before_title: str = "", after_title: str = "") -> None:
        self.metrics = compare_reports(before, after)
        b_name = before_title or before.trace.path.name
        a_name = after_title or after.trace.path.name
        self.heading.setText(f"{b_name}  →  {a_name}")
        self.table.set_metrics(self.metrics)
        self.chart.set_metrics(self.metrics)
        self.before.set_report(before, b_name)
        self.after.set_report(after, a_name)
        self.verdict_label.setText(self._verdict_text())

    def _verdict_text(self) -> str:
        by_key = {m.key: m for m in self.metrics}
        step = by_key.get("step_ms")
        parts = []
        if step is not None and step.rel is not None:
            word = {"better": "faster", "worse": "slower", "same": "about as fast"}[step.verdict]
            color = {"better": BETTER_COLOR, "worse": WORSE_COLOR}.get(step.verdict, MUTED_TEXT)
            parts.append(f'<span style="color:{color}; font-weight:600">Steps are {word}: '
                         f'{step.before:,.1f} → {step.after:,.1f} ms ({100 * step.rel:+.0f}%)'
                         f'</span>')
        util = by_key.get("utilization")
        if util is not None and util.delta is not None:
            parts.append(f"GPU utilization {util.before:.1f}% → {util.after:.1f}%")
        dl = by_key.get("idle_data_loading_ms")
        if dl is not None and dl.delta is not None:
            parts.append(f"idle on data loading {dl.before:,.1f} → {dl.after:,.1f} ms per step")
        return " · ".join(parts)


def main(argv: list[str] | None = None) -> int:
    from stallscope.gui.standalone import show_view

    def build(reports):
        view = CompareView()
        view.set_reports(*reports)
        return view

    return show_view(build, "Compare two traces.", traces=("before", "after"), argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
