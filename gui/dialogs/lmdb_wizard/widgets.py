"""Small pieces the LMDB wizard's pages share: the page base, wrapped text blocks, thumbnails,
headings, spin boxes, rows, the monospace font, and status text coloured by its tone (colours
from gui/colors.py)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase, QImage, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
    QWizardPage,
)

from stallscope.gui.colors import BETTER_COLOR, WORSE_COLOR, plot_theme
from stallscope.gui.widgets import rich_label, set_rich

if TYPE_CHECKING:
    from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard

THUMB = 88


class Page(QWizardPage):
    """A page of the wizard: `wiz` holds what the pages share (wizard.py)."""

    def __init__(self, wizard: LMDBWizard, title: str, subtitle: str) -> None:
        super().__init__()
        self.wiz = wizard
        self.setTitle(title)
        self.setSubTitle(subtitle)


def text_block(text: str = "", selectable: bool = False) -> QLabel:
    """A word-wrapped rich-text label: whatever is set on it escapes its names (esc, say)."""
    label = rich_label(text)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def tone_color(tone: str) -> str:
    """'ok' (green), 'bad' (red), anything else: the theme's dim text."""
    return {"ok": BETTER_COLOR, "bad": WORSE_COLOR}.get(tone) or plot_theme()["dim"]


def esc(text: str) -> str:
    return html.escape(str(text), quote=False)


def toned(text: str, tone: str) -> str:
    """`text` (escaped) as rich text in its tone's colour."""
    return f"<span style='color:{tone_color(tone)}'>{esc(text)}</span>"


def say(label: QLabel, text: str, tone: str) -> None:
    set_rich(label, toned(text, tone))  # toned escaped `text`


def thumb(caption: str, image: np.ndarray) -> QWidget:
    h, w = image.shape[:2]
    data = np.ascontiguousarray(image)
    qimg = QImage(data.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()
    pix = QPixmap.fromImage(qimg).scaled(
        THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation if max(w, h) > THUMB else
        Qt.TransformationMode.FastTransformation,
    )  # fmt: skip
    box = QFrame()
    box.setFrameShape(QFrame.Shape.StyledPanel)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(4, 4, 4, 4)
    picture = QLabel()
    picture.setPixmap(pix)
    picture.setFixedSize(THUMB, THUMB)
    picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
    layout.addWidget(picture)
    head, _, name = caption.rpartition("/")
    for i, line in enumerate((head, name) if head else (name,)):
        text = QLabel()
        font = text.font()
        font.setPointSizeF(font.pointSizeF() * 0.85)
        font.setBold(i == 0 and bool(head))
        text.setFont(font)
        text.setFixedWidth(THUMB)
        text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        text.setText(text.fontMetrics().elidedText(line, Qt.TextElideMode.ElideMiddle, THUMB))
        layout.addWidget(text)
    box.setToolTip(f"{caption}: {w}×{h}")
    return box


def heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    label.setContentsMargins(0, 8, 0, 0)
    return label


def spin(lo: int, hi: int, value: int) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(lo, hi)
    spin.setValue(value)
    return spin


def row(*widgets: QWidget) -> QWidget:
    box = QWidget()
    layout = QHBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    for w in widgets:
        layout.addWidget(w)
    layout.addStretch(1)
    box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    return box


def mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
