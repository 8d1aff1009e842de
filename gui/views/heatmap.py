"""The line heatmap: the source of Dataset.__getitem__ with each line painted by its share of the
function's time, the heaviest lines listed beside it, and a before/after comparison.

    view = HeatmapView()
    view.set_profile(profile, compare=None)         # core.lineprof.Profile (compare: the "before")
    view.set_profiles(profiles, compare=[...])       # several functions (--lineprof-depth)
    find_line_stats(session_dir) -> list[Path]       # for the main window
    open_profiles(path, parent) -> list[Profile] | None   # asks before reading a .lprof pickle

    python -m stallscope.gui.views.heatmap SESSION|FILE.json|FILE.lprof [BEFORE]
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QProcess, QSize, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontDatabase,
    QFontMetrics,
    QLinearGradient,
    QPainter,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import lineprof
from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof.stats import Line, Profile
from stallscope.gui.colors import (
    BETTER_COLOR,
    MUTED_TEXT,
    WORSE_COLOR,
    follow_theme,
    warning_colors,
)


def dim_text() -> str:
    """The theme's secondary text colour (readable in light and dark mode)."""
    try:
        from stallscope.gui.theme import palette

        return palette().text_dim
    except Exception:  # noqa: BLE001 - the view also runs where the theme module is absent
        return MUTED_TEXT

# Sequential scale (light yellow -> orange -> deep red), position = share / largest share.
HEAT_STOPS = ((0.0, "#fff9db"), (0.25, "#ffe066"), (0.5, "#ffa94d"), (0.75, "#f76707"),
              (1.0, "#c92a2a"))
TOP_N = 8
SOURCE_PAD = "  "  # air between the % column and the code


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
    luminance = 0.299 * color.red() + 0.587 * color.green() + 0.114 * color.blue()
    return QColor("#ffffff") if luminance < 150 else QColor("#1d2229")


def fmt_time(seconds: float) -> str:
    if seconds <= 0:
        return "0"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def fmt_delta_ms(ms: float) -> str:
    if abs(ms) < 0.0005:
        return "0.000 ms"
    return f"{ms:+.3f} ms" if abs(ms) < 10 else f"{ms:+.1f} ms"


def match_lines(after: Profile, before: Profile) -> dict[int, Line]:
    """Line of `before` for each line of `after`: same number and text, else same text."""
    by_text: dict[str, list[Line]] = {}
    for ln in before.lines:
        by_text.setdefault(ln.source.strip(), []).append(ln)
    out = {}
    used: set[int] = set()
    for ln in after.lines:
        same = before.line(ln.lineno)
        if same is not None and same.source.strip() == ln.source.strip():
            out[ln.lineno] = same
            used.add(id(same))
    for ln in after.lines:
        if ln.lineno in out or not ln.source.strip():
            continue
        cands = [c for c in by_text.get(ln.source.strip(), []) if id(c) not in used]
        if cands:
            out[ln.lineno] = cands[0]
            used.add(id(cands[0]))
    return out


def _common_indent(lines: list[Line]) -> int:
    """Indentation every non-blank line shares (a method's source shown flush left)."""
    widths = [len(s) - len(s.lstrip()) for s in (ln.source.expandtabs(4) for ln in lines)
              if s.strip()]
    return min(widths, default=0)


# ---------------------------------------------------------------------------------------------
# Table model


class HeatmapModel(QAbstractTableModel):
    BASE = ("Line", "Hits", "Time", "Per hit", "%")
    COMPARE = ("Before ms/sample", "Δ ms/sample")

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
        self.matched = match_lines(profile, before) if profile and before else {}
        self.shares = [profile.share(ln) for ln in profile.lines] if profile else []
        self.indent = _common_indent(profile.lines) if profile else 0
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

    def per_sample_ms(self, profile: Profile, line: Line) -> float:
        return 1e3 * line.total_s / profile.samples if profile.samples else 0.0

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
            if name == "Δ ms/sample":
                before = self.matched.get(ln.lineno)
                if before is not None and timed:
                    d = self.per_sample_ms(self.profile, ln) - self.per_sample_ms(self.before,
                                                                                  before)
                    if abs(d) >= 0.0005:
                        return QBrush(QColor(WORSE_COLOR if d > 0 else BETTER_COLOR))
            if timed and self.shares[index.row()] > 0:
                return QBrush(text_on(heat_color(self.heat(index.row()))))
            if name == "Line" or not timed:
                return QBrush(QColor(dim_text()))
            return None
        if role == Qt.ItemDataRole.FontRole and name in ("Source", "Line"):
            return self.mono
        if role == Qt.ItemDataRole.TextAlignmentRole and name != "Source":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and timed:
            return (f"line {ln.lineno}: {ln.hits} hits, {fmt_time(ln.total_s)} in total, "
                    f"{fmt_time(ln.per_hit_s)} per hit, {100 * self.shares[index.row()]:.1f}% "
                    "of the function's time")
        return None

    def _text(self, ln: Line, name: str, row: int, timed: bool) -> str:
        if name == "Line":
            return str(ln.lineno)
        if name == "Source":
            return SOURCE_PAD + ln.source.expandtabs(4)[self.indent:]
        if name in ("Before ms/sample", "Δ ms/sample"):
            before = self.matched.get(ln.lineno)
            if before is None:
                return "new" if timed and name == "Before ms/sample" else ""
            b = self.per_sample_ms(self.before, before)
            if name == "Before ms/sample":
                return f"{b:.3f}" if before.hits else ""
            return fmt_delta_ms(self.per_sample_ms(self.profile, ln) - b) if timed or b else ""
        if not timed:
            return ""
        if name == "Hits":
            return f"{ln.hits:,}"
        if name == "Time":
            return fmt_time(ln.total_s)
        if name == "Per hit":
            return fmt_time(ln.per_hit_s)
        if name == "%":
            return f"{100 * self.shares[row]:.1f}"
        return ""


# ---------------------------------------------------------------------------------------------
# Widgets


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
            pen_color = QColor("#1c7ed6")
            r = option.rect
            painter.fillRect(r.left(), r.top(), r.width(), 2, pen_color)
            painter.fillRect(r.left(), r.bottom() - 1, r.width(), 2, pen_color)
            if index.column() == 0:
                painter.fillRect(r.left(), r.top(), 3, r.height(), pen_color)
            painter.restore()


class HeatLegend(QWidget):
    """The colour scale: a gradient from 0% to the largest line's share."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.max_share = 1.0
        self.setMinimumHeight(44)
        self.setToolTip("Each line's background: its share of the function's time, "
                        "on a scale up to the heaviest line")

    def set_max(self, share: float) -> None:
        self.max_share = max(share, 1e-9)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(260, 44)

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = p.fontMetrics()
        x0, x1 = 6, self.width() - 6
        top = fm.height() + 2
        bar_h = 12
        p.setPen(self.palette().text().color())
        p.drawText(x0, fm.ascent(), "Share of the function's time")
        grad = QLinearGradient(x0, 0, x1, 0)
        for t, c in HEAT_STOPS:
            grad.setColorAt(t, QColor(c))
        p.setPen(QColor("#adb5bd"))
        p.setBrush(grad)
        p.drawRect(x0, top, x1 - x0, bar_h)
        p.setPen(self.palette().text().color())
        y = top + bar_h + fm.ascent() + 2
        for t in (0.0, 0.5, 1.0):
            label = f"{100 * self.max_share * t:.0f}%"
            w = fm.horizontalAdvance(label)
            x = x0 + t * (x1 - x0) - w * t
            p.drawText(round(x), y, label)
        p.end()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        return QSize(160, 2 * fm.height() + 18)


class MissingLineProfiler(QWidget):
    """A banner for an interpreter without line_profiler, with a button that installs it."""

    sig_install_finished = Signal(bool)

    def __init__(self, python: str, parent=None) -> None:
        super().__init__(parent)
        self.python = python
        self.command = lineprof.install_command(python)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        self.label = QLabel(
            f"line_profiler is not installed in <b>{python}</b>, so the run has no line "
            f"heatmap. Install it with:<br><code>{' '.join(self.command)}</code>")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.button = QPushButton("Install line_profiler")
        self.button.clicked.connect(self.install)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.button)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._restyle()
        follow_theme(self._restyle)
        self.process: QProcess | None = None

    def _restyle(self, _theme: str = "") -> None:
        c = warning_colors()
        self.setStyleSheet(f"MissingLineProfiler {{ background: {c['bg']}; border: 1px solid "
                           f"{c['border']}; border-radius: 4px; }} QLabel {{ color: {c['fg']}; }}")

    def install(self) -> None:
        self.button.setEnabled(False)
        self.button.setText("Installing…")
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.finished.connect(self._done)
        self.process.errorOccurred.connect(lambda _e: self._done(-1, None))
        self.process.start(self.command[0], self.command[1:])

    def _done(self, code: int, _status) -> None:
        if self.process is None:
            return
        out = bytes(self.process.readAll()).decode(errors="replace").strip().splitlines()
        ok = code == 0
        tail = out[-1] if out else self.process.errorString()
        self.label.setText("line_profiler is installed: run again with the line heatmap on."
                            if ok else f"Install failed ({tail}); run it yourself:<br><code>"
                            f"{' '.join(self.command)}</code>")
        self.button.setText("Installed" if ok else "Retry")
        self.button.setEnabled(not ok)
        self.process = None
        self.sig_install_finished.emit(ok)


class HeatmapView(QWidget):
    """Source painted by time, top lines beside it; optional before/after comparison."""

    sig_line_selected = Signal(int)  # line number

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.profiles: list[Profile] = []
        self.compare: list[Profile] = []
        self.model = HeatmapModel(self)

        self.title = QLabel()
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.subtitle = QLabel()
        self.subtitle.setStyleSheet(f"color: {dim_text()};")
        self.subtitle.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.function_box = QComboBox()
        self.function_box.setToolTip("Profiled functions of this run")
        self.function_box.currentIndexChanged.connect(self._show_index)
        self.warnings = QLabel()
        self.warnings.setWordWrap(True)
        self._style_warnings()
        follow_theme(self._style_warnings)
        self.warnings.hide()
        self.missing: MissingLineProfiler | None = None

        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(
            self.table.fontMetrics().height() + 6)
        self.table.horizontalHeader().setHighlightSections(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.table.setItemDelegate(HeatDelegate(self.table))
        self.table.selectionModel().currentRowChanged.connect(self._row_changed)

        self.legend = HeatLegend()
        self.top_label = QLabel("Heaviest lines")
        self.top_label.setStyleSheet("font-weight: bold;")
        self.top_list = QListWidget()
        self.top_list.setWordWrap(True)
        self.top_list.setSpacing(2)
        self.top_list.itemClicked.connect(self._top_clicked)
        self.top_list.currentItemChanged.connect(lambda cur, _prev: self._top_clicked(cur))

        side = QWidget()
        side_lay = QVBoxLayout(side)
        side_lay.setContentsMargins(8, 0, 0, 0)
        side_lay.addWidget(self.legend)
        side_lay.addSpacing(6)
        side_lay.addWidget(self.top_label)
        side_lay.addWidget(self.top_list, 1)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([820, 300])
        self.splitter = split

        head = QHBoxLayout()
        titles = QVBoxLayout()
        titles.setSpacing(2)
        titles.addWidget(self.title)
        titles.addWidget(self.subtitle)
        head.addLayout(titles, 1)
        head.addWidget(self.function_box, 0, Qt.AlignmentFlag.AlignTop)
        self.empty = QLabel("No line stats. Run with “--lineprof auto” to record where "
                            "Dataset.__getitem__ spends its time.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setStyleSheet(f"color: {dim_text()};")

        self.lay = QVBoxLayout(self)
        self.lay.addLayout(head)
        self.lay.addWidget(self.warnings)
        self.lay.addWidget(self.empty, 1)
        self.lay.addWidget(split, 1)
        self._set_empty(True)

    # -- public
    def _style_warnings(self, _theme: str = "") -> None:
        c = warning_colors()
        self.warnings.setStyleSheet(f"background: {c['bg']}; color: {c['fg']}; border: 1px solid "
                                    f"{c['border']}; border-radius: 4px; padding: 4px 8px;")

    def set_profile(self, profile: Profile | None, compare: Profile | None = None) -> None:
        self.set_profiles([profile] if profile else [], [compare] if compare else None)

    def set_profiles(self, profiles: list[Profile], compare: list[Profile] | None = None) -> None:
        self.profiles = list(profiles)
        self.compare = list(compare or [])
        self.function_box.blockSignals(True)
        self.function_box.clear()
        for p in self.profiles:
            self.function_box.addItem(p.qualname)
        self.function_box.blockSignals(False)
        self.function_box.setVisible(len(self.profiles) > 1)
        self._set_empty(not self.profiles)
        if self.profiles:
            self._show_index(0)
        else:
            self.model.set_profile(None)
            self.title.setText("Line heatmap")
            self.subtitle.setText("")
            self.top_list.clear()
            self.warnings.hide()

    def show_missing_line_profiler(self, python: str) -> MissingLineProfiler:
        """Say the run's interpreter lacks line_profiler and offer to install it."""
        if self.missing is None:
            self.missing = MissingLineProfiler(python)
            self.lay.insertWidget(1, self.missing)
        return self.missing

    def select_line(self, lineno: int) -> bool:
        row = self.model.row_of(lineno)
        if row < 0:
            return False
        index = self.model.index(row, 0)
        self.table.selectRow(row)
        self.table.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)
        return True

    @property
    def profile(self) -> Profile | None:
        return self.model.profile

    # -- internals
    def _set_empty(self, empty: bool) -> None:
        self.empty.setVisible(empty)
        self.splitter.setVisible(not empty)

    def _before_for(self, profile: Profile) -> Profile | None:
        for p in self.compare:
            if p.qualname == profile.qualname:
                return p
        return self.compare[0] if len(self.compare) == 1 and len(self.profiles) == 1 else None

    def _show_index(self, i: int) -> None:
        if not (0 <= i < len(self.profiles)):
            return
        p = self.profiles[i]
        before = self._before_for(p)
        self.model.set_profile(p, before)
        self.legend.set_max(self.model.scale_max)
        self.title.setText(p.qualname)
        per = (f"{fmt_time(p.total_s / p.samples)} per sample" if p.samples else "no samples")
        parts = [f"{Path(p.file).name}:{p.first_line}", f"{p.samples:,} samples", per,
                 f"{fmt_time(p.total_s)} in total"]
        if p.workers:
            parts.append(f"merged over {p.workers} worker{'s' if p.workers > 1 else ''}")
        if before is not None and before.samples and p.samples:
            b = before.total_s / before.samples
            a = p.total_s / p.samples
            change = (a - b) / b * 100 if b > 0 else 0.0
            parts.append(f"before: {fmt_time(b)} per sample ({change:+.0f}%)")
        self.subtitle.setText("  ·  ".join(parts))
        self.subtitle.setToolTip(p.file)
        warnings = list(p.warnings)
        match = lineprof.match_source(p)
        if match.warning:
            warnings.append(match.warning)
        self.warnings.setText("\n".join(f"⚠ {w}" for w in dict.fromkeys(warnings)))
        self.warnings.setVisible(bool(warnings))
        self._fill_top(p)
        self._fit_columns()

    def _fill_top(self, p: Profile) -> None:
        self.top_list.blockSignals(True)
        self.top_list.clear()
        for rank, ln in enumerate(p.top_lines(TOP_N), 1):
            share = p.share(ln)
            item = QListWidgetItem(f"{100 * share:5.1f}%   line {ln.lineno}\n{ln.source.strip()}")
            item.setData(Qt.ItemDataRole.UserRole, ln.lineno)
            color = heat_color(share / self.model.scale_max if self.model.scale_max else 0)
            item.setBackground(QBrush(color))
            item.setForeground(QBrush(text_on(color)))
            item.setToolTip(f"#{rank}: {ln.hits} hits, {fmt_time(ln.total_s)}, "
                            f"{fmt_time(ln.per_hit_s)} per hit")
            self.top_list.addItem(item)
        self.top_list.blockSignals(False)
        self.top_label.setText(f"Heaviest lines ({min(TOP_N, len(p.top_lines(TOP_N)))})")

    def _fit_columns(self) -> None:
        header = self.table.horizontalHeader()
        fm = self.table.fontMetrics()
        for col, name in enumerate(self.model.headers()):
            font_fm = QFontMetrics(self.model.mono) if name in ("Source", "Line") else fm
            widest = max([fm.horizontalAdvance(SOURCE_PAD + name)] + [
                font_fm.horizontalAdvance(str(self.model.data(self.model.index(r, col)) or ""))
                for r in range(self.model.rowCount())])
            header.resizeSection(col, widest + 18)
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)

    def _top_clicked(self, item: QListWidgetItem | None) -> None:
        if item is not None:
            self.select_line(int(item.data(Qt.ItemDataRole.UserRole)))

    def _row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid() and self.model.profile is not None:
            self.sig_line_selected.emit(self.model.profile.lines[current.row()].lineno)


# ---------------------------------------------------------------------------------------------
# Opening files


def find_line_stats(session_dir: str | Path) -> list[Path]:
    """Line-stats files of a session folder (empty when the run had no --lineprof)."""
    return lineprof.find_profiles(session_dir)


def confirm_pickle(parent: QWidget | None, path: str | Path) -> bool:
    answer = QMessageBox.question(
        parent, "Open a .lprof file?",
        f"{Path(path).name} is a kernprof .lprof file: a Python pickle, which can run code "
        "when it is read.\n\nOpen it only if you (or someone you trust) made it.",
        QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Open


def open_profiles(path: str | Path, parent: QWidget | None = None,
                  confirm=confirm_pickle) -> list[Profile] | None:
    """Profiles from a session folder, a .json or (after `confirm`) a .lprof; None when the user
    declines; a one-line message box on a bad file."""
    path = Path(path)
    trust = False
    if path.is_file() and (path.suffix == ".lprof" or lineprof.looks_like_pickle(path)):
        if not confirm(parent, path):
            return None
        trust = True
    try:
        return lineprof.load_any(path, trust_pickle=trust)
    except StallscopeError as exc:
        QMessageBox.warning(parent, "Cannot open line stats", str(exc))
        return None


def main(argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m stallscope.gui.views.heatmap SESSION|FILE.json|FILE.lprof [BEFORE]")
        return 0 if argv else 2
    app = QApplication.instance() or QApplication([sys.argv[0]])
    profiles = open_profiles(argv[0])
    if profiles is None:
        return 2
    before = open_profiles(argv[1]) if len(argv) > 1 else None
    view = HeatmapView()
    view.set_profiles(profiles, before)
    view.setWindowTitle(f"stallscope · line heatmap · {Path(argv[0]).name}")
    view.resize(1200, 640)
    view.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
