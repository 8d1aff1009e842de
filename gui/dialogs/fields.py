"""Form rows the dialogs share: a field with a button beside it (Browse…, Choose…), and a
layout made into a form row.

    form.addRow("Script", with_button(QLineEdit(), "Browse…", browse))
    form.addRow("Schedule", row_widget(QHBoxLayout()))
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLayout, QPushButton, QWidget

from stallscope.gui.colors import error_text


def row_widget(inner: QLayout) -> QWidget:
    """`inner` as a widget without margins of its own (it lines up with the form's fields)."""
    widget = QWidget()
    inner.setContentsMargins(0, 0, 0, 0)
    widget.setLayout(inner)
    return widget


def error_label() -> QLabel:
    """A dialog's one-line error under its form: wrapped, in the theme's error colour."""
    label = QLabel("")
    label.setObjectName("error")
    label.setStyleSheet(f"color: {error_text()};")
    label.setWordWrap(True)
    return label


class ButtonRow(QWidget):
    """A field stretched, a button beside it (`button`: a dialog hides it where there is
    nothing to browse, e.g. a remote host's path)."""

    def __init__(self, field: QWidget, text: str, slot: Callable[[], object]) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)  # it lines up with the form's fields
        row.addWidget(field, 1)
        self.button = QPushButton(text)
        self.button.clicked.connect(slot)
        row.addWidget(self.button)


def with_button(field: QWidget, text: str, slot: Callable[[], object]) -> ButtonRow:
    """`field` stretched, a button named `text` beside it that calls `slot`."""
    return ButtonRow(field, text, slot)


def refill(combo: QComboBox, items: list[tuple[str, str]]) -> None:
    """`combo`'s items replaced by (label, data) pairs, without a signal for each change."""
    combo.blockSignals(True)
    combo.clear()
    for label, data in items:
        combo.addItem(label, data)
    combo.blockSignals(False)
