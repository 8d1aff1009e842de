"""Controllers: logic and signals, long work in gui/workers.py, never widgets of their own.

A controller that serves the main window is given a WindowPort: the few things it may use of
the window (gui/main_window.py satisfies it), typed, instead of the whole window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMainWindow, QStackedWidget, QStatusBar, QTabWidget, QWidget

    from stallscope.core.document import Document
    from stallscope.gui.controllers.document import DocumentController
    from stallscope.gui.controllers.heatmap_tabs import HeatmapTabs
    from stallscope.gui.views.analysis import AnalysisView
    from stallscope.gui.views.compare import CompareView
    from stallscope.gui.widgets import MessagePanel


class WindowPort(Protocol):
    """What the controllers (fix_loop, ranks_tabs, export, run_tabs, heatmap_tabs,
    compare_tab) need of the main window."""

    document: Document | None            # the open document, None before the first
    analysis: AnalysisView               # the analysis page (its report, timeline, summary)
    compare: CompareView
    tabs: QTabWidget
    stack: QStackedWidget                # the start screen or the tabs
    messages: MessagePanel
    status_bar: QStatusBar
    controller: DocumentController       # loads: sig_load_failed, sig_load_cancelled
    heatmaps: HeatmapTabs                # the line heatmap tab (a run hands its line stats on)
    actions_by_name: dict[str, QAction]  # the menus' actions (menus.build_menus): "Stop", ...
    sig_document_shown: SignalInstance   # (Document) once a document is on screen
    sig_compare_shown: SignalInstance    # ((before, after) Reports) once a pair is compared

    def as_widget(self) -> QMainWindow:
        """The window as a Qt widget: the parent of dialogs and controllers, what a PNG of the
        whole window grabs."""
        ...

    def open_path(self, path: str) -> None: ...

    def open_compare(self, path: str) -> None: ...

    def add_page(self, widget: QWidget, title: str) -> int: ...

    def close_tab(self, index: int) -> None: ...

    def show_message(self, text: str, level: str = "error") -> None: ...

    def show_loaded(self) -> None:
        """Refresh the status bar's "what is open" (after the compare pair changed)."""
        ...

    def dialog_folder(self) -> str: ...
