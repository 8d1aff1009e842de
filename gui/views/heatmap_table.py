"""The heatmap's table: one row per source line, painted by the line's share of the function's
time, with before/after columns when a "before" profile is given.

    model = HeatmapModel(); model.set_profile(profile, before)
    table.setModel(model); table.setItemDelegate(HeatDelegate(table))
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, Qt
from PySide6.QtGui import QBrush, QColor, QFontDatabase, QPainter
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from stallscope.core import lineprof, units
from stallscope.core.lineprof import Line, Profile
from stallscope.gui.colors import (
    BETTER_COLOR,
    HEAT_STOPS,
    HEAT_TEXT_DARK,
    HEAT_TEXT_LIGHT,
    SELECTION_FRAME,
    WORSE_COLOR,
    plot_theme,
)

SOURCE_PAD = "  "  # air between the % column and the code
NOISE_S = 5e-7  # per-sample changes smaller than this are shown as none


def heat_color(t: float) -> QColor:
    """Colour of a line at position t in [0, 1] of the scale."""
    t = min(1.0, max(0.0, t))
    for (t0, c0), (t1, c1) in zip(HEAT_STOPS, HEAT_STOPS[1:], strict=False):
        if t <= t1:
            a, b = QColor(c0), QColor(c1)
            f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
            return QColor(round(a.red() + (b.red() - a.red()) * f),
                          round(a.green() + (b.green() - a.green()) * f),
                          round(a.blue() + (b.blue() - a.blue()) * f))
    return QColor(HEAT_STOPS[-1][1])


def text_on(color: QColor) -> QColor:
    """Readable text on a heat colour: white on the dark end, dark on the light end."""
    luminance = 0.299 * color.red() + 0.587 * color.green() + 0.114 * color.blue()
    return QColor(HEAT_TEXT_LIGHT if luminance < 150 else HEAT_TEXT_DARK)


def seconds(s: float) -> str:
    """A time in seconds with core.units' duration formatter."""
    return units.duration(s * 1e6)


def signed_seconds(s: float) -> str:
    """A change in seconds: "+70.00 ms", "-2.50 ms", "0.0 µs" below NOISE_S."""
    if abs(s) < NOISE_S:
        return units.duration(0.0)
    return ("+" if s > 0 else "-") + units.duration(abs(s) * 1e6)


def per_sample_s(profile: Profile, line: Line) -> float:
    return line.total_s / profile.samples if profile.samples else 0.0


class HeatmapModel(QAbstractTableModel):
    BASE = ("Line", "Hits", "Time", "Per hit", "%")
    COMPARE = ("Before per sample", "Δ per sample")

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.profile: Profile | None = None
        self.before: Profile | None = None
        self.matched: dict[int, Line] = {}
        self.shares: list[float] = []
        self.indent = 0
        self.scale_max = 0.0
        self.mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)

    def set_profile(self, profile: Profile | None, before: Profile | None = None) -> None:
        self.beginResetModel()
        self.profile, self.before = profile, before
        self.matched = lineprof.match_lines(profile, before) if profile and before else {}
        self.shares = profile.shares() if profile else []
        self.indent = lineprof.common_indent(profile.lines) if profile else 0
        self.scale_max = max(self.shares, default=0.0)
        self.endResetModel()

    def headers(self) -> tuple[str, ...]:
        return self.BASE + (self.COMPARE if self.before else ()) + ("Source",)

    def rowCount(self, parent=None) -> int:  # noqa: N802 - Qt API
        if (parent is not None and parent.isValid()) or self.profile is None:
            return 0
        return len(self.profile.lines)

    def columnCount(self, parent=None) -> int:  # noqa: N802 - Qt API
        return 0 if parent is not None and parent.isValid() else len(self.headers())

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            name = self.headers()[section]
            return SOURCE_PAD + name if name == "Source" else name
        if role == Qt.ItemDataRole.TextAlignmentRole:
            left = self.headers()[section] == "Source"
            return int((Qt.AlignmentFlag.AlignLeft if left else Qt.AlignmentFlag.AlignRight)
                       | Qt.AlignmentFlag.AlignVCenter)
        return None

    def row_of(self, lineno: int) -> int:
        for i, ln in enumerate(self.profile.lines if self.profile else []):
            if ln.lineno == lineno:
                return i
        return -1

    def heat(self, row: int) -> float:
        return self.shares[row] / self.scale_max if self.scale_max > 0 else 0.0

    def delta_s(self, line: Line) -> float | None:
        """Change of a line's time per sample against its match in `before` (None: no match)."""
        before = self.matched.get(line.lineno)
        if before is None or self.before is None or self.profile is None:
            return None
        return per_sample_s(self.profile, line) - per_sample_s(self.before, before)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.profile is None:
            return None
        ln = self.profile.lines[index.row()]
        name = self.headers()[index.column()]
        timed = ln.hits > 0
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(ln, name, index.row(), timed)
        if role == Qt.ItemDataRole.BackgroundRole and timed and self.shares[index.row()] > 0:
            return QBrush(heat_color(self.heat(index.row())))
        if role == Qt.ItemDataRole.ForegroundRole:
            if name == "Δ per sample" and timed:
                d = self.delta_s(ln)
                if d is not None and abs(d) >= NOISE_S:
                    return QBrush(QColor(WORSE_COLOR if d > 0 else BETTER_COLOR))
            if timed and self.shares[index.row()] > 0:
                return QBrush(text_on(heat_color(self.heat(index.row()))))
            if name == "Line" or not timed:
                return QBrush(QColor(plot_theme()["dim"]))
            return None
        if role == Qt.ItemDataRole.FontRole and name in ("Source", "Line"):
            return self.mono
        if role == Qt.ItemDataRole.TextAlignmentRole and name != "Source":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and timed:
            return (f"line {ln.lineno}: {ln.hits} hits, {seconds(ln.total_s)} in total, "
                    f"{seconds(ln.per_hit_s)} per hit, {units.pct(self.shares[index.row()])} "
                    "of the function's time")
        return None

    def _text(self, ln: Line, name: str, row: int, timed: bool) -> str:
        if name == "Line":
            return str(ln.lineno)
        if name == "Source":
            return SOURCE_PAD + ln.source.expandtabs(4)[self.indent:]
        if name in self.COMPARE:
            before = self.matched.get(ln.lineno)
            if before is None:
                return "new" if timed and name == "Before per sample" else ""
            assert self.before is not None  # a line matched in `before`
            b = per_sample_s(self.before, before)
            if name == "Before per sample":
                return seconds(b) if before.hits else ""
            if not (timed or b):
                return ""
            delta = self.delta_s(ln)
            assert delta is not None  # matched, with both profiles: data() checked self.profile
            return signed_seconds(delta)
        if not timed:
            return ""
        if name == "Hits":
            return f"{ln.hits:,}"
        if name == "Time":
            return seconds(ln.total_s)
        if name == "Per hit":
            return seconds(ln.per_hit_s)
        if name == "%":
            return units.pct(self.shares[row])
        return ""


class HeatDelegate(QStyledItemDelegate):
    """Keeps a selected line's heat colour and marks the selection with a frame instead."""

    def paint(self, painter: QPainter, option, index) -> None:
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        brush = index.data(Qt.ItemDataRole.BackgroundRole)
        if brush is not None:
            painter.fillRect(option.rect, brush)
        option.state &= ~(QStyle.StateFlag.State_Selected | QStyle.StateFlag.State_HasFocus)
        super().paint(painter, option, index)
        if selected:
            painter.save()
            pen_color = QColor(SELECTION_FRAME)
            r = option.rect
            painter.fillRect(r.left(), r.top(), r.width(), 2, pen_color)
            painter.fillRect(r.left(), r.bottom() - 1, r.width(), 2, pen_color)
            if index.column() == 0:
                painter.fillRect(r.left(), r.top(), 3, r.height(), pen_color)
            painter.restore()
