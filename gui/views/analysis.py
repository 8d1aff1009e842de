"""The analysis page: rank and step selectors, timeline + memory, summary panel, rank table.

Holds layout and observes the window's DocumentModel (gui/model.py): a new document fills the
rank widgets, the selected rank's report fills the timeline and the summary; the rank widgets
select through the model. Where to zoom is small and lives here as slots.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QImage, QPainter, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import causes, units
from stallscope.core import intervals as iv
from stallscope.core.document import Document
from stallscope.core.ranks.stragglers import Stragglers
from stallscope.core.ranks.text import rank_stragglers, straggler_sentence
from stallscope.core.report import Report
from stallscope.gui.colors import follow_theme, plot_theme
from stallscope.gui.model import DocumentModel
from stallscope.gui.views.ranks import RankTable
from stallscope.gui.views.summary import SummaryPanel
from stallscope.gui.views.timeline import TimelineView
from stallscope.gui.widgets import (
    ElidedLabel,
    plain_label,
    rich_label,
    set_rich,
    wrap_to_width,
)

ALL_STEPS = "All steps"
RANKS_HEADING = ("<b>Ranks</b> · {}GPU idle per step (ms) by cause · the slowest rank sets "
                 "everyone's pace; click a row to view it")
HINT = "wheel: zoom · drag: pan · shift-drag: zoom to box · double-click: fit"
# A step zooms the timeline alone: the summary stays on the whole window, as Nsight Systems'
# statistics stay on the whole report while its timeline zooms (a view, not a filter).
STEP_TIP = ("Zooms the timeline to one step. The summary on the right stays on the whole "
            "profiled window (one step's figures: its row in Per step)")


class AnalysisView(QWidget):
    sig_status = Signal(str)

    def __init__(self, parent: QWidget | None = None, model: DocumentModel | None = None) -> None:
        super().__init__(parent)
        self.model = model if model is not None else DocumentModel(self)

        self.rank_label = QLabel("Rank:")
        self.rank_combo = QComboBox()
        self.rank_combo.currentIndexChanged.connect(self.set_rank)
        self.step_combo = QComboBox()
        self.step_combo.setMinimumWidth(190)
        self.step_combo.setToolTip(STEP_TIP)
        self.step_combo.currentIndexChanged.connect(self._on_step_chosen)
        self.prev_button = QPushButton("◀ Step")
        self.next_button = QPushButton("Step ▶")
        self.fit_button = QPushButton("Zoom to fit")
        self.prev_button.setToolTip("Previous step ([)")
        self.next_button.setToolTip("Next step (])")
        self.fit_button.setToolTip("Show the whole window (double-click the timeline)")
        self.prev_button.clicked.connect(lambda: self.step_by(-1))
        self.next_button.clicked.connect(lambda: self.step_by(+1))
        self.fit_button.clicked.connect(self.fit)
        hint = ElidedLabel(HINT)
        hint.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.hint = hint
        self._style_hint()
        follow_theme(self._style_hint)

        bar = QHBoxLayout()
        bar.setContentsMargins(6, 4, 6, 0)
        bar.addWidget(self.rank_label)
        bar.addWidget(self.rank_combo)
        bar.addSpacing(12)
        bar.addWidget(QLabel("Step:"))
        bar.addWidget(self.step_combo)
        bar.addWidget(self.prev_button)
        bar.addWidget(self.next_button)
        bar.addWidget(self.fit_button)
        bar.addWidget(hint, 1)

        self.rank_table = RankTable()
        self.rank_table.sig_rank_selected.connect(self.set_rank)
        self.timeline = TimelineView()
        self.summary = SummaryPanel(actions=True)  # cards with Try it / LMDB buttons
        self.summary.setMinimumWidth(260)
        self.summary.sig_cause_activated.connect(self.show_worst_gap)
        self.summary.sig_advice_activated.connect(self.show_advice)

        left = QWidget()
        left_box = QVBoxLayout(left)
        left_box.setContentsMargins(0, 0, 0, 0)
        self.ranks_heading = wrap_to_width(rich_label(RANKS_HEADING, ""))
        # the CLI's straggler sentence (ranks' names: text)
        self.straggler = wrap_to_width(plain_label(""))
        left_box.addWidget(self.ranks_heading)
        left_box.addWidget(self.rank_table)
        left_box.addWidget(self.straggler)
        left_box.addWidget(self.timeline, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("analysisSplitter")  # layout_state remembers its sizes
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.summary)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([980, 420])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.splitter, 1)
        self._show_rank_widgets(False)
        self.model.sig_document_changed.connect(self._show_document)
        self.model.sig_report_changed.connect(self._show_report)

    def _style_hint(self, _theme_name: str = "") -> None:
        self.hint.setStyleSheet(f"color: {plot_theme()['dim']};")

    # ------------------------------------------------------------------ document

    @property
    def document(self) -> Document | None:
        return self.model.document

    @property
    def rank_index(self) -> int:
        return self.model.rank_index

    @property
    def report(self) -> Report | None:
        return self.model.report

    def set_document(self, document: Document) -> None:
        """Show `document` (through the model: whatever else observes it follows)."""
        self.model.set_document(document)

    def set_rank(self, index: int) -> None:
        self.model.select_rank(index)

    def _show_document(self, document: Document) -> None:
        multi = document.multi_rank
        self._show_rank_widgets(multi)
        self.rank_combo.blockSignals(True)
        self.rank_combo.clear()
        self.rank_combo.addItems(document.labels)
        self.rank_combo.blockSignals(False)
        if multi:
            table = rank_stragglers(document.reports, document.labels)
            slowest = table.slowest.key if table.slowest is not None else None
            self.rank_table.set_reports(document.reports, document.labels, slowest)
            set_rich(self.ranks_heading, RANKS_HEADING, job_line(document.reports, table) + " · ")
            self.straggler.setText(straggler_sentence(table))
        start = self.rank_table.slowest_index if multi else 0
        self.model.select_rank(start or 0)

    def _show_rank_widgets(self, visible: bool) -> None:
        for w in (self.rank_label, self.rank_combo, self.rank_table, self.ranks_heading,
                  self.straggler):
            w.setVisible(visible)

    def _show_report(self, report: Report) -> None:
        document, index = self.model.document, self.model.rank_index
        assert document is not None  # a report is only selected in a document
        label = document.labels[index]
        self.rank_combo.blockSignals(True)
        self.rank_combo.setCurrentIndex(index)
        self.rank_combo.blockSignals(False)
        self.rank_table.select_rank(index)
        self.timeline.set_report(report)
        title = report.trace.path.name + (f" ({label})" if document.multi_rank else "")
        self.summary.set_report(report, title)
        self.step_combo.blockSignals(True)
        self.step_combo.clear()
        self.step_combo.addItem(ALL_STEPS)
        self.step_combo.addItems([s.name for s in report.steps])
        self.step_combo.blockSignals(False)
        self.hint.setText(HINT)  # the timeline shows the whole window again
        has_steps = bool(report.steps)
        for w in (self.step_combo, self.prev_button, self.next_button):
            w.setEnabled(has_steps)

    def plots_image(self) -> QImage:
        """The plots as one picture: the timeline (legend, lanes, memory) beside the whole
        summary panel (also the part scrolled out of view), for File > Export."""
        timeline = self.timeline
        parts = [_stacked([timeline.legend, timeline.graphics])]
        content = self.summary.widget()  # a scroll area: its whole content, not the viewport
        parts.append((content if content is not None else self.summary).grab().toImage())
        return _side_by_side(parts, self.palette().color(QPalette.ColorRole.Window))

    # ------------------------------------------------------------------ navigation

    def fit(self) -> None:
        self.step_combo.setCurrentIndex(0)
        self.timeline.fit()

    def _on_step_chosen(self, combo_index: int) -> None:
        if combo_index <= 0:
            self.hint.setText(HINT)
            self.timeline.fit()
        else:
            self.hint.setText(f"timeline: {self.step_combo.currentText()} alone · summary: the "
                              f"whole window")
            self.timeline.zoom_to_step(combo_index - 1)

    def step_by(self, delta: int) -> None:
        n = self.step_combo.count()
        if n <= 1:
            return
        cur = self.step_combo.currentIndex()
        nxt = 1 if cur <= 0 and delta > 0 else n - 1 if cur <= 0 else cur + delta
        self.step_combo.setCurrentIndex(min(max(nxt, 1), n - 1))

    def show_worst_gap(self, cause: str) -> bool:
        """Zoom to the longest span charged to `cause`: GPU idle time on a GPU trace, the main
        thread's step time without a GPU. The status line names the same span as the hover."""
        report = self.report
        if report is None:
            return False
        label = causes.label(cause)
        if report.devices:
            span = report.worst_gap(cause)
            where = "GPU idle"
        else:
            span = longest_host_span(report, cause)
            where = "main-thread time"
        if span is None:
            self.sig_status.emit(f"No {where} was charged to {label}.")
            return False
        self.timeline.zoom_to(*span)
        start = span[0] - report.window[0]
        self.sig_status.emit(f"Longest {label} span ({where}): {units.duration(span[1] - span[0])}"
                             f" from {units.duration(start)}")
        return True

    def show_advice(self, index: int) -> bool:
        report = self.report
        if report is None or not (0 <= index < len(report.advice)):
            return False
        advice = report.advice[index]
        if advice.focus is not None:
            lo, hi = advice.focus
            self.timeline.zoom_to(lo, hi)
            self.sig_status.emit(f"{advice.title}: {units.duration(hi - lo)} from "
                                 f"{units.duration(lo - report.window[0])}")
            return True
        if advice.cause is not None:
            return self.show_worst_gap(advice.cause)
        self.sig_status.emit(f"{advice.title}: nothing specific to show on the timeline.")
        return False


def job_line(reports: list[Report], table: Stragglers) -> str:
    """What the CLI's ranks table opens with (core/ranks/text.render_job): "2 ranks of world
    size 128 over 5 compared steps": a folder of some ranks of a larger job says so."""
    world = {r.trace.world_size for r in reports} - {None}
    of = f" of world size {world.pop()}" if len(world) == 1 else ""
    steps = f" over {units.plural(len(table.steps), 'compared step')}" if table.steps else ""
    return f"{units.plural(len(reports), 'rank')}{of}{steps}"


def longest_host_span(report: Report, cause: str) -> tuple[float, float] | None:
    """The longest piece of the main thread's time charged to `cause` (absolute µs)."""
    return iv.longest(report.host_spans[report.host_codes == causes.index(cause)])


GAP_PX = 8  # between the parts of an exported picture


def _stacked(widgets: list[QWidget]) -> QImage:
    shots = [w.grab().toImage() for w in widgets if w.isVisible()]
    image = QImage(max(s.width() for s in shots), sum(s.height() for s in shots) + GAP_PX
                   * (len(shots) - 1), QImage.Format.Format_RGB32)
    image.fill(widgets[0].palette().color(QPalette.ColorRole.Window))
    painter = QPainter(image)
    y = 0
    for shot in shots:
        painter.drawImage(QPoint(0, y), shot)
        y += shot.height() + GAP_PX
    painter.end()
    return image


def _side_by_side(images: list[QImage], background) -> QImage:
    out = QImage(sum(i.width() for i in images) + GAP_PX * (len(images) - 1),
                 max(i.height() for i in images), QImage.Format.Format_RGB32)
    out.fill(background)
    painter = QPainter(out)
    x = 0
    for image in images:
        painter.drawImage(QPoint(x, 0), image)
        x += image.width() + GAP_PX
    painter.end()
    return out
