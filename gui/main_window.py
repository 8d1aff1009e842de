"""The main window: start screen, then tabs (analysis, compare, runs, heatmaps).

Hooks for other views (import lazily, so a missing piece shows a message, never a crash):
    window.open_path(path)            open a trace / TensorBoard dir / session / rank folder
    window.open_compare(path)         load a second trace as "after" and compare
    window.show_run(request=None)     a RunView tab (RunDialog first when no request)
    window.run_demo()                 run the bundled demo
    window.show_heatmap(profile)      the "Line heatmap" tab (one, reused)
    window.open_session(path)         a session folder: its trace, its run replay, its line stats
    window.stop_run()                 Run > Stop: end the current run's whole process tree
    window.add_page(widget, title)    any other view as a closable tab
"""

from __future__ import annotations

import importlib
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.document import Document
from stallscope.core.errors import StallscopeError
from stallscope.core.render.export import comparison_to_markdown, save_report
from stallscope.gui.colors import follow_theme, plot_theme
from stallscope.gui.controllers.document import DocumentController
from stallscope.gui.views.analysis import AnalysisView
from stallscope.gui.views.compare import CompareView

TRACE_FILTER = "Traces (*.json *.json.gz);;All files (*)"
EXPORT_FILTERS = ("PNG image of the panels (*.png);;Report as Markdown (*.md);;"
                  "Report as JSON (*.json)")


def fmt_span(us: float) -> str:
    ms = us / 1000.0
    return f"{ms / 1000:,.2f} s" if ms >= 10_000 else f"{ms:,.1f} ms"


def short_name(name: str, limit: int = 44) -> str:
    """Long trace names keep their start and their end (host, rank, timestamp)."""
    half = (limit - 1) // 2
    return name if len(name) <= limit else name[:half] + "…" + name[-half:]


class MessagePanel(QFrame):
    """A non-modal strip above the content for errors and notes (never a traceback dialog)."""

    # (background, text and border) per theme and level
    STYLES = {
        "light": {"error": ("#fff5f5", "#c92a2a"), "info": ("#f1f8ff", "#1f5fa8")},
        "dark": {"error": ("#3a1f22", "#ff8a8a"), "info": ("#1a2a40", "#8ab8ff")},
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
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
        styles = self.STYLES["dark" if plot_theme()["dark"] else "light"]
        bg, fg = styles.get(self.level, styles["info"])
        self.setStyleSheet(f"MessagePanel {{ background: {bg}; border: 1px solid {fg}; "
                           f"border-radius: 4px; }} QLabel, QToolButton {{ color: {fg}; }}")

    @property
    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""


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
        self.document: Document | None = None
        self.compare_document: Document | None = None
        self._recent_store = recent_store
        self.heatmap = None  # the "Line heatmap" tab's HeatmapView, once there is one
        self._heatmap_auto = False  # that tab shows the open document's own session
        self._comparing = False  # the compare tab shows document vs compare_document

        self.controller = DocumentController(self)
        self.controller.sig_load_started.connect(self._on_load_started)
        self.controller.sig_load_progress.connect(self._on_progress)
        self.controller.sig_document_loaded.connect(self._on_loaded)
        self.controller.sig_load_failed.connect(self._on_failed)
        self.controller.sig_load_cancelled.connect(self._on_cancelled)
        self.controller.sig_busy_changed.connect(self._on_busy)

        self.messages = MessagePanel()
        self.analysis = AnalysisView()
        self.analysis.sig_status.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self.analysis.rank_combo.currentIndexChanged.connect(self._show_loaded)
        self.analysis.rank_table.sig_rank_selected.connect(self._show_loaded)
        self.compare = CompareView()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(True)
        self.tabs.tabCloseRequested.connect(self._close_tab)
        self.tabs.currentChanged.connect(self._update_run_actions)
        self.tabs.addTab(self.analysis, "Analysis")
        self.tabs.tabBar().setTabButton(0, self.tabs.tabBar().ButtonPosition.RightSide, None)
        self.start = self._make_start_screen()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.start)
        self.stack.addWidget(self.tabs)

        central = QWidget()
        box = QVBoxLayout(central)
        box.setContentsMargins(4, 4, 4, 0)
        box.setSpacing(4)
        box.addWidget(self.messages)
        box.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        self._build_status_bar()
        self._build_menus()
        self._dress_shell()

    # ------------------------------------------------------------------ building

    def _make_start_screen(self) -> QWidget:
        try:
            from stallscope.gui.views.start import StartScreen
        except ImportError:
            return self._fallback_start()
        screen = StartScreen(self.recent_store)
        screen.sig_open_trace_requested.connect(self.choose_trace)
        screen.sig_open_session_requested.connect(self.choose_session)
        screen.sig_run_requested.connect(lambda: self.show_run())
        screen.sig_demo_requested.connect(self.run_demo)
        screen.sig_convert_requested.connect(self.open_lmdb_wizard)
        screen.sig_recent_activated.connect(self.open_path)
        screen.sig_path_dropped.connect(self.open_path)
        return screen

    def _fallback_start(self) -> QWidget:
        page = QWidget()
        col = QVBoxLayout(page)
        col.addStretch(1)
        title = QLabel("<h2>stallscope</h2>Why is my GPU waiting?<br><br>"
                       "Open a torch.profiler trace (File ▸ Open, Ctrl+O) or drop it here.")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        col.addWidget(title)
        button = QPushButton("Open trace…")
        button.clicked.connect(self.choose_trace)
        col.addWidget(button, 0, Qt.AlignmentFlag.AlignCenter)
        col.addStretch(2)
        return page

    @property
    def recent_store(self):
        if self._recent_store is None:
            from stallscope.core.recent import RecentStore

            self._recent_store = RecentStore()
        return self._recent_store

    def _build_status_bar(self) -> None:
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setRange(0, 1000)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.controller.cancel)
        self.status_bar = self.statusBar()
        # what is open, kept while transient messages come and go on the left
        self.loaded_label = QLabel("Nothing open")
        self.loaded_label.setObjectName("loadedLabel")
        self.loaded_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_bar.addPermanentWidget(self.loaded_label)
        self.status_bar.addPermanentWidget(self.progress)
        self.status_bar.addPermanentWidget(self.cancel_button)
        self.progress.hide()
        self.cancel_button.hide()

    def _action(self, menu: QMenu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        self.actions_by_name[text.rstrip("…").strip()] = action
        return action

    def _build_menus(self) -> None:
        self.actions_by_name: dict[str, QAction] = {}
        bar = self.menuBar()
        m = bar.addMenu("&File")
        self._action(m, "Open…", self.choose_trace, QKeySequence.StandardKey.Open,
                     "Open a trace file (.json, .json.gz)")
        self._action(m, "Open session…", self.choose_session, "Ctrl+Shift+O",
                     "Open a session, TensorBoard log folder or a folder of ranks' traces")
        self._action(m, "Compare with…", self.choose_compare, "Ctrl+D",
                     "Load a second trace as 'after' and compare it with the open one")
        self._action(m, "Open line profile…", self.choose_line_profile, "Ctrl+Shift+L",
                     "Line stats of Dataset.__getitem__: a session folder, .json or .lprof")
        self.recent_menu = m.addMenu("Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        m.addSeparator()
        self._action(m, "Export…", self.choose_export, "Ctrl+E",
                     "Save the panels as PNG or the report as Markdown/JSON")
        m.addSeparator()
        self._action(m, "Quit", self.close, QKeySequence.StandardKey.Quit)

        m = bar.addMenu("&View")
        self._action(m, "Zoom to fit", self.analysis.fit, "Ctrl+0")
        self._action(m, "Next step", lambda: self.analysis.step_by(+1), "]")
        self._action(m, "Previous step", lambda: self.analysis.step_by(-1), "[")
        m.addSeparator()
        self._action(m, "Start screen", lambda: self.stack.setCurrentWidget(self.start),
                     "Ctrl+Shift+H")
        try:
            from stallscope.gui.theme import theme_menu

            m.addMenu(theme_menu(self))
        except ImportError:
            pass

        m = bar.addMenu("&Run")
        self._action(m, "Run script…", self.show_run, "Ctrl+R",
                     "Run a training script under the profiler and watch it live")
        self._action(m, "Run demo", self.run_demo, "Ctrl+Shift+R")
        m.addSeparator()
        stop = self._action(m, "Stop", self.stop_run, "Shift+F5",
                            "End the running script and its DataLoader workers")
        stop.setShortcuts([QKeySequence("Shift+F5"), QKeySequence("Ctrl+.")])
        stop.setEnabled(False)

        m = bar.addMenu("&Tools")
        self._action(m, "Convert dataset to LMDB…", self.open_lmdb_wizard, "Ctrl+L")

        m = bar.addMenu("&Help")
        self._action(m, "About stallscope", self.show_about)

    def _dress_shell(self) -> None:
        """Themed icons on the actions, their shortcuts on the start screen, the saved layout."""
        try:
            from stallscope.gui import layout_state, theme
        except ImportError:
            return
        self._set_action_icons()
        # a bound method: Qt drops the connection when this window is destroyed
        theme.controller().sig_theme_changed.connect(self._set_action_icons)
        if hasattr(self.start, "set_shortcut_hints"):
            keys = {"open_trace": "Open", "open_session": "Open session", "run": "Run script",
                    "demo": "Run demo", "convert": "Convert dataset to LMDB"}
            self.start.set_shortcut_hints({
                key: self.actions_by_name[name].shortcut().toString(
                    QKeySequence.SequenceFormat.NativeText)
                for key, name in keys.items() if name in self.actions_by_name})
        if self.persist:
            layout_state.restore_layout(self)

    def _set_action_icons(self, _theme_name: str = "") -> None:
        from stallscope.gui import theme

        icons = {"Open": "open", "Open session": "session", "Compare with": "compare",
                 "Zoom to fit": "zoom-fit", "Next step": "next", "Previous step": "prev",
                 "Run script": "run", "Run demo": "demo", "Stop": "stop",
                 "Convert dataset to LMDB": "convert",
                 "Start screen": "recent", "About stallscope": "about"}
        for action_name, icon_name in icons.items():
            if action_name in self.actions_by_name:
                self.actions_by_name[action_name].setIcon(theme.icon(icon_name))

    # ------------------------------------------------------------------ opening

    def choose_trace(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open trace", "", TRACE_FILTER)
        if path:
            self.open_path(path)

    def choose_session(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open session, log folder or ranks folder")
        if path:
            self.open_session(path)

    def open_session(self, path: str) -> None:
        """A folder: its trace(s); when it is a stallscope session, also its run replay (and
        its line stats, once the trace is shown)."""
        self.open_path(path)
        self.replay_session(path)

    def replay_session(self, path: str) -> None:
        """A stallscope session folder: its run (step charts, console) in a tab by the trace."""
        from stallscope.core.session.reader import is_session

        if not is_session(path):
            return
        run_view = self._optional("views.run", "Session replay")
        if run_view is None:
            return
        view = run_view.RunView()
        self._connect_run_view(view)
        try:
            view.replay(path)
        except StallscopeError as exc:
            view.deleteLater()
            self.show_message(f"Could not replay the session: {exc}", "error")
            return
        self.add_page(view, f"Run: {Path(path).name}")

    def choose_compare(self) -> None:
        if self.document is None:
            self.show_message("Open a trace first; then compare it with a second one.", "info")
            return
        path, _ = QFileDialog.getOpenFileName(self, "Compare with (after)", "", TRACE_FILTER)
        if path:
            self.open_compare(path)

    def open_path(self, path: str) -> None:
        self.controller.open(str(path), "main")

    def open_compare(self, path: str) -> None:
        if self.document is None:
            self.show_message("Open a trace first; then compare it with a second one.", "info")
            return
        self.controller.open(str(path), "compare")

    def _on_load_started(self, role: str, path: str) -> None:
        what = "comparison trace" if role == "compare" else "trace"
        self.status_bar.showMessage(f"Loading {what} {Path(path).name}…")

    def _on_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def _on_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if busy:
            self.progress.setValue(0)

    def _on_loaded(self, role: str, document: Document) -> None:
        if role == "compare":
            self.compare_document = document
            self._show_compare()
            return
        self.document = document
        self._comparing = False  # a compare tab still up shows the previous pair
        self.messages.hide()
        self.analysis.set_document(document)
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentWidget(self.analysis)
        self.setWindowTitle(f"stallscope — {document.title}")
        report = self.analysis.report
        if not report.devices:
            self.show_message(f"{document.title}: no GPU activity in this trace; showing the "
                              "CPU main thread only.", "info")
        self.status_bar.showMessage(f"Opened {document.title}", 8000)
        self._show_loaded()
        self._show_session_line_stats()
        self._remember(document)
        self.sig_document_shown.emit(document)

    def _show_compare(self) -> None:
        before = self.analysis.report
        after_doc = self.compare_document
        after = after_doc.reports[0]
        self.compare.set_reports(before, after, self._report_title(self.document, before),
                                 self._report_title(after_doc, after))
        if self.tabs.indexOf(self.compare) < 0:
            self.tabs.addTab(self.compare, "Compare")
        self._comparing = True
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentWidget(self.compare)
        self.messages.hide()
        self.status_bar.showMessage(f"Comparing with {after_doc.title}", 8000)
        self._show_loaded()
        self._show_session_line_stats()
        self.sig_compare_shown.emit((before, after))

    def _report_title(self, doc: Document, report) -> str:
        name = report.trace.path.name
        if doc.multi_rank:
            name += f" ({doc.labels[doc.reports.index(report)]})"
        return name

    def _on_failed(self, role: str, message: str) -> None:
        kept = " The open document stays as it was." if self.document is not None else ""
        self.show_message(f"Could not open: {message}.{kept}".replace("..", "."), "error")
        self.status_bar.showMessage("Open failed", 8000)

    def _on_cancelled(self, role: str) -> None:
        self.status_bar.showMessage("Loading cancelled", 8000)

    def show_message(self, text: str, level: str = "error") -> None:
        self.messages.show_message(text, level)

    def _show_loaded(self, *_args) -> None:
        """The permanent status-bar label: file, window length, GPU utilization or no GPU."""
        report = self.analysis.report
        if report is None:
            self.loaded_label.setText("Nothing open")
            return
        lo, hi = report.window
        parts = [short_name(Path(report.trace.path).name), f"window {fmt_span(hi - lo)}"]
        if report.devices:
            parts += [f"GPU {dev} {stats.utilization:.0%} busy"
                      for dev, stats in sorted(report.devices.items())[:4]]
        else:
            parts.append("no GPU")
        if self._comparing and self.compare_document is not None:
            parts.append(f"vs {short_name(self.compare_document.title)}")
        self.loaded_label.setText(" · ".join(parts))
        self.loaded_label.setToolTip(str(report.trace.path))

    def _remember(self, document: Document) -> None:
        if not self.persist:
            return
        try:
            from stallscope.core.render.headline import headline

            self.recent_store.add(str(document.path), headline=headline(self.analysis.report))
        except (OSError, ValueError, StallscopeError, ImportError):
            return  # a recent list that cannot be written must not spoil an open
        refresh = getattr(self.start, "refresh", None)
        if refresh is not None:
            refresh()

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        items = self.recent_store.items()
        if not items:
            self.recent_menu.addAction("(nothing yet)").setEnabled(False)
        for item in items:
            action = self.recent_menu.addAction(Path(item.path).name)
            action.setToolTip(item.path)
            action.setStatusTip(item.path)
            action.triggered.connect(lambda _c=False, p=item.path: self.open_path(p))

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

    # ------------------------------------------------------------------ export

    def choose_export(self) -> None:
        if self.document is None:
            self.show_message("Nothing to export yet: open a trace first.", "info")
            return
        stem = Path(self.analysis.report.trace.path).name.split(".")[0]
        path, chosen = QFileDialog.getSaveFileName(self, "Export", f"{stem}-stallscope.png",
                                                   EXPORT_FILTERS)
        if path:
            if not Path(path).suffix:
                path += ".md" if "Markdown" in chosen else ".json" if "JSON" in chosen else ".png"
            self.export_to(path)

    def export_to(self, path: str) -> bool:
        """PNG of the visible panels, or the report as .md/.json. Errors become a message."""
        p = Path(path)
        try:
            if p.suffix.lower() == ".png":
                target = self.tabs.currentWidget() if self.stack.currentWidget() is self.tabs \
                    else self.centralWidget()
                if not target.grab().save(str(p)):
                    raise StallscopeError(f"{p}: cannot write the PNG")
            elif self.tabs.currentWidget() is self.compare and p.suffix.lower() == ".md":
                p.write_text(comparison_to_markdown(self.compare.metrics,
                                                    self.compare.before.title.text(),
                                                    self.compare.after.title.text()))
            else:
                if self.analysis.report is None:
                    raise StallscopeError("nothing to export: open a trace first")
                save_report(self.analysis.report, p)
        except (StallscopeError, OSError) as exc:
            self.show_message(f"Export failed: {exc}", "error")
            return False
        self.status_bar.showMessage(f"Saved {p}", 8000)
        return True

    # ------------------------------------------------------------------ other views

    def add_page(self, widget: QWidget, title: str) -> int:
        index = self.tabs.addTab(widget, title)
        self.stack.setCurrentWidget(self.tabs)
        self.tabs.setCurrentIndex(index)
        return index

    def _close_tab(self, index: int) -> None:
        widget = self.tabs.widget(index)
        if widget is self.analysis:
            return
        self.tabs.removeTab(index)
        if widget is self.compare:
            self._comparing = False
            self._show_loaded()
        if widget is self.heatmap:
            self.heatmap = None
            self._heatmap_auto = False
        if widget is not self.compare:
            widget.deleteLater()
        self._update_run_actions()
        if self.tabs.count() == 1 and self.document is None:
            self.stack.setCurrentWidget(self.start)

    def _optional(self, module: str, what: str):
        """Import a view another part of the app provides; a clear message when it is absent."""
        try:
            return importlib.import_module(f"{__package__}.{module}")
        except ImportError as exc:
            self.show_message(f"{what} is not available in this build ({exc}).", "info")
            return None

    def _connect_run_view(self, view) -> None:
        view.sig_lineprof_ready.connect(self._show_run_line_stats)
        missing = getattr(view, "sig_lineprof_missing", None)
        if missing is not None:
            missing.connect(self.show_line_profiler_missing)
        view.sig_status_changed.connect(self._update_run_actions)
        view.sig_run_finished.connect(self._update_run_actions)

    def _run_views(self) -> list:
        run_view = importlib.import_module(f"{__package__}.views.run")
        return [w for w in (self.tabs.widget(i) for i in range(self.tabs.count()))
                if isinstance(w, run_view.RunView)]

    def running_view(self):
        """The run Run > Stop ends: the current tab's when it runs, else the newest live one."""
        try:
            views = self._run_views()
        except ImportError:
            return None
        # a run being stopped has its own Stop button disabled: the action follows it
        live = [v for v in views if v.is_running and v.stop_button.isEnabled()]
        current = self.tabs.currentWidget()
        if current in live:
            return current
        return live[-1] if live else None

    def _update_run_actions(self, *_args) -> None:
        stop = getattr(self, "actions_by_name", {}).get("Stop")
        if stop is not None:
            stop.setEnabled(self.running_view() is not None)

    def stop_run(self) -> None:
        view = self.running_view()
        if view is None:
            self.status_bar.showMessage("No run is going on", 4000)
            return
        view.stop()  # SIGTERM to the runner, then its whole process tree after a grace period
        self.status_bar.showMessage("Stopping the run…", 8000)
        self._update_run_actions()

    def show_run(self, request=None) -> None:
        run_view = self._optional("views.run", "Running a script")
        if run_view is None:
            return
        if request is None:
            run_dialog = self._optional("dialogs.run", "The run dialog")
            if run_dialog is None:
                return
            dialog = run_dialog.RunDialog(self)
            if not dialog.exec():
                return
            request = dialog.request()
        view = run_view.RunView(request)
        view.sig_trace_ready.connect(self.open_path)
        self._connect_run_view(view)
        self.add_page(view, "Run")
        QTimer.singleShot(0, self._update_run_actions)  # after the view's own deferred start

    def run_demo(self) -> None:
        run_view = self._optional("views.run", "The demo run")
        if run_view is None:
            return
        make = getattr(run_view, "demo_request", None)
        if make is None:
            self.show_message("The demo run is not available in this build.", "info")
            return
        self.show_run(make())

    def _heatmap_tab(self, focus: bool = True):
        """The one "Line heatmap" tab (made on first use); None when the heatmap is absent."""
        if self.heatmap is None or self.tabs.indexOf(self.heatmap) < 0:
            heatmap = self._optional("views.heatmap", "The line heatmap")
            if heatmap is None:
                return None
            self.heatmap = heatmap.HeatmapView()
            index = self.tabs.addTab(self.heatmap, "Line heatmap")
        else:
            index = self.tabs.indexOf(self.heatmap)
        if focus:
            self.stack.setCurrentWidget(self.tabs)
            self.tabs.setCurrentIndex(index)
        return self.heatmap

    def show_heatmap(self, profiles, title: str = "Line heatmap", compare=None,
                     focus: bool = True) -> None:
        """One Profile or a list of them (one per profiled function) in the "Line heatmap" tab;
        `compare`: the "before" profiles."""
        view = self._heatmap_tab(focus)
        if view is None:
            return
        view.set_profiles(profiles if isinstance(profiles, list) else [profiles], compare)
        self.tabs.setTabText(self.tabs.indexOf(view), title)
        self.tabs.setTabToolTip(self.tabs.indexOf(view), title)

    def open_line_profile(self, path: str) -> None:
        """Line stats from a session folder, a .json or a kernprof .lprof (asks first), shown
        in the "Line heatmap" tab."""
        heatmap = self._optional("views.heatmap", "The line heatmap")
        if heatmap is None:
            return
        profiles = heatmap.open_profiles(path, self)
        if profiles:
            self._heatmap_auto = False
            self.show_heatmap(profiles, f"Line heatmap: {Path(path).name}")

    def _show_run_line_stats(self, path: str) -> None:
        """A run wrote its line stats (JSON, never a pickle): fill the heatmap tab without
        pulling it in front of the trace the run has just opened."""
        from stallscope.core import lineprof

        session = lineprof.session_of(path) or Path(path).parent
        try:
            profiles = lineprof.load_any(session if lineprof.find_profiles(session) else path)
        except (StallscopeError, OSError) as exc:
            self.show_message(f"The run's line stats could not be read: {exc}", "error")
            return
        self.show_heatmap(profiles, f"Line heatmap: {session.name}", focus=False)
        self._heatmap_auto = True

    def _show_session_line_stats(self) -> None:
        """The open document's session has line stats: show them (without switching tabs);
        with a compared session that has them too, as after-vs-before."""
        before_dir, before = self._session_profiles(self.document)
        after_dir, after = self._session_profiles(self.compare_document if self._comparing
                                                  else None)
        if not before and not after:
            if self._heatmap_auto and self.heatmap is not None:
                self._close_tab(self.tabs.indexOf(self.heatmap))  # stale: another session's
            self._heatmap_auto = False
            return
        if before and after:
            self.show_heatmap(after, f"Line heatmap: {before_dir.name} → {after_dir.name}",
                              compare=before, focus=False)
        else:
            folder = before_dir if before else after_dir
            self.show_heatmap(before or after, f"Line heatmap: {folder.name}", focus=False)
        self._heatmap_auto = True

    def _session_profiles(self, document: Document | None) -> tuple[Path | None, list]:
        """(session folder, its line profiles) of a document; (None, []) without line stats."""
        from stallscope.core import lineprof

        session = lineprof.session_of(document.path) if document is not None else None
        if session is None:
            return None, []
        try:
            return session, lineprof.load_session(session)
        except (StallscopeError, OSError) as exc:
            self.show_message(f"Line stats of {session.name} could not be read: {exc}", "error")
            return None, []

    def show_line_profiler_missing(self, python: str) -> None:
        """A run asked for line stats but its interpreter lacks line_profiler: say so in the
        heatmap tab, with the install button."""
        view = self._heatmap_tab(focus=False)
        if view is None:
            return
        if not view.profiles:
            view.set_profiles([])  # hides the empty function chooser
            view.empty.setText("No line stats for this run: its interpreter lacks "
                               "line_profiler. Install it, then run again.")
        view.show_missing_line_profiler(python or "python")
        self._heatmap_auto = False
        self.status_bar.showMessage(f"line_profiler is not installed in {python}: no line "
                                    "heatmap (see the Line heatmap tab)", 8000)

    def choose_line_profile(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open line profile", "", "Line profiles (*.json *.lprof);;All files (*)")
        if path:
            self.open_line_profile(path)

    def open_lmdb_wizard(self) -> None:
        wizard = self._optional("dialogs.lmdb_wizard", "The LMDB wizard")
        if wizard is not None:
            wizard.open_lmdb_wizard(self)

    def show_about(self) -> None:
        about = self._optional("dialogs.about", "The About dialog")
        if about is not None:
            dialog = about.AboutDialog(self)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.show()

    # ------------------------------------------------------------------ lifetime

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.controller.cancel()
        if not self.persist:
            super().closeEvent(event)
            return
        try:
            from stallscope.gui import layout_state

            layout_state.save_layout(self)
        except (ImportError, OSError):
            pass  # a layout that cannot be saved must not stop the window closing
        super().closeEvent(event)

    def wait_for_load(self, timeout_ms: int = 120_000) -> bool:
        """Block (running the event loop) until no load is in flight. For scripts and tests."""
        from PySide6.QtCore import QEventLoop

        if not self.controller.busy:
            return True
        loop = QEventLoop()

        def done(busy: bool) -> None:
            if not busy:
                loop.quit()

        self.controller.sig_busy_changed.connect(done)
        QTimer.singleShot(timeout_ms, loop.quit)
        loop.exec()
        self.controller.sig_busy_changed.disconnect(done)
        return not self.controller.busy
