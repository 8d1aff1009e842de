"""The run view's console: the script's stdout and stderr as they arrive, decoded across
chunk boundaries; stderr in whole lines so the runner's own "stallscope: ..." lines get their
colour. Keeps the last 20,000 lines."""

from __future__ import annotations

import codecs

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit

from stallscope.gui.colors import error_text, warning_colors


def stderr_color() -> str:
    return error_text()


def note_color() -> str:
    return warning_colors()["fg"]


class RunConsole(QPlainTextEdit):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(20_000)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.setFont(mono)
        self.setPlaceholderText("The script's output appears here.")
        self.reset()

    def reset(self) -> None:
        self._decoders: dict[bool, codecs.IncrementalDecoder] = {}
        self._err_tail = ""
        self.clear()

    def feed(self, raw: bytes, is_err: bool) -> None:
        decoder = self._decoders.setdefault(is_err, codecs.getincrementaldecoder("utf-8")(
            errors="replace"))
        text = decoder.decode(raw)
        if not is_err:
            self.append(text)
            return
        text = self._err_tail + text
        cut = text.rfind("\n") + 1
        self._err_tail = text[cut:]
        for line in text[:cut].splitlines(keepends=True):
            self.append(line, note_color() if line.startswith("stallscope:") else stderr_color())

    def flush(self) -> None:
        """What is left of stderr without a newline (the process has ended)."""
        if self._err_tail:
            self.append(self._err_tail, stderr_color())
            self._err_tail = ""

    def append(self, text: str, color: str | None = None) -> None:  # noqa: A003 - Qt name
        if not text:
            return
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextCharFormat()
        if color:
            fmt.setForeground(QColor(color))
        cursor.insertText(text.replace("\r\n", "\n"), fmt)
        if at_end:
            bar.setValue(bar.maximum())
