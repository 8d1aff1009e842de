"""The summary panel's pieces: a cause bar, a table of causes, an advice card, the per-step chart.

Each takes plain numbers (dicts keyed by cause, arrays per step) and emits what was clicked;
the colours are colors.py's, keyed by cause, the same as the timeline's lanes and legend.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QMouseEvent, QPainter, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import causes, units
from stallscope.core.causes import BY_CODE, CAUSES
from stallscope.gui.colors import BUSY_COLOR, CAUSE_COLORS, COMM_COLOR, LIGHT_PLOT, qcolor
from stallscope.gui.widgets import ElidedLabel, breakable, plain_label, rich_label

PART_COLORS = {"compute": BUSY_COLOR, "communication": COMM_COLOR, **CAUSE_COLORS}


def shrinkable(label: QLabel) -> QLabel:
    """Let a wrapping label take the width it gets instead of widening the panel."""
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(0)
    return label


class Heading(QLabel):
    """A section's bold title and, when both fit on one line, its dim hint in parentheses;
    a narrow panel drops the hint into the tooltip rather than spend a second line on it."""

    def __init__(self, title: str = "", hint: str = "") -> None:
        super().__init__()
        self.title, self.hint = title, hint
        shrinkable(self)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setStyleSheet("font-weight: 600; font-size: 13px; margin-top: 6px;")
        self._fit()

    def set_heading(self, title: str, hint: str | None = None) -> None:
        self.title = title
        if hint is not None:
            self.hint = hint
        self._fit()

    def _fit(self) -> None:
        whole = f"{self.title} ({self.hint})" if self.hint else self.title
        width = self.contentsRect().width()
        fits = width > 0 and self.fontMetrics().horizontalAdvance(whole) <= width
        super().setText(whole if fits else self.title)
        self.setToolTip("" if fits or not self.hint else self.hint[:1].upper() + self.hint[1:])

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API (the stylesheet's font)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit()


def chip_icon(color: str) -> QIcon:
    pix = QPixmap(12, 12)
    pix.fill(QColor(color))
    return QIcon(pix)


class CauseBar(QWidget):
    """One horizontal bar split by cause; click a segment to jump to that cause."""

    sig_cause_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: dict[str, float] = {}
        self.empty_color = LIGHT_PLOT["track"]  # the panel sets the theme's
        self.setMinimumHeight(18)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(200, 18)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(40, 18)

    def set_values(self, values: dict[str, float]) -> None:
        self.values = {c: float(values.get(c, 0.0)) for c in CAUSES}
        self.update()

    def segments(self) -> list[tuple[str, QRectF]]:
        total = sum(self.values.values())
        if total <= 0:
            return []
        x, out = 0.0, []
        for cause in CAUSES:
            w = self.width() * self.values[cause] / total
            if w > 0:
                out.append((cause, QRectF(x, 0, w, self.height())))
            x += w
        return out

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt API
        painter = QPainter(self)
        painter.setPen(Qt.PenStyle.NoPen)
        segs = self.segments()
        if not segs:
            painter.setBrush(QColor(self.empty_color))
            painter.drawRect(self.rect())
        for cause, rect in segs:
            painter.setBrush(qcolor(CAUSE_COLORS[cause]))
            painter.drawRect(rect)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        for cause, rect in self.segments():
            if rect.contains(event.position()):
                self.sig_cause_clicked.emit(cause)
                return


class CauseRow(QWidget):
    """chip | label | time | share: one clickable row of the cause table."""

    sig_clicked = Signal(str)

    def __init__(self, cause: str, us: float, share: float, tip: str, dim: str) -> None:
        super().__init__()
        self.cause = cause
        row = QGridLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setHorizontalSpacing(6)
        chip = QLabel()
        chip.setPixmap(chip_icon(CAUSE_COLORS[cause]).pixmap(11, 11))
        self.name = ElidedLabel(causes.label(cause))
        self.name.setMinimumWidth(56)
        self.time = QLabel(units.duration(us))
        self.share = QLabel(units.pct(share))
        for label in (self.time, self.share):
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.share.setStyleSheet(f"color: {dim};")
        row.addWidget(chip, 0, 0)
        row.addWidget(self.name, 0, 1)
        row.addWidget(self.time, 0, 2)
        row.addWidget(self.share, 0, 3)
        row.setColumnStretch(1, 1)
        row.setColumnMinimumWidth(2, 74)
        row.setColumnMinimumWidth(3, 46)
        self.setToolTip(tip)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if event.button() == Qt.MouseButton.LeftButton:
            self.sig_clicked.emit(self.cause)


class CauseTable(QWidget):
    """The causes that hold time, one row each (largest share first is the bar's job; the rows
    keep the priority order); the causes with none in one dim line."""

    sig_cause_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.box = QVBoxLayout(self)
        self.box.setContentsMargins(0, 0, 0, 0)
        self.box.setSpacing(1)
        self.rows: list[CauseRow] = []
        self.none_label = shrinkable(QLabel())
        self.none_label.setWordWrap(True)

    def set_values(self, values: dict[str, float], dim: str, what: str = "idle",
                   tips: dict[str, str] | None = None, never: tuple[str, ...] = (),
                   unknown: tuple[str, ...] = ()) -> None:
        """`never`: causes that cannot hold time here (queued GPU work without a GPU);
        `unknown`: causes the trace cannot tell (Python without CPU operators)."""
        while self.box.count():
            item = self.box.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None and w is not self.none_label:
                w.deleteLater()
        self.rows = []
        total = sum(values.values())
        empty = []
        for cause in CAUSES:
            us = values.get(cause, 0.0)
            if us <= 0 or cause in unknown:
                if cause not in never and cause not in unknown:
                    empty.append(causes.label(cause))
                continue
            tip = (tips or {}).get(cause) or BY_CODE[cause].description
            row = CauseRow(cause, us, us / total if total else 0.0,
                           f"{tip}. Click: the longest {causes.label(cause)} span", dim)
            row.sig_clicked.connect(self.sig_cause_clicked)
            self.box.addWidget(row)
            self.rows.append(row)
        lines = [f"no {what} charged to: {', '.join(empty)}"] if empty else []
        lines += [f"{causes.label(c)}: unknown (no CPU operators recorded)" for c in unknown]
        self.none_label.setText("\n".join(lines))
        self.none_label.setStyleSheet(f"color: {dim};")
        self.none_label.setVisible(bool(lines))
        self.box.addWidget(self.none_label)

    def row(self, cause: str) -> CauseRow | None:
        return next((r for r in self.rows if r.cause == cause), None)


class AdviceCard(QFrame):
    """One piece of advice: title, the numbers behind it, the fix. Clicking it emits sig_clicked;
    its buttons (`actions`: (key, text, tip)) and the phrases of its fix given in `links`
    (phrase -> key, made links) emit sig_action(key)."""

    sig_clicked = Signal()
    sig_action = Signal(str)

    def __init__(self, title: str, evidence: str, fix: str, colors: dict,
                 clickable: bool = True, accent: str | None = None, minor: bool = False,
                 actions: tuple = (), links: dict | None = None,
                 culprits: list[str] | None = None) -> None:
        super().__init__()
        self.setObjectName("AdviceCard")
        border = accent if (clickable and accent) else colors["track_border"]
        self.setStyleSheet(f"#AdviceCard {{ border: 1px solid {colors['track_border']}; "
                           f"border-left: 4px solid {border}; border-radius: 4px; "
                           f"background: {colors['bg']}; }}")
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 5, 8, 5)
        box.setSpacing(2)
        prefix = "minor: " if minor else ""
        self.title = rich_label("<b>{}</b>", prefix + title)
        self.evidence = plain_label(evidence)
        self.evidence.setStyleSheet(f"color: {colors['dim']};")
        # a long fix (and long evidence) show their first sentence and a "more" link that
        # unfolds both (the per-step chart stays on the first screen); "less" folds them again
        short_evidence = fix_summary(evidence, EVIDENCE_FOLD_CHARS) if fix else ""
        short = fix_summary(fix) or (fix if short_evidence else "")
        self._evidence = {"#less": evidence, MORE: short_evidence or evidence}
        # folded, the actions its hidden part links to stay one click away ("· LMDB wizard")
        hidden = [p for p in (links or {}) if p in fix and p not in short]
        self._fix_html = {
            "#less": _linked(fix, links) + (f' <a href="{MORE}">less</a>' if short else ""),
            MORE: _linked(short, links) + f' <a href="{MORE}">more</a>'
            + "".join(f" · {_linked(p, links)}" for p in hidden) if short else "",
        }
        # what covers the idle time: names from the trace, shown as plain text (a no-break
        # space keeps the bullet on its name's line); folded, the largest only
        lines = [f"•\u00a0{breakable(c)}" for c in culprits or ()]
        self._culprits = {"#less": "\n".join(lines), MORE: "\n".join(lines[:1]) + (
            f"\n+ {len(lines) - 1} more" if short and len(lines) > 1 else "")}
        if not short:
            self._culprits[MORE] = self._culprits["#less"]
        self.culprits = plain_label("") if culprits else None
        self.fix = rich_label("") if fix else None
        if self.fix is not None:
            self._show_fix(MORE if short else "#less")
        elif self.culprits is not None:
            self.culprits.setText(self._culprits["#less"])
        if self.culprits is not None:
            self.culprits.setStyleSheet(f"color: {colors['dim']}; font-size: 11px;")
            self.culprits.setToolTip("The events that cover most of this idle time: count, "
                                     "time, and the line of your code that called them")
        for label in (self.title, self.evidence, self.culprits, self.fix):
            if label is not None:
                label.setWordWrap(True)
                shrinkable(label)
                box.addWidget(label)
        if self.fix is not None and (links or short):
            self.fix.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
            self.fix.linkActivated.connect(self._fix_link)
        self.buttons: dict[str, QPushButton] = {}
        if actions:
            row = QHBoxLayout()
            row.setContentsMargins(0, 2, 0, 0)
            for key, text, tip in actions:
                button = QPushButton(text)
                button.setToolTip(tip)
                button.setCursor(Qt.CursorShape.ArrowCursor)
                button.clicked.connect(lambda _c=False, k=key: self.sig_action.emit(k))
                row.addWidget(button)
                self.buttons[key] = button
            row.addStretch(1)
            box.addLayout(row)
        self.text = "\n".join([title, evidence, *(culprits or [])]
                              + ([f"Fix: {fix}"] if fix else []))
        self.clickable = clickable
        if clickable:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
            self.setToolTip("Show this on the timeline")

    @property
    def fix_folded(self) -> bool:
        return self.fix is not None and f'"{MORE}">more</a>' in self.fix.text()

    def _show_fix(self, which: str) -> None:
        assert self.fix is not None  # only called for a card that has a fix
        self.fix.setText("<b>Fix:</b> " + self._fix_html[which])  # escaped by _linked
        self.evidence.setText(self._evidence[which])
        if self.culprits is not None:
            self.culprits.setText(self._culprits[which])

    def _fix_link(self, href: str) -> None:
        if href == MORE:
            self._show_fix("#less" if self.fix_folded else MORE)
        else:
            self.sig_action.emit(href)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self.clickable and event.button() == Qt.MouseButton.LeftButton:
            self.sig_clicked.emit()


MORE = "#more"
FIX_FOLD_CHARS = 160  # a fix longer than this shows its first sentence (or ~this many chars)
EVIDENCE_FOLD_CHARS = 200


def fix_summary(fix: str, limit: int = FIX_FOLD_CHARS) -> str:
    """The folded fix: "" when the fix is short enough to show whole, else its first sentence,
    or its first words up to `limit` characters and "…" when that sentence is longer."""
    if len(fix) <= limit + 40:
        return ""
    end = fix.find(". ") + 1
    if 0 < end <= limit:
        return fix[:end]
    cut = fix.rfind(" ", 0, limit)
    return fix[:cut if cut > 0 else limit].rstrip(",;:") + "…"


def _linked(text: str, links: dict | None) -> str:
    """`text` escaped, the phrases of `links` made links to their action."""
    out = html.escape(text, quote=False)
    for phrase, key in (links or {}).items():
        out = out.replace(html.escape(phrase, quote=False),
                          f'<a href="{key}">{html.escape(phrase)}</a>', 1)
    return out


class StepChart(pg.PlotWidget):
    """One stacked bar per step: the parts (compute, communication alone, then each cause) in
    their own colours."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.getAxis("left").setLabel("ms")
        # a tick at the very top (the tallest bar near a round number) has its label centred
        # on the plot's top edge: half a line of room above it, or its upper half is cut off
        layout = self.getPlotItem().layout
        left, _top, right, bottom = layout.getContentsMargins()
        layout.setContentsMargins(left, self.fontMetrics().height() / 2 + 1, right, bottom)
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.parts: dict[str, np.ndarray] = {}

    def style(self, colors: dict) -> None:
        self.setBackground(colors["bg"])
        for axis in ("left", "bottom"):
            self.getAxis(axis).setTextPen(colors["text"])
            self.getAxis(axis).setPen(colors["fg"])

    def set_parts(self, parts: dict[str, np.ndarray], names: list[str]) -> None:
        for item in self.bars.values():
            self.removeItem(item)
        self.bars = {}
        self.parts = parts
        n = len(names)
        x = np.arange(n, dtype=float)
        bottom = np.zeros(n)
        for part in shown_parts(parts):
            height = parts[part] / 1000.0
            bars = pg.BarGraphItem(x=x, height=height, y0=bottom, width=0.7,
                                   brush=PART_COLORS[part], pen=pg.mkPen(None))
            self.addItem(bars)
            self.bars[part] = bars
            bottom = bottom + height
        labels = [(i, name.replace("ProfilerStep", "")) for i, name in enumerate(names)]
        stride = max(1, int(np.ceil(n / 12)))
        self.getAxis("bottom").setTicks([labels[::stride], []])
        self.setXRange(-0.6, max(n - 0.4, 0.6), padding=0)
        self.setYRange(0, float(bottom.max()) * 1.05 if n and bottom.max() > 0 else 1.0,
                       padding=0)


def shown_parts(parts: dict[str, np.ndarray]) -> list[str]:
    """The parts worth a bar and a legend chip: at least 0.05% of all steps' time (not the
    rounding dust a remainder leaves)."""
    total = sum(float(v.sum()) for v in parts.values())
    return [p for p, v in parts.items() if total > 0 and v.sum() >= 5e-4 * total]


def parts_legend(parts: dict[str, np.ndarray], labels: dict[str, str]) -> str:
    """Chips for the parts that appear in the chart, in stacking order."""
    return " &nbsp;".join(
        f'<span style="white-space:nowrap"><span style="color:{PART_COLORS[p]}">&#9632;</span>'
        f"&nbsp;{labels.get(p) or causes.label(p)}</span>"
        for p in shown_parts(parts))
