"""What the main window says about each load: the status bar's passing line (loading, opened,
cancelled, failed) and the message strip above the content (why an open failed, why a session
has nothing to show), through the window's services (a WindowPort), never its widgets.

    LoadMessages(window, window.controller)   # follows the document controller's loads

A document opened in the "main" role clears the strip (what the last open said) before the
window shows it: this object is made before the window's own handlers are connected.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from stallscope.core.document import Document
from stallscope.gui.controllers import WindowPort
from stallscope.gui.controllers.document import DocumentController

PASSING_MS = 8000  # how long a load's outcome stays in the status bar


class LoadMessages(QObject):
    def __init__(self, window: WindowPort, loads: DocumentController) -> None:
        super().__init__(window.as_widget())
        self.window = window
        loads.sig_load_started.connect(self.started)
        loads.sig_document_loaded.connect(self.opened)
        loads.sig_load_failed.connect(self.failed)
        loads.sig_load_cancelled.connect(
            lambda _role: window.show_status("Loading cancelled", PASSING_MS))
        loads.sig_nothing_to_show.connect(self.nothing_to_show)

    def started(self, role: str, path: str) -> None:
        if role == "main":
            self.window.hide_message()  # what the last open said; this one says its own
        what = "comparison trace" if role == "compare" else "trace"
        self.window.show_status(f"Loading {what} {Path(path).name}…")

    def opened(self, role: str, document: Document) -> None:
        if role == "main":
            self.window.hide_message()
            self.window.show_status(f"Opened {document.title}", PASSING_MS)

    def failed(self, _role: str, message: str) -> None:
        self.window.show_message(f"Could not open: {message}.{self._kept()}".replace("..", "."),
                                 "error")
        self.window.show_status("Open failed", PASSING_MS)

    def nothing_to_show(self, _role: str, why: str) -> None:
        """A session whose trace is not there (yet) or cannot be read: its run, if it could be
        replayed, is in its Run tab; the loading line goes and the reason is said (after the
        replay's own failure, when it failed too)."""
        self.window.show_status("Nothing to show: no trace", PASSING_MS)
        self.window.add_message(why.rstrip(".") + "." + self._kept(), "info")

    def _kept(self) -> str:
        return " The open document stays as it was." if self.window.document is not None else ""
