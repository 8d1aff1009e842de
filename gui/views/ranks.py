"""Per-rank table of a multi-rank folder: step time, utilization, idle by cause; slowest marked.

Selecting a row emits sig_rank_selected(index); the window shows that rank's timeline.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from stallscope.core.compare import RankRow, rank_rows
from stallscope.gui.colors import CAUSE_ORDER, cause_label, follow_theme, plot_theme

# (slowest row background, selected row background, selected row text) per theme
ROW_COLORS = {"light": ("#ffe3e3", "#d0e2ff", "#212529"),
              "dark": ("#4a2226", "#27395a", "#e7e9ec")}
SLOWEST_BG = ROW_COLORS["light"][0]


def row_colors() -> tuple[str, str, str]:
    return ROW_COLORS["dark" if plot_theme()["dark"] else "light"]


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
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(False)
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.rows: list[RankRow] = []
        self._shown: tuple | None = None  # (reports, labels), to repaint on a theme switch
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

    def set_reports(self, reports, labels) -> None:
        self._shown = (reports, labels)
        self.rows = rank_rows(reports, labels)
        slowest_bg = row_colors()[0]
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
                    item.setBackground(QBrush(QColor(slowest_bg)))
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
