"""Ranks of a job: two tables.

`RankTable` (the analysis view's, over fully loaded Reports): step time, utilization, idle by
cause; the rank with the longest step marked. Selecting a row emits sig_rank_selected(index).

`RanksView` (File > Open folder of ranks, over summaries from core/ranks): fills as ranks finish,
sorts by how long the others waited for each rank (the straggler table), names the slowest rank
and its cause, lists what the folder plan picked and skipped; double-click (or Enter, or "Open
rank") emits sig_rank_open_requested(trace path) to load that rank's full trace.
Standalone: `python -m stallscope.gui.controllers.ranks FOLDER [--screenshot OUT.png]` (it needs
its controller, and views never import controllers).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSortFilterProxyModel, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import causes
from stallscope.core.compare import RankRow, rank_rows
from stallscope.core.ranks.stragglers import stragglers
from stallscope.core.ranks.tasks import RankSummary
from stallscope.gui.colors import error_text, follow_theme, plot_theme
from stallscope.gui.colors import rank_row_colors as row_colors
from stallscope.gui.views.rank_model import HELD, RankModel
from stallscope.gui.widgets import plain_label, rich_label, set_rich


class RankTable(QTableWidget):
    sig_rank_selected = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        headers = ["rank", "step (ms)", "GPU util."] + [causes.label(c) for c in causes.CAUSES]
        self.setColumnCount(len(headers))
        # two-line headers ("queued\nwork"): the numbers below are narrower than the words
        self.setHorizontalHeaderLabels([h.replace(" ", "\n", 1) for h in headers])
        for c in range(3, len(headers)):
            item = self.horizontalHeaderItem(c)
            if item is not None:  # set by setHorizontalHeaderLabels
                item.setToolTip(f"GPU idle per step (ms) while the CPU was in {headers[c]}")
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(False)
        self.verticalHeader().setVisible(False)
        # every column at least as wide as its text, the rank's first (never squeezed to
        # "ra… 0"); room to spare is shared out, a table too narrow for all scrolls sideways
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.horizontalHeader().setStretchLastSection(False)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self._natural: list[int] = []
        self.rows: list[RankRow] = []
        self._shown: tuple | None = None  # set_reports arguments, to repaint on a theme switch
        self.itemSelectionChanged.connect(self._on_selection)
        self._style()
        follow_theme(self.apply_theme)

    def _style(self) -> None:
        _, selected, text = row_colors()
        self.setStyleSheet(f"QTableWidget::item:selected {{ background: {selected}; "
                           f"color: {text}; }}")

    def apply_theme(self, _name: str = "") -> None:
        self._style()
        if self._shown is not None:
            current = self.currentRow()
            self.set_reports(*self._shown)
            self.blockSignals(True)
            self.select_rank(current)
            self.blockSignals(False)

    def set_reports(self, reports, labels, slowest: str | None = None) -> None:
        """One row per rank; `slowest`: the straggler's label (else the longest step)."""
        self._shown = (reports, labels, slowest)
        self.rows = rank_rows(reports, labels, slowest)
        slowest_bg = row_colors()[0]
        self.blockSignals(True)
        self.setRowCount(len(self.rows))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, row in enumerate(self.rows):
            label = f"{row.label}  ◀ slowest" if row.slowest else row.label
            util = "-" if row.utilization is None else f"{100 * row.utilization:.1f}%"
            cells = [label, f"{row.step_ms:,.1f}", util] + [
                f"{row.idle_ms_by_cause[c]:,.1f}" for c in causes.CAUSES]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if row.slowest:
                    item.setBackground(QBrush(QColor(slowest_bg)))
                    item.setFont(bold)
                    item.setToolTip("the slowest rank: every other rank waits for it")
                self.setItem(r, c, item)
        self.blockSignals(False)
        header = self.horizontalHeader()
        self._natural = [max(self.sizeHintForColumn(c), header.sectionSizeHint(c))
                         for c in range(self.columnCount())]
        self._fit()

    def _fit(self) -> None:
        """Columns: their natural widths plus an equal share of the room left. Height: every
        row (up to 240 px), plus the sideways scroll bar when the columns do not fit."""
        if not self._natural:
            return
        spare = self.viewport().width() - sum(self._natural)
        share = max(spare, 0) // len(self._natural)
        for c, width in enumerate(self._natural):
            self.setColumnWidth(c, width + share)
        bar = self.horizontalScrollBar().sizeHint().height() if spare < 0 else 0
        height = (self.horizontalHeader().sizeHint().height() + self.verticalHeader().length()
                  + 2 * self.frameWidth() + 2 + bar)
        self.setFixedHeight(min(height, 240))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit()

    @property
    def slowest_index(self) -> int | None:
        return next((i for i, r in enumerate(self.rows) if r.slowest), None)

    def select_rank(self, index: int) -> None:
        if 0 <= index < self.rowCount() and self.currentRow() != index:
            self.selectRow(index)

    def _on_selection(self) -> None:
        rows = self.selectionModel().selectedRows()
        if rows:
            self.sig_rank_selected.emit(rows[0].row())


# ----------------------------------------------------------------------------- rank job view

STRAGGLER_DELAY_MS = 300  # the straggler table is recomputed at most this often while ranks land


class _RankSort(QSortFilterProxyModel):
    """Sorts by the column's number (Qt.UserRole); equal values keep rank order."""

    def lessThan(self, left, right) -> bool:  # noqa: N802 - Qt's name
        a, b = left.data(Qt.ItemDataRole.UserRole), right.data(Qt.ItemDataRole.UserRole)
        if a != b:
            try:
                return a < b
            except TypeError:
                return str(a) < str(b)
        model = self.sourceModel()
        ra = model.index(left.row(), 0).data(Qt.ItemDataRole.UserRole)
        rb = model.index(right.row(), 0).data(Qt.ItemDataRole.UserRole)
        # descending sorts flip this too: ties then list the higher rank first, so break ties
        # against the sort order to keep rank order either way
        tie = (str(ra) < str(rb)) if type(ra) is not type(rb) else ra < rb
        return tie if self.sortOrder() == Qt.SortOrder.AscendingOrder else not tie


class RanksView(QWidget):
    sig_rank_open_requested = Signal(str)  # the trace file of the rank to open in full
    sig_cancel_requested = Signal()

    def __init__(self, parent=None, details: bool = False) -> None:
        super().__init__(parent)
        self.plan = None
        self.job = None
        self.failures: list = []
        self.total = 0
        self.model = RankModel(self)
        self.proxy = _RankSort(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.title = rich_label("<b>Ranks</b>")
        self.why = plain_label()
        self.why.setWordWrap(True)
        self.why.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.status = plain_label()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.sig_cancel_requested)
        self.open_button = QPushButton("Open rank")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_current)
        bar = QHBoxLayout()
        bar.addWidget(self.progress, 1)
        bar.addWidget(self.status)
        bar.addWidget(self.cancel_button)
        bar.addWidget(self.open_button)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(HELD, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.doubleClicked.connect(lambda _i: self._open_current())
        self.table.activated.connect(lambda _i: self._open_current())
        self.table.selectionModel().selectionChanged.connect(
            lambda *_: self.open_button.setEnabled(self.current_path() is not None))
        self.straggler = rich_label("")  # names a rank's file: set_rich escapes it
        self.straggler.setWordWrap(True)
        # how to go on, in the view (a status-bar message is cut at the window's edge)
        self.hint = plain_label("Double-click a rank (or select it and press Enter or Open "
                                "rank) to open its full trace.")
        self.hint.setWordWrap(True)
        self.hint.hide()
        self.skipped = QPlainTextEdit()
        self.skipped.setReadOnly(True)
        self.skipped.setMaximumHeight(72)
        self.skipped.setPlaceholderText("every file in the folder was picked")
        self.details = QPlainTextEdit() if details else None
        box = QVBoxLayout(self)
        for w in (self.title, self.why):
            box.addWidget(w)
        box.addLayout(bar)
        box.addWidget(self.table, 3)
        box.addWidget(self.straggler)
        box.addWidget(self.hint)
        box.addWidget(QLabel("Skipped files and why"))
        box.addWidget(self.skipped)
        if self.details is not None:
            self.details.setReadOnly(True)
            self.details.setPlaceholderText("double-click a rank to load its full trace")
            self.details.setFont(QFont("monospace"))
            box.addWidget(self.details, 2)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._update_stragglers)
        self._style()
        follow_theme(self.apply_theme)

    # ------------------------------------------------------------------ wiring

    def bind(self, controller, open_ranks: bool = True) -> None:
        """Connect to a gui.controllers.ranks.RanksController (both ways). With
        open_ranks=False, sig_rank_open_requested is left for the caller (the main window opens
        the trace in its own viewer)."""
        controller.sig_job_started.connect(self.start)
        controller.sig_plan_ready.connect(self.set_plan)
        controller.sig_rank_progress.connect(self.set_progress)
        controller.sig_rank_finished.connect(self.add_result)
        controller.sig_job_finished.connect(self.set_job)
        controller.sig_job_failed.connect(self.show_error)
        controller.sig_job_cancelled.connect(lambda: self._end("cancelled"))
        controller.sig_rank_load_started.connect(self._show_loading)
        controller.sig_rank_document_loaded.connect(self.show_document)
        controller.sig_rank_load_failed.connect(self.show_error)
        self.sig_cancel_requested.connect(controller.cancel)
        if open_ranks:
            self.sig_rank_open_requested.connect(controller.open_rank)

    def _style(self) -> None:
        self.hint.setStyleSheet(f"color: {plot_theme()['dim']};")
        self.model.slowest_bg = row_colors()[0]
        _, selected, text = row_colors()
        self.table.setStyleSheet(f"QTableView::item:selected {{ background: {selected}; "
                                 f"color: {text}; }}")

    def apply_theme(self, _name: str = "") -> None:
        self._style()
        self.model.set_stragglers(self.model.table)

    # ------------------------------------------------------------------ filling

    def start(self, path: str) -> None:
        self.plan, self.job, self.failures, self.total = None, None, [], 0
        self.model.clear()
        set_rich(self.title, "<b>Ranks</b> · {}", path)
        self.why.setText("planning the folder ...")
        self.straggler.setText("")
        self.hint.hide()
        self.skipped.setPlainText("")
        self.progress.setRange(0, 0)
        self.status.setText("")
        self.cancel_button.setEnabled(True)

    def set_plan(self, plan) -> None:
        self.plan = plan
        self.total = len(plan.picks)
        self.why.setText(plan.why() + "".join(
            f"\n{line.strip()}" for line in plan.lines()[1:] if not line.startswith("  skipped")))
        self.progress.setRange(0, max(self.total, 1))
        self.progress.setValue(0)
        self._fill_skipped()

    def set_progress(self, done: int, total: int) -> None:
        self.total = total
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.progress.setFormat(f"{done} / {total} ranks")

    def add_result(self, _index: int, result) -> None:
        if isinstance(result, RankSummary):
            self.model.add(result)
            if not self._timer.isActive():
                self._timer.start(STRAGGLER_DELAY_MS)
        else:
            self.failures.append(result)
            self._fill_skipped()
        self.status.setText(f"{self.model.rowCount()} analysed"
                            + (f", {len(self.failures)} failed" if self.failures else ""))

    def set_job(self, job) -> None:
        self.job = job
        self._timer.stop()
        self.model.set_stragglers(job.stragglers)
        self._show_straggler(job.stragglers)
        self._end("done")

    def show_error(self, message: str) -> None:
        set_rich(self.straggler, '<span style="color:{}">{}</span>', error_text(), message)
        if self.job is None and self.cancel_button.isEnabled():
            self._end("failed")

    def _show_loading(self, path: str) -> None:
        if self.details is not None:
            self.details.setPlainText(f"loading {path} ...")

    def show_document(self, document) -> None:
        """A rank's full trace, loaded: its text report in the details pane (standalone)."""
        if self.details is not None and document.reports:
            from stallscope.core.render.text import render

            self.details.setPlainText(render(document.reports[0]))

    def _end(self, how: str) -> None:
        self.cancel_button.setEnabled(False)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self.status.setText(f"{self.model.rowCount()} analysed"
                            + (f", {len(self.failures)} failed" if self.failures else "")
                            + ("" if how == "done" else f" ({how})"))
        if self.model.rowCount():
            self.open_button.setToolTip("load the selected rank's full trace (or double-click "
                                        "a rank, or press Enter)")
        self.hint.setVisible(self.model.rowCount() > 0)

    def _update_stragglers(self) -> None:
        if len(self.model.summaries) >= 2 and self.job is None:
            table = stragglers(self.model.summaries)
            self.model.set_stragglers(table)
            self._show_straggler(table, partial=True)

    def _show_straggler(self, table, partial: bool = False) -> None:
        so_far = f" (so far, {len(self.model.summaries)} of {self.total} ranks)" if partial else ""
        if table is None:
            self.straggler.setText("")
        elif table.slowest is None:
            notes = list(table.notes)
            set_rich(self.straggler, "No straggler: no rank made the others wait{}"
                     + "<br>{}" * len(notes), so_far, *notes)
        else:
            set_rich(self.straggler, "<b>Straggler{}:</b> {}", so_far, table.slowest.text)

    def _fill_skipped(self) -> None:
        lines = []
        if self.plan is not None:
            lines += [f"{s.path.name}: {s.reason}" for s in self.plan.all_skipped]
        lines += [f"{Path(f.path).name}: could not be analysed: {f.message}"
                  for f in self.failures]
        self.skipped.setPlainText("\n".join(lines))

    # ------------------------------------------------------------------ rows

    def row_keys(self) -> list[str]:
        """Rank keys in the order shown (after sorting)."""
        return [self.proxy.index(r, 0).data(Qt.ItemDataRole.DisplayRole).split("  ◀")[0]
                for r in range(self.proxy.rowCount())]

    def current_path(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.summaries[self.proxy.mapToSource(rows[0]).row()].path

    def _open_current(self) -> None:
        path = self.current_path()
        if path is not None:
            self.sig_rank_open_requested.emit(path)

