"""The tune dialog's table: one row per finished trial (settings, step time, data wait, peak
RSS, status), the best one starred and bold, failed ones in red.

    table = TrialTable()
    table.add(trial)                  # a finished trial's row, scrolled to
    table.mark_best(trials, best)     # the best's row starred (its index; None: no best yet)
    table.clear_trials()
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from stallscope.core import units
from stallscope.core.tune.trial import Trial
from stallscope.gui.colors import WORSE_COLOR, qcolor

COLUMNS = ("#", "settings", "step", "data wait", "peak RSS", "status")


class TrialTable(QTableWidget):
    def __init__(self) -> None:
        super().__init__(0, len(COLUMNS))
        self.setHorizontalHeaderLabels(COLUMNS)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.setMinimumHeight(130)

    def clear_trials(self) -> None:
        self.setRowCount(0)

    def add(self, t: Trial) -> None:
        row = self.rowCount()
        self.insertRow(row)
        cells = (str(t.index), t.label,
                 "-" if t.step_ms is None else units.ms(t.step_ms * 1e3),
                 "-" if t.data_wait_ms is None else units.ms(t.data_wait_ms * 1e3),
                 "-" if not t.peak_rss else units.size(t.peak_rss),
                 t.status + (f": {t.message}" if t.message else ""))
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if 2 <= col <= 4:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if col == 5 and not t.ok:
                item.setForeground(qcolor(WORSE_COLOR))
            item.setToolTip(text)
            self.setItem(row, col, item)
        self.scrollToBottom()

    def mark_best(self, trials: list[Trial], best: int | None) -> None:
        for row, t in enumerate(trials):
            item = self.item(row, 0)
            if item is not None:
                item.setText(f"{t.index} ★" if t.index == best else str(t.index))
                font = item.font()
                font.setBold(t.index == best)
                for col in range(self.columnCount()):
                    cell = self.item(row, col)
                    if cell is not None:
                        cell.setFont(font)
