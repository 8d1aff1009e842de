"""The line heatmap: the source of Dataset.__getitem__ with each line painted by its share of the
function's time, the heaviest lines listed beside it, and a before/after comparison.

    view = HeatmapView()
    view.set_profile(profile, compare=None)         # core.lineprof.Profile (compare: the "before")
    view.set_profiles(profiles, compare=[...])       # several functions (--lineprof-depth)
    view.show_missing_line_profiler(python)         # banner; its button emits sig_install_requested
    view.show_install_result(ok, detail)            # what the install reported

The view only shows: the app reads line stats and runs pip through
gui/controllers/line_stats.py (off the GUI thread). The table is gui/views/heatmap_table.py,
opening files (asking before a .lprof pickle is read) gui/views/heatmap_files.py.

    python -m stallscope.gui.views.heatmap SESSION|FILE.json|FILE.lprof [BEFORE]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from PySide6.QtCore import QModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QLinearGradient, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import lineprof, units
from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof import Profile
from stallscope.gui.colors import (
    HEAT_STOPS,
    LEGEND_BORDER,
    follow_theme,
    plot_theme,
    warning_colors,
)
from stallscope.gui.standalone import run_until_closed, standalone_app
from stallscope.gui.views.heatmap_files import open_profiles
from stallscope.gui.views.heatmap_table import (
    SOURCE_PAD,
    HeatDelegate,
    HeatmapModel,
    heat_color,
    seconds,
    text_on,
)
from stallscope.gui.widgets import (
    breakable,
    plain_label,
    rich_label,
    set_rich,
)

TOP_N = 8


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
        p.setPen(QColor(LEGEND_BORDER))
        p.setBrush(grad)
        p.drawRect(x0, top, x1 - x0, bar_h)
        p.setPen(self.palette().text().color())
        y = top + bar_h + fm.ascent() + 2
        for t in (0.0, 0.5, 1.0):
            label = units.pct(self.max_share * t, 0)
            w = fm.horizontalAdvance(label)
            x = x0 + t * (x1 - x0) - w * t
            p.drawText(round(x), y, label)
        p.end()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        fm = self.fontMetrics()
        return QSize(160, 2 * fm.height() + 18)


class MissingLineProfiler(QWidget):
    """A banner for an interpreter without line_profiler, with a button that asks for the
    install (LineStatsController runs it and reports back through show_install_result)."""

    sig_install_requested = Signal(str)  # the interpreter

    def __init__(self, python: str, parent=None) -> None:
        super().__init__(parent)
        self.python = python
        self.command = lineprof.install_command(python)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        self.label = rich_label(
            "line_profiler is not installed in <b>{}</b>, so the run has no line heatmap. "
            "Install it with:<br><code>{}</code>", python, shlex.join(self.command))
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.button = QPushButton("Install line_profiler")
        self.button.clicked.connect(self.install)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.button)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._restyle()
        follow_theme(self._restyle)

    def _restyle(self, _theme: str = "") -> None:
        c = warning_colors()
        self.setStyleSheet(f"MissingLineProfiler {{ background: {c['bg']}; border: 1px solid "
                           f"{c['border']}; border-radius: 4px; }} QLabel {{ color: {c['fg']}; }}")

    def install(self) -> None:
        self.button.setEnabled(False)
        self.button.setText("Installing…")
        self.sig_install_requested.emit(self.python)

    def install_cancelled(self) -> None:
        self.button.setEnabled(True)
        self.button.setText("Install line_profiler")

    def show_install_result(self, ok: bool, detail: str) -> None:
        if ok:
            set_rich(self.label, "line_profiler is installed: run again with the line heatmap on.")
        else:
            set_rich(self.label, "Install failed ({}); run it yourself:<br><code>{}</code>",
                     detail, shlex.join(self.command))
        self.button.setText("Installed" if ok else "Retry")
        self.button.setEnabled(not ok)


class HeatmapView(QWidget):
    """Source painted by time, top lines beside it; optional before/after comparison."""

    sig_line_selected = Signal(int)  # line number
    sig_install_requested = Signal(str)  # the interpreter that lacks line_profiler

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.profiles: list[Profile] = []
        self.compare: list[Profile] = []
        self.model = HeatmapModel(self)

        self.title = plain_label()  # names from the line stats: plain text
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.subtitle = plain_label()
        self.subtitle.setStyleSheet(f"color: {plot_theme()['dim']};")
        self.subtitle.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.function_box = QComboBox()
        self.function_box.setToolTip("Profiled functions of this run")
        self.function_box.currentIndexChanged.connect(self._show_index)
        self.warnings = plain_label()
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
        # items wrap to the list's width (re-laid out when it changes), never scroll sideways
        self.top_list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.top_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
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
        self.empty.setStyleSheet(f"color: {plot_theme()['dim']};")

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
            self.missing.sig_install_requested.connect(self.sig_install_requested)
            self.lay.insertWidget(1, self.missing)
        return self.missing

    def show_install_result(self, ok: bool, detail: str) -> None:
        """What LineStatsController.install_line_profiler reported, shown on the banner."""
        if self.missing is not None:
            self.missing.show_install_result(ok, detail)

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
        per = f"{seconds(p.total_s / p.samples)} per sample" if p.samples else "no samples"
        parts = [f"{Path(p.file).name}:{p.first_line}", f"{p.samples:,} samples", per,
                 f"{seconds(p.total_s)} in total"]
        if p.workers:
            parts.append(f"merged over {p.workers} worker{'s' if p.workers > 1 else ''}")
        if before is not None and before.samples and p.samples:
            b = before.total_s / before.samples
            a = p.total_s / p.samples
            change = (a - b) / b * 100 if b > 0 else 0.0
            parts.append(f"before: {seconds(b)} per sample ({change:+.0f}%)")
        self.subtitle.setText("  ·  ".join(parts))
        self.subtitle.setToolTip(p.file)
        warnings = list(p.warnings)
        match = p.match  # read with the stats, off the GUI thread (read_stats, open_profiles)
        if match is not None and match.warning:
            warnings.append(match.warning)
        lines = [f"⚠ {w}" for w in dict.fromkeys(warnings)]
        if p.unprofiled_note():
            lines.append(f"ℹ {p.unprofiled_note()}")
        self.warnings.setText("\n".join(lines))
        self.warnings.setVisible(bool(lines))
        self._fill_top(p)
        self._fit_columns()

    def _fill_top(self, p: Profile) -> None:
        self.top_list.blockSignals(True)
        self.top_list.clear()
        for rank, ln in enumerate(p.top_lines(TOP_N), 1):
            share = p.share(ln)
            # a line without spaces still wraps (breakable), never cut at the list's edge
            item = QListWidgetItem(f"{units.pct(share):>6}   line {ln.lineno}\n"
                                   f"{breakable(ln.source.strip())}")
            item.setData(Qt.ItemDataRole.UserRole, ln.lineno)
            color = heat_color(share / self.model.scale_max if self.model.scale_max else 0)
            item.setBackground(QBrush(color))
            item.setForeground(QBrush(text_on(color)))
            item.setToolTip(f"#{rank}: {ln.hits} hits, {seconds(ln.total_s)}, "
                            f"{seconds(ln.per_hit_s)} per hit")
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


def _read(path: str, screenshot: bool) -> list[Profile] | None:
    """A window's profiles (a message box on a bad file, a question before a pickle), or for a
    screenshot, with no one to answer: the error in one line, a pickle refused."""
    if not screenshot:
        return open_profiles(path)
    try:
        return lineprof.with_sources(lineprof.load_any(path))
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The line heatmap of a session's line stats, a lineprof JSON file or a "
                    "kernprof .lprof (asked first: a pickle); BEFORE adds before/after columns.")
    parser.add_argument("path", metavar="SESSION|FILE.json|FILE.lprof")
    parser.add_argument("before", nargs="?", metavar="BEFORE")
    parser.add_argument("--screenshot", metavar="OUT.png", help="save a PNG and exit")
    args = parser.parse_args(argv)
    app = standalone_app(screenshot=bool(args.screenshot))
    profiles = _read(args.path, bool(args.screenshot))
    if profiles is None:
        return 2
    before = _read(args.before, bool(args.screenshot)) if args.before else None
    view = HeatmapView()
    view.set_profiles(profiles, before)
    view.setWindowTitle(f"stallscope · line heatmap · {Path(args.path).name}")
    view.resize(1200, 640)
    if args.screenshot:
        view.show()
        QApplication.processEvents()
        ok = view.grab().save(args.screenshot)
        view.close()
        return 0 if ok else 2
    return run_until_closed(app, view)


if __name__ == "__main__":
    sys.exit(main())
