"""Small widgets the views share: a label that elides instead of clipping, the message strip."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QWidget

from stallscope.gui.colors import follow_theme, message_colors


class ElidedLabel(QLabel):
    """One line of plain text that ends in "…" when it does not fit, the whole text in its
    tooltip. It never asks for more width than it gets, so it never widens a panel."""

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(0)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        self._full = text
        self._elide()

    def full_text(self) -> str:
        return self._full

    def is_elided(self) -> bool:
        return super().text() != self._full

    def _elide(self) -> None:
        metrics = QFontMetrics(self.font())
        width = max(self.contentsRect().width(), 0)
        shown = metrics.elidedText(self._full, self._mode, width) if width else self._full
        super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        self._elide()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(0, super().minimumSizeHint().height())


class MessagePanel(QFrame):
    """A non-modal strip above the content for errors and notes (never a traceback dialog)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.label, 1)
        row.addWidget(close)
        self.level = "info"
        self.hide()
        follow_theme(self._restyle)

    def show_message(self, text: str, level: str = "error") -> None:
        self.label.setText(text)
        self.level = level
        self._restyle()
        self.show()

    def _restyle(self, _theme_name: str = "") -> None:
        bg, fg = message_colors(self.level)
        self.setStyleSheet(f"MessagePanel {{ background: {bg}; border: 1px solid {fg}; "
                           f"border-radius: 4px; }} QLabel, QToolButton {{ color: {fg}; }}")

    @property
    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
