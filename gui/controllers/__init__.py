"""Controllers: logic and signals, long work in gui/workers.py, never widgets of their own.

A controller that serves the main window is given a WindowPort: the window's state (its
DocumentModel, gui/model.py) and its services (pages, status, messages, dialogs), typed, never
its widgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance
    from PySide6.QtGui import QAction, QImage
    from PySide6.QtWidgets import QMainWindow, QWidget

    from stallscope.core.document import Document
    from stallscope.gui.controllers.document import DocumentController
    from stallscope.gui.controllers.heatmap_tabs import HeatmapTabs
    from stallscope.gui.model import DocumentModel


class WindowPort(Protocol):
    """What the controllers (fix_loop, ranks_tabs, export, run_tabs, heatmap_tabs,
    compare_tab) need of the main window."""

    model: DocumentModel                 # the open document, the rank shown, the comparison
    controller: DocumentController       # loads: sig_load_failed, sig_load_cancelled
    heatmaps: HeatmapTabs                # the line heatmap tab (a run hands its line stats on)
    actions_by_name: dict[str, QAction]  # the menus' actions (menus.build_menus): "Stop", ...
    sig_document_shown: SignalInstance   # (Document) once a document is on screen
    sig_compare_shown: SignalInstance    # ((before, after) Reports) once a pair is compared

    @property
    def document(self) -> Document | None:
        """The open document (the model's), None before the first."""
        ...

    def as_widget(self) -> QMainWindow:
        """The window as a Qt widget: the parent of dialogs and controllers, what a PNG of the
        whole window grabs."""
        ...

    def open_path(self, path: str) -> None: ...

    def open_compare(self, path: str) -> None: ...

    # pages: the tabs beside the analysis page
    def add_page(self, widget: QWidget, title: str) -> int:
        """Add `widget` as a page and bring it to the front."""
        ...

    def show_page(self, widget: QWidget, title: str, tooltip: str = "",
                  focus: bool = True) -> None:
        """The page `widget` (added when it is not one yet) with this title; in front unless
        focus=False."""
        ...

    def pages(self) -> list[QWidget]: ...

    def current_page(self) -> QWidget | None:
        """The page in front; None while the start screen shows."""
        ...

    def close_page(self, widget: QWidget) -> None: ...

    def page_image(self) -> QImage:
        """The page in front as a picture (the analysis page: its plots), or the start
        screen."""
        ...

    # status and messages
    def show_status(self, text: str, msecs: int = 0) -> None: ...

    def show_message(self, text: str, level: str = "error") -> None: ...

    def add_message(self, text: str, level: str = "error") -> None: ...

    def hide_message(self) -> None: ...

    def show_loaded(self) -> None:
        """Refresh the status bar's "what is open" (after the compare pair changed)."""
        ...

    def dialog_folder(self) -> str: ...
