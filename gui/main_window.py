"""The main window, a shell: start screen, then tabs (analysis, compare, runs, line heatmap).

The work lives in controllers, the window wires them and keeps the hooks other parts call:
    window.open_path(path)            a trace / TensorBoard dir / session (+ its run) / rank folder
                                      (a job of more than RANKS_IN_FULL ranks: the Ranks tab)
    window.open_ranks_folder(path)    the "Ranks" tab: per-rank summaries, the straggler table
    window.open_compare(path)         load a second trace as "after" and compare
    window.show_run(request=None)     a RunView tab (the run dialog first when no request)
    window.run_demo()                 run the bundled demo
    window.show_heatmap(profiles)     the "Line heatmap" tab (one, reused)
    window.open_session(path)         a session folder: its trace, its run replay, its line stats
    window.stop_run()                 Run > Stop: end the current run's whole process tree
    window.export_to(path)            PNG of the panels, or the report as .md / .json
    window.add_page(widget, title)    any other view as a closable tab
    window.fix_loop                   advice cards' "Try it" (tune), compare before/after, LMDB

controllers/document.py loads documents off the GUI thread, load_messages.py says how each load
went (status bar, message strip); controllers/run_tabs.py,
heatmap_tabs.py, ranks_tabs.py, compare_tab.py, fix_loop.py and export.py hold the run tabs, the
heatmap tab's policy, the ranks tab, the compare pair, the advice cards' actions and the export
(each sees the window as a WindowPort); views/load_status.py is the status bar's permanent part;
menus.py builds the menu bar.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEventLoop, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import (
    QFileDialog,
    QMainWindow,
    QMenu,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.document import Document
from stallscope.core.errors import StallscopeError
from stallscope.core.recent import RecentStore
from stallscope.core.render.tagline import tagline
from stallscope.gui import layout_state, menus, theme
from stallscope.gui.controllers import export
from stallscope.gui.controllers.compare_tab import CompareTab
from stallscope.gui.controllers.document import DocumentController
from stallscope.gui.controllers.fix_loop import FixLoop
from stallscope.gui.controllers.heatmap_tabs import HeatmapTabs
from stallscope.gui.controllers.lmdb import open_lmdb_wizard
from stallscope.gui.controllers.load_messages import LoadMessages
from stallscope.gui.controllers.ranks_tabs import RanksTabs
from stallscope.gui.controllers.run_tabs import RunTabs
from stallscope.gui.dialogs.about import AboutDialog
from stallscope.gui.model import Comparison, DocumentModel
from stallscope.gui.views.analysis import AnalysisView
from stallscope.gui.views.compare import CompareView
from stallscope.gui.views.load_status import LoadStatus
from stallscope.gui.views.start import StartScreen
from stallscope.gui.widgets import MessagePanel

if TYPE_CHECKING:
    from stallscope.gui.dialogs.help import HelpDialog

TRACE_FILTER = "Traces (*.json *.json.gz);;All files (*)"


class MainWindow(QMainWindow):
    sig_document_shown = Signal(object)  # Document
    sig_compare_shown = Signal(object)   # (before Report, after Report)

    def __init__(self, recent_store=None, persist: bool = True) -> None:
        """persist=False (the --screenshot mode): read nothing from and write nothing to the
        user's settings: no saved layout, no recent items."""
        super().__init__()
        self.persist = persist
        self.setWindowTitle("stallscope")
        self.resize(1400, 900)
        self.setAcceptDrops(True)
        self.model = DocumentModel(self)  # what is open and shown; views and controllers observe
        self._recent_store = recent_store
        self.actions_by_name: dict[str, QAction] = {}  # the menus', once built (below)
        self.status_bar = self.statusBar()

        self.controller = DocumentController(self)
        self.load_messages = LoadMessages(self, self.controller)  # first: it clears, then we show
        self.controller.sig_document_loaded.connect(self._on_loaded)
        self.controller.sig_ranks_folder.connect(self.open_ranks_folder)
        self.controller.sig_session.connect(self.replay_session)  # a session opens with its run

        self.messages = MessagePanel()
        self.analysis = AnalysisView(model=self.model)
        self.analysis.sig_status.connect(lambda text: self.show_status(text, 8000))
        self.model.sig_report_changed.connect(self.show_loaded)
        self.model.sig_comparison_changed.connect(self._show_comparison)
        self.compare = CompareView()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(True)
        self.tabs.setElideMode(Qt.TextElideMode.ElideMiddle)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.addTab(self.analysis, "Analysis")
        self.tabs.tabBar().setTabButton(0, self.tabs.tabBar().ButtonPosition.RightSide, None)
        self.start = self._make_start_screen()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.start)
        self.stack.addWidget(self.tabs)
        self.runs = RunTabs(self)
        self.heatmaps = HeatmapTabs(self)
        self.ranks = RanksTabs(self)
        self.compares = CompareTab(self)
        self.tabs.currentChanged.connect(self.runs.update_actions)

        central = QWidget()
        box = QVBoxLayout(central)
        box.setContentsMargins(4, 4, 4, 0)
        box.setSpacing(4)
        box.addWidget(self.messages)
        box.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        status = self.load_status = LoadStatus(self.status_bar)
        self.loaded_label, self.progress, self.cancel_button = (
            status.label, status.progress, status.cancel_button)
        self.cancel_button.clicked.connect(self.controller.cancel)
        self.controller.sig_load_progress.connect(self.load_status.set_progress)
        self.controller.sig_busy_changed.connect(self.load_status.set_busy)
        self.fix_loop = FixLoop(self)
        self.analysis.summary.sig_advice_action.connect(self.fix_loop.on_action)
        self.help_dialog: HelpDialog | None = None
        self.recent_menu: QMenu  # File > Recent, made by menus.build_menus
        self.actions_by_name = menus.build_menus(self)
        menus.set_action_icons(self.actions_by_name)
        # a bound method: Qt drops the connection when this window is destroyed
        theme.controller().sig_theme_changed.connect(self._set_action_icons)
        self.start.set_shortcut_hints(menus.shortcut_hints(self.actions_by_name))
        if self.persist:
            layout_state.restore_layout(self)

    # ------------------------------------------------------------------ building

    def _make_start_screen(self) -> StartScreen:
        screen = StartScreen(self.recent_store)
        screen.sig_open_trace_requested.connect(self.choose_trace)
        screen.sig_open_session_requested.connect(self.choose_session)
        screen.sig_run_requested.connect(lambda: self.show_run())
        screen.sig_demo_requested.connect(self.run_demo)
        screen.sig_convert_requested.connect(self.open_lmdb_wizard)
        screen.sig_recent_activated.connect(self.open_path)
        screen.sig_path_dropped.connect(self.open_path)
        return screen

    @property
    def recent_store(self) -> RecentStore:
        if self._recent_store is None:
            self._recent_store = RecentStore()
        return self._recent_store

    def _set_action_icons(self, _theme_name: str = "") -> None:
        menus.set_action_icons(self.actions_by_name)

    def show_start(self) -> None:
        self.messages.hide()  # a note about the open document does not belong here
        self.stack.setCurrentWidget(self.start)

    # ------------------------------------------------------------------ opening

    def _ask_file(self, caption: str, filters: str, then: Callable[[str], object]) -> None:
        """A file dialog starting in dialog_folder(); `then(path)` unless cancelled."""
        path, _ = QFileDialog.getOpenFileName(self, caption, self.dialog_folder(), filters)
        if path:
            then(path)

    def _ask_folder(self, caption: str, then: Callable[[str], object]) -> None:
        path = QFileDialog.getExistingDirectory(self, caption, self.dialog_folder())
        if path:
            then(path)

    def choose_trace(self) -> None:
        self._ask_file("Open trace", TRACE_FILTER, self.open_path)

    def choose_session(self) -> None:
        self._ask_folder("Open session, log folder or ranks folder", self.open_session)

    def dialog_folder(self) -> str:
        """Where file dialogs start: the folder of the open document (the folder above it when
        the document is a folder), else the current directory ("")."""
        if self.document is None:
            return ""
        path = Path(self.document.path)
        return str(path.parent if path.parent != path else path)

    def open_session(self, path: str) -> None:
        """A folder: what it opens as (core/document.open_as): a session's trace and its run
        replay (and its line stats, once the trace is shown), a log folder's trace, ranks."""
        self.open_path(path)

    def choose_ranks_folder(self) -> None:
        self._ask_folder("Open folder of ranks", self.open_ranks_folder)

    def open_ranks_folder(self, path: str, plan=None):
        """The Ranks tab on a folder: each rank analysed as a task (a process pool), the
        table filling as they finish; opening a rank loads its full trace here."""
        return self.ranks.open_folder(str(path), plan)

    def choose_compare(self) -> None:
        if self.document is None:
            self.show_message("Open a trace first; then compare it with a second one.", "info")
            return
        self._ask_file("Compare with (after)", TRACE_FILTER, self.open_compare)

    def open_path(self, path: str) -> None:
        self.controller.open(str(path), "main")

    def open_compare(self, path: str) -> None:
        if self.document is None:
            self.show_message("Open a trace first; then compare it with a second one.", "info")
            return
        self.controller.open(str(path), "compare")

    @property
    def document(self) -> Document | None:
        return self.model.document

    def _on_loaded(self, role: str, document: Document) -> None:
        if role == "compare":
            self.compares.show(document)
            return
        self.model.set_document(document)  # a compare tab still up shows the previous pair
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentWidget(self.analysis)
        self.setWindowTitle(f"stallscope — {document.title}")
        self.show_loaded()
        self.heatmaps.show_session_line_stats(document)
        self._remember(document)
        self.sig_document_shown.emit(document)

    def _show_comparison(self, comparison: Comparison | None) -> None:
        if comparison is not None:
            self.compare.set_reports(comparison.before, comparison.after,
                                     comparison.before_title, comparison.after_title)
            self.show_page(self.compare, "Compare")
            self.hide_message()
        self.show_loaded()

    def _remember(self, document: Document) -> None:
        report = self.model.report
        if not self.persist or report is None:
            return
        try:
            self.recent_store.add(str(document.path), headline=tagline(report))
        except (OSError, ValueError, StallscopeError):
            return  # a recent list that cannot be written must not spoil an open
        self.start.refresh()

    # ------------------------------------------------------------------ drag and drop

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt API
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_path(url.toLocalFile())
                event.acceptProposedAction()
                return

    # ------------------------------------------------------------------ tabs and controllers

    def as_widget(self) -> QMainWindow:
        """The window for controllers that see it as a WindowPort (gui/controllers)."""
        return self

    def add_page(self, widget: QWidget, title: str) -> int:
        index = self.tabs.addTab(widget, title)
        self.tabs.setTabToolTip(index, title)
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentIndex(index)
        return index

    def show_page(self, widget: QWidget, title: str, tooltip: str = "",
                  focus: bool = True) -> None:
        index = self.tabs.indexOf(widget)
        if index < 0:
            index = self.tabs.addTab(widget, title)
        self.tabs.setTabText(index, title)
        self.tabs.setTabToolTip(index, tooltip or title)
        if focus:
            self.stack.setCurrentWidget(self.tabs)
            self.tabs.setCurrentIndex(index)

    def pages(self) -> list[QWidget]:
        return [w for w in map(self.tabs.widget, range(self.tabs.count())) if w is not None]

    def current_page(self) -> QWidget | None:
        return self.tabs.currentWidget() if self.stack.currentWidget() is self.tabs else None

    def close_page(self, widget: QWidget) -> None:
        index = self.tabs.indexOf(widget)
        if index >= 0:
            self.close_tab(index)

    def page_image(self) -> QImage:
        page = self.current_page()
        if page is None:
            return (self.centralWidget() or self).grab().toImage()
        return page.plots_image() if page is self.analysis else page.grab().toImage()

    def close_tab(self, index: int) -> None:
        widget = self.tabs.widget(index)
        if widget is None or widget is self.analysis:
            return
        self.tabs.removeTab(index)
        if widget is self.compare:
            self.model.set_comparison(None)  # the pair is no longer shown
        self.heatmaps.closed(widget)
        self.ranks.closed(widget)
        if widget not in (self.compare, self.ranks.view):  # those two are reused
            widget.close()  # a run view stops its run now, not when the loop gets to the delete
            widget.deleteLater()
        self.runs.update_actions()
        if self.tabs.count() == 1 and self.document is None:
            self.show_start()

    # ------------------------------------------------------------------ status and messages

    def show_status(self, text: str, msecs: int = 0) -> None:
        self.status_bar.showMessage(text, msecs)

    def show_message(self, text: str, level: str = "error") -> None:
        self.messages.show_message(text, level)

    def add_message(self, text: str, level: str = "error") -> None:
        self.messages.add_message(text, level)

    def hide_message(self) -> None:
        self.messages.hide()

    def show_loaded(self, *_args) -> None:
        """The permanent status-bar label: file, window length, GPU utilization or no GPU."""
        self.load_status.show_report(self.model.report, self.compares.vs_title())

    @property
    def heatmap(self):
        """The "Line heatmap" tab's view, once there is one."""
        return self.heatmaps.view

    def choose_export(self) -> None:
        export.choose_export(self)

    def export_to(self, path: str, whole_window: bool = False) -> bool:
        return export.export_to(self, path, whole_window)

    def show_run(self, request=None):
        return self.runs.show_run(request)

    def run_demo(self):
        return self.runs.run_demo()

    def replay_session(self, path: str):
        return self.runs.replay_session(path)

    def running_view(self):
        return self.runs.running_view()

    def stop_run(self) -> None:
        self.runs.stop_run()

    def show_heatmap(self, profiles, title: str = "Line heatmap", compare=None,
                     focus: bool = True) -> None:
        self.heatmaps.show(profiles, title, compare, focus)

    def open_line_profile(self, path: str) -> None:
        self.heatmaps.open_line_profile(path)

    def choose_line_profile(self) -> None:
        self._ask_file("Open line profile", "Line profiles (*.json *.lprof);;All files (*)",
                       self.open_line_profile)

    def open_lmdb_wizard(self) -> None:
        open_lmdb_wizard(self)

    def show_help(self, section: str = "start") -> None:
        from stallscope.gui.dialogs.help import HelpDialog

        dialog = self.help_dialog
        if dialog is None:
            dialog = self.help_dialog = HelpDialog(self.actions_by_name, section, self)
        dialog.show_section(section)
        dialog.show()
        dialog.raise_()

    def show_about(self) -> None:
        dialog = AboutDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()

    # ------------------------------------------------------------------ lifetime

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.controller.cancel()
        if self.ranks.controller is not None:
            self.ranks.controller.cancel()
        self.fix_loop.shutdown()
        if self.persist:
            try:
                layout_state.save_layout(self)
            except OSError:
                pass  # a layout that cannot be saved must not stop the window closing
        super().closeEvent(event)

    def _busy_controllers(self) -> list:
        return [c for c in (self.controller, self.ranks.controller) if c is not None and c.busy]

    def wait_for_load(self, timeout_ms: int = 120_000) -> bool:
        """Block (running the event loop) until no load is in flight, a folder of ranks routed
        to the Ranks tab included. For scripts and tests."""
        timer = QTimer()
        timer.setSingleShot(True)
        timer.start(timeout_ms)
        while (busy := self._busy_controllers()) and timer.isActive():
            loop = QEventLoop()
            ctl = busy[0]

            def done(is_busy: bool, loop=loop) -> None:
                if not is_busy:
                    loop.quit()

            ctl.sig_busy_changed.connect(done)
            timer.timeout.connect(loop.quit)
            loop.exec()
            ctl.sig_busy_changed.disconnect(done)
            timer.timeout.disconnect(loop.quit)
        return not self._busy_controllers()
