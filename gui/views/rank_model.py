"""The table model of a rank job: one row per analysed rank, filled as ranks finish.

Columns hold text for display and a number for sorting (Qt.UserRole), so a QSortFilterProxyModel
sorts 128 rows by straggler wait without parsing text. The slowest rank's row is marked.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPixmap

from stallscope.core import causes, units
from stallscope.core.ranks.stragglers import Stragglers
from stallscope.core.ranks.tasks import RankSummary
from stallscope.gui.colors import CAUSE_COLORS, rank_row_colors

COLUMNS = ("rank", "step (mean)", "GPU util.", "exposed comm", "held others up/step",
           "waited/step", "last", "largest idle cause (per step)")
HELD = COLUMNS.index("held others up/step")
TIPS = {
    "held others up/step": "per compared step: for each collective this rank reached last, the "
                           "mean time the other ranks waited for it",
    "waited/step": "per compared step: how long this rank's collectives waited for the last "
                   "rank to arrive",
    "last": "how many collectives this rank reached last",
    "exposed comm": "communication not hidden behind compute, as a share of the window",
}


def _swatch(color: str) -> QPixmap:
    pix = QPixmap(10, 10)
    pix.fill(QColor(color))
    return pix


class RankModel(QAbstractTableModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.summaries: list[RankSummary] = []
        self.table: Stragglers | None = None
        self.slowest_bg = rank_row_colors()[0]
        self._icons: dict[str, QPixmap] = {}

    # ------------------------------------------------------------------ filling

    def clear(self) -> None:
        self.beginResetModel()
        self.summaries, self.table = [], None
        self.endResetModel()

    def add(self, summary: RankSummary) -> None:
        n = len(self.summaries)
        self.beginInsertRows(QModelIndex(), n, n)
        self.summaries.append(summary)
        self.endInsertRows()

    def set_stragglers(self, table: Stragglers | None) -> None:
        self.table = table
        if self.summaries:
            self.dataChanged.emit(self.index(0, 0),
                                  self.index(len(self.summaries) - 1, len(COLUMNS) - 1))

    @property
    def slowest_key(self) -> str | None:
        return self.table.slowest.key if self.table and self.table.slowest else None

    # ------------------------------------------------------------------ Qt model

    def rowCount(self, parent=None) -> int:  # noqa: N802 - Qt's name
        return 0 if parent is not None and parent.isValid() else len(self.summaries)

    def columnCount(self, parent=None) -> int:  # noqa: N802
        return 0 if parent is not None and parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return TIPS.get(COLUMNS[section])
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        s = self.summaries[index.row()]
        col = index.column()
        slowest = s.key == self.slowest_key
        if role == Qt.ItemDataRole.DisplayRole:
            text = self.cells(s)[col]
            return f"{text}  ◀ slowest" if col == 0 and slowest else text
        if role == Qt.ItemDataRole.UserRole:
            return self.sort_key(s, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and 0 < col < len(COLUMNS) - 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.BackgroundRole and slowest:
            return QBrush(QColor(self.slowest_bg))
        if role == Qt.ItemDataRole.FontRole and slowest:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            if slowest and self.table is not None:
                return self.table.slowest.text
            return s.path
        if role == Qt.ItemDataRole.DecorationRole and col == len(COLUMNS) - 1:
            cause = s.largest_cause()
            if cause is not None:
                return self._icons.setdefault(cause, _swatch(CAUSE_COLORS[cause]))
        return None

    # ------------------------------------------------------------------ figures

    def figures(self, s: RankSummary):
        return self.table.ranks.get(s.key) if self.table is not None else None

    def cells(self, s: RankSummary) -> list[str]:
        dev = s.device_json()
        fig = self.figures(s)
        lo, hi = s.report["window_us"]
        exposed = ("-" if dev is None or hi <= lo
                   else units.pct(dev.get("exposed_comm_us", 0.0) / (hi - lo)))
        cause = s.largest_cause()
        per = max(len(s.steps), 1)
        compared = max(len(self.table.steps), 1) if self.table is not None else 1
        return [
            s.key, units.ms(1000 * s.step_ms()),
            "-" if dev is None else units.pct(dev["utilization"]), exposed,
            "-" if fig is None else units.duration(fig.held_up_us / compared),
            "-" if fig is None else units.duration(fig.waited_us / compared),
            "-" if fig is None else str(fig.last_count),
            "-" if cause is None or dev is None else
            f"{causes.label(cause)} {units.duration(dev['idle_by_cause'][cause] / per)}",
        ]

    def sort_key(self, s: RankSummary, col: int) -> float | str:
        dev = s.device_json()
        fig = self.figures(s)
        lo, hi = s.report["window_us"]
        if col == 0:
            return s.rank if s.rank is not None else s.key
        values = [
            None, s.step_ms(),
            None if dev is None else dev["utilization"],
            None if dev is None or hi <= lo else dev.get("exposed_comm_us", 0.0) / (hi - lo),
            None if fig is None else fig.held_up_us,
            None if fig is None else fig.waited_us,
            None if fig is None else fig.last_count,
        ]
        if col < len(values):
            v = values[col]
            return float("-inf") if v is None else float(v)
        cause = s.largest_cause()
        return "" if cause is None else causes.label(cause)

