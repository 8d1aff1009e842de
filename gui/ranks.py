"""Per-rank table of a multi-rank folder: step time, utilization, idle by cause; slowest marked.

Selecting a row emits sig_rank_selected(index); the window shows that rank's timeline.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from stallscope.core.compare import RankRow, rank_rows

from .colors import CAUSE_ORDER, cause_label

SLOWEST_BG = "#ffe3e3"


class RankTable(QTableWidget):
    sig_rank_selected = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        headers = ["rank", "step (ms)", "GPU util."] + [cause_label(c) for c in CAUSE_ORDER]
        self.setColumnCount(len(headers))
        self.setHorizontalHeaderLabels(headers)
        for c in range(3, len(headers)):
            self.horizontalHeaderItem(c).setToolTip(f"GPU idle per step (ms) while the CPU was "
                                                    f"in {headers[c]}")
        self.setStyleSheet("QTableWidget::item:selected { background: #d0e2ff; color: #212529; }")
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(False)
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.rows: list[RankRow] = []
        self.itemSelectionChanged.connect(self._on_selection)

    def set_reports(self, reports, labels) -> None:
        self.rows = rank_rows(reports, labels)
        self.blockSignals(True)
        self.setRowCount(len(self.rows))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, row in enumerate(self.rows):
            label = f"{row.label}  ◀ slowest" if row.slowest else row.label
            util = "-" if row.utilization is None else f"{100 * row.utilization:.1f}%"
            cells = [label, f"{row.step_ms:,.1f}", util] + [
                f"{row.idle_ms_by_cause[c]:,.1f}" for c in CAUSE_ORDER]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if row.slowest:
                    item.setBackground(QBrush(QColor(SLOWEST_BG)))
                    item.setFont(bold)
                    item.setToolTip("the slowest rank: every other rank waits for it")
                self.setItem(r, c, item)
        self.blockSignals(False)
        self.resizeColumnsToContents()
        height = (self.horizontalHeader().sizeHint().height() + self.verticalHeader().length()
                  + 2 * self.frameWidth() + 2)
        self.setFixedHeight(min(height, 240))

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
