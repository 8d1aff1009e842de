"""The window that shows while the app starts: the app's icon, its name and a progress line.

Importing the analysis views (pyqtgraph, numpy, the document machinery) costs most of the app's
start-up; gui/app.py shows this first, from Qt and the theme alone, so that something answers the
launch within a fraction of a second, and hands over to the main window once it is built.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPixmap
from PySide6.QtWidgets import QApplication, QSplashScreen

SIZE = (440, 150)
ICON = 72


def _picture(version: str) -> QPixmap:
    pal = QApplication.palette()
    pixmap = QPixmap(*SIZE)
    pixmap.fill(pal.window().color())
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    app_icon = QApplication.windowIcon()
    if not app_icon.isNull():
        app_icon.paint(painter, QRect(24, 24, ICON, ICON))
    painter.setPen(pal.windowText().color())
    title = QFont(QApplication.font())
    title.setPointSizeF(title.pointSizeF() * 1.9)
    title.setBold(True)
    painter.setFont(title)
    painter.drawText(QRect(24 + ICON + 18, 24, SIZE[0], ICON // 2 + 8),
                     Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, "stallscope")
    painter.setFont(QApplication.font())
    painter.setPen(QColor(pal.placeholderText().color()))
    painter.drawText(QRect(24 + ICON + 18, 24 + ICON // 2 + 10, SIZE[0], 24),
                     Qt.AlignmentFlag.AlignLeft, f"version {version}")
    painter.setPen(QColor(pal.mid().color()))
    painter.drawRect(0, 0, SIZE[0] - 1, SIZE[1] - 1)
    painter.end()
    return pixmap


class Splash(QSplashScreen):
    """Shown at once; `step(text)` says what start-up is doing (and paints it now)."""

    def __init__(self, version: str) -> None:
        super().__init__(_picture(version))
        self.steps: list[str] = []

    def step(self, text: str) -> None:
        self.steps.append(text)
        self.showMessage(text, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom,
                         QApplication.palette().windowText().color())
        QApplication.processEvents()
