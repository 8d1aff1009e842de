"""Compare two runs: a delta table (step time, utilization, each idle cause) over the two
summaries side by side, so a user sees at a glance whether a fix worked.

Standalone: `python -m stallscope.gui.views.compare BEFORE AFTER [--screenshot OUT.png]`.
"""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import causes
from stallscope.core.compare import (
    STEADY_LABEL,
    Metric,
    compare_reports,
    mismatch_warnings,
    n_steps,
    speedup,
    unlike,
    verdict,
)
from stallscope.core.report import Report
from stallscope.gui.colors import (
    BETTER_COLOR,
    CAUSE_COLORS,
    MUTED_TEXT,
    WORSE_COLOR,
    follow_theme,
    plot_theme,
    tint,
    warning_colors,
)
from stallscope.gui.views.summary import SummaryPanel
from stallscope.gui.widgets import ElidedLabel, rich_label, set_rich

VERDICT_MARK = {"better": "✓ ", "worse": "✗ ", "same": "", "n/a": ""}


def change_cell(m: Metric) -> str:
    """The change with its verdict's mark: "✓ -35.14 ms (-20%)", "≈" below the noise."""
    return VERDICT_MARK[m.verdict] + m.change_text()


def metric_label(m: Metric) -> str:
    """The row's name: per-cause idle rows sit under "GPU idle/step" (from Metric.cause, never
    by parsing the label)."""
    return f"   ↳ {causes.label(m.cause)}" if m.cause is not None else m.label


class DeltaTable(QTableWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(4)
        self.setHorizontalHeaderLabels(["metric", "before", "after", "change"])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setWordWrap(False)
        self.setToolTip("")
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.horizontalHeader()
        header.setMinimumSectionSize(30)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.metrics: list[Metric] = []

    def set_metrics(self, metrics: list[Metric]) -> None:
        self.metrics = metrics
        self.setRowCount(len(metrics))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, m in enumerate(metrics):
            cells = [metric_label(m), m.value_text(m.before), m.value_text(m.after),
                     change_cell(m)]
            color = {"better": BETTER_COLOR, "worse": WORSE_COLOR}.get(m.verdict, MUTED_TEXT)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(m.label if c == 0 else f"{text} ({m.verdict})" if c == 3 else text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if c >= 3:
                    item.setForeground(QBrush(QColor(color)))
                    if m.verdict in ("better", "worse"):
                        item.setFont(bold)
                self.setItem(r, c, item)
        self.resizeRowsToContents()

    def metric_by_key(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)

    def natural_width(self) -> int:
        """Width that shows every cell whole (the splitter gives the table at least this)."""
        header = self.horizontalHeader()
        widths = [max(self.sizeHintForColumn(c), header.sectionSizeHint(c))
                  for c in range(self.columnCount())]
        return sum(widths) + 2 * self.frameWidth() + 24


GPU_IDLE_AXIS = "GPU idle per step (ms)"
HOST_AXIS = "main thread per step (ms)"
GPU_IDLE_TITLE = "<b>GPU idle per step by cause</b>: faded = before, solid = after"
HOST_TITLE = ("<b>Main thread per step, by what it was in</b> (profiled window; no GPU on "
              "either side): faded = before, solid = after")


def gpu_idle_values(metrics: list[Metric]) -> dict[str, tuple[float, float]]:
    """cause -> (before, after) GPU idle per step (ms), from the per-cause metric rows."""
    return {m.cause: (m.before or 0.0, m.after or 0.0) for m in metrics if m.cause is not None}


def host_values(before: Report, after: Report) -> dict[str, tuple[float, float]]:
    """cause -> (before, after) of the main thread's step time per step (ms): what a CPU-only
    run waited on (data loading first), as the summary's cause bar shows it."""
    per_b, per_a = 1000.0 * n_steps(before), 1000.0 * n_steps(after)
    return {c: (before.host_by_cause.get(c, 0.0) / per_b, after.host_by_cause.get(c, 0.0) / per_a)
            for c in causes.CAUSES}


class CauseDeltaChart(pg.PlotWidget):
    """Per step by cause, before (pale) above after (solid), one row per cause that holds time
    on either side: horizontal bars, so the cause names never collide. GPU idle per step, or
    for two runs without a GPU the main thread's time per step."""

    SHOWN_FROM = 0.02  # causes under 2% of the largest bar are left out

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.getAxis("bottom").setLabel(GPU_IDLE_AXIS)
        self.getViewBox().invertY(True)
        self.bars: list[pg.BarGraphItem] = []
        self.values: dict[str, tuple[float, float]] = {}

    def set_metrics(self, metrics: list[Metric]) -> None:
        self.set_values(gpu_idle_values(metrics), GPU_IDLE_AXIS)

    def set_values(self, by_cause: dict[str, tuple[float, float]], axis: str) -> None:
        colors = plot_theme()
        self.setBackground(colors["bg"])
        for name in ("left", "bottom"):
            self.getAxis(name).setTextPen(colors["text"])
            self.getAxis(name).setPen(colors["fg"])
        self.getAxis("bottom").setLabel(axis)
        for bar in self.bars:
            self.removeItem(bar)
        self.bars = []
        top = max((max(v) for v in by_cause.values()), default=0.0)
        self.values = {c: by_cause[c] for c in causes.CAUSES
                       if c in by_cause and top > 0 and max(by_cause[c]) > self.SHOWN_FROM * top}
        ticks = []
        for i, (cause, (before, after)) in enumerate(self.values.items()):
            color = CAUSE_COLORS[cause]
            self.bars.append(pg.BarGraphItem(x0=[0], y=[i - 0.18], width=[before], height=0.34,
                                             brush=tint(color, 0.55), pen=pg.mkPen(None)))
            self.bars.append(pg.BarGraphItem(x0=[0], y=[i + 0.18], width=[after], height=0.34,
                                             brush=color, pen=pg.mkPen(None)))
            ticks.append((i, causes.label(cause)))
        for bar in self.bars:
            self.addItem(bar)
        self.getAxis("left").setTicks([ticks, []])
        self.setYRange(-0.6, max(len(self.values) - 0.4, 0.6), padding=0)
        self.setMaximumHeight(60 + 44 * max(len(self.values), 1))  # bars, not slabs, at 4K
        self.setXRange(0, top * 1.08 or 1.0, padding=0)


class CompareView(QWidget):
    """Before/after: what differs between the inputs, the deltas, both summaries beside them."""

    sig_cause_activated = Signal(str, str)  # side ("before"/"after"), cause

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)
        self.heading.setStyleSheet("font-size: 15px; font-weight: 700;")
        self.verdict_label = rich_label("")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setSizePolicy(QSizePolicy.Policy.Ignored,
                                         QSizePolicy.Policy.Preferred)
        self.warnings = rich_label("")
        self.warnings.setWordWrap(True)
        self.warnings.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.warnings.hide()
        follow_theme(self._style_warnings)
        self.table = DeltaTable()
        self.before = SummaryPanel(compact=True)
        self.after = SummaryPanel(compact=True)
        for side, panel in (("before", self.before), ("after", self.after)):
            panel.sig_cause_activated.connect(
                lambda c, side=side: self.sig_cause_activated.emit(side, c))
        self.sides = sides = QSplitter(Qt.Orientation.Horizontal)
        for title, panel in (("BEFORE", self.before), ("AFTER", self.after)):
            box = QWidget()
            lay = QVBoxLayout(box)
            lay.setContentsMargins(0, 0, 0, 0)
            tag = QLabel(title)
            tag.setStyleSheet("font-weight: 700; letter-spacing: 2px; padding-left: 10px;")
            lay.addWidget(tag)
            lay.addWidget(panel, 1)
            sides.addWidget(box)
        self.chart = CauseDeltaChart()
        self.chart.setMinimumHeight(120)
        left = QWidget()
        left_box = QVBoxLayout(left)
        left_box.setContentsMargins(0, 0, 0, 0)
        self.table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
        self.table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)
        left_box.addWidget(self.table)
        self.chart_title = chart_title = rich_label(GPU_IDLE_TITLE)
        chart_title.setWordWrap(True)
        chart_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        left_box.addWidget(chart_title)
        left_box.addWidget(self.chart, 1)
        left_box.addStretch(0)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(sides)
        self.splitter.setStretchFactor(0, 4)
        self.splitter.setStretchFactor(1, 5)
        self.splitter.setSizes([620, 780])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(self.heading)
        layout.addWidget(self.verdict_label)
        layout.addWidget(self.warnings)
        layout.addWidget(self.splitter, 1)
        self.metrics: list[Metric] = []
        self.mismatches: list[str] = []
        self.unlike: list[str] = []

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_table()

    def _fit_table(self) -> None:
        """The delta table keeps its cells whole; the summaries share the rest."""
        # from this widget's own width: in its resizeEvent the splitter still has the old one
        layout = self.layout()
        assert layout is not None  # set in __init__
        margins = layout.contentsMargins()
        total = (self.width() - margins.left() - margins.right()
                 - self.splitter.handleWidth())
        if total <= 0:
            return
        left = min(max(self.table.natural_width(), int(0.4 * total)), int(0.62 * total))
        self.splitter.setSizes([left, total - left])
        # the two summaries side by side when each gets room enough, else one above the other
        wide = total - left >= 640
        self.sides.setOrientation(Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical)

    def _style_warnings(self, _theme: str = "") -> None:
        c = warning_colors()
        self.warnings.setStyleSheet(f"background: {c['bg']}; color: {c['fg']}; border: 1px solid "
                                    f"{c['border']}; border-radius: 4px; padding: 4px 8px;")

    def set_reports(self, before, after, before_title: str = "", after_title: str = "") -> None:
        self.metrics = compare_reports(before, after)
        self.mismatches = mismatch_warnings(before, after)
        self.unlike = unlike(before, after)
        b_name = before_title or before.trace.path.name
        a_name = after_title or after.trace.path.name
        self.heading.setText(f"{b_name}  →  {a_name}")
        self.table.set_metrics(self.metrics)
        self._fill_chart(before, after)
        self.before.set_report(before, b_name)
        self.after.set_report(after, a_name)
        self.verdict_label.setText(self._verdict_text())
        self._fit_table()
        self._style_warnings()
        set_rich(self.warnings, "<b>Not like for like:</b> {}" if self.mismatches else "",
                 "; ".join(self.mismatches))
        self.warnings.setVisible(bool(self.mismatches))

    def _fill_chart(self, before: Report, after: Report) -> None:
        """GPU idle per step by cause; with no GPU on either side, the main thread's time per
        step by cause instead (its data wait first); nothing to chart: a line says why."""
        if before.devices or after.devices:
            self.chart.set_metrics(self.metrics)
            title = GPU_IDLE_TITLE
        else:
            self.chart.set_values(host_values(before, after), HOST_AXIS)
            title = HOST_TITLE
        if not self.chart.values:
            title = "<b>No chart</b>: neither side holds time per step by cause"
        set_rich(self.chart_title, title)
        self.chart.setVisible(bool(self.chart.values))

    def _verdict_text(self) -> str:
        """core/compare.verdict's line, coloured: "not like for like" first when the machines
        or ranks differ, then the step time, the utilization, and only an idle cause that
        moved the way the step time did."""
        found = verdict(self.metrics, self.unlike)
        parts = []
        if found.unlike:
            parts.append(f'<span style="color:{WORSE_COLOR}; font-weight:600">Not like for '
                         f"like</span> ({html.escape('; '.join(found.unlike))})")
        step = found.step
        if step is not None and step.delta is not None:
            # not like for like: faster or slower says nothing of a change to the code, so
            # neither green nor red (the banner before it says why)
            color = MUTED_TEXT if found.unlike else {
                "better": BETTER_COLOR, "worse": WORSE_COLOR}.get(step.verdict, MUTED_TEXT)
            change = "" if step.noise else f", {step.change_text()}"
            gain = speedup(self.metrics)
            times = "" if gain is None or step.noise else f"{gain:.2f}x"
            how = (" <span style='font-weight:400'>(steady mean of the sessions' recorded "
                   "steps)</span>" if step.label == STEADY_LABEL else "")
            times = f"{times}, " if times else ""
            parts.append(f'<span style="color:{color}; font-weight:600">Steps are {found.word}: '
                         f"{times}{step.value_text(step.before)} → "
                         f"{step.value_text(step.after)}{change}{how}</span>")
        util = next((m for m in self.metrics if m.key == "utilization"), None)
        if util is not None and util.delta is not None:
            parts.append(f"GPU utilization {util.value_text(util.before)} → "
                         f"{util.value_text(util.after)}")
        top = found.cause
        if top is not None and top.cause is not None:
            parts.append(f"idle on {causes.label(top.cause)} {top.value_text(top.before)} → "
                         f"{top.value_text(top.after)} per step")
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
