"""The main window's run tabs: start a run (dialog or request), the demo, a session's replay,
and Run > Stop, which ends the current tab's run or the newest live one.

    runs = RunTabs(window)       # window: add_page, open_path, tabs, actions_by_name, ...
    runs.show_run(request)       # None: ask with the run dialog first
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from stallscope.core.errors import StallscopeError
from stallscope.core.session.reader import is_session
from stallscope.gui.dialogs.run import RunDialog
from stallscope.gui.views import run as run_view
from stallscope.gui.views.run import RunView


class RunTabs(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window

    def show_run(self, request=None) -> RunView | None:
        if request is None:
            dialog = RunDialog(self.window)
            if not dialog.exec():
                return None
            request = dialog.request()
        view = RunView(request)
        view.sig_trace_ready.connect(self.window.open_path)
        self._connect(view)
        self.window.add_page(view, f"Run: {Path(request.script).name}")
        QTimer.singleShot(0, self.update_actions)  # after the view's own deferred start
        return view

    def run_demo(self) -> RunView | None:
        return self.show_run(run_view.demo_request())  # by module: tests swap the request

    def replay_session(self, path: str) -> RunView | None:
        """A stallscope session folder: its run (step charts, console) in a tab by the trace."""
        if not is_session(path):
            return None
        view = RunView()
        self._connect(view)
        try:
            view.replay(path)
        except StallscopeError as exc:
            view.deleteLater()
            self.window.show_message(f"Could not replay the session: {exc}", "error")
            return None
        self.window.add_page(view, f"Run: {Path(path).name}")
        return view

    def _connect(self, view: RunView) -> None:
        heatmaps = self.window.heatmaps
        view.sig_lineprof_ready.connect(heatmaps.show_run_line_stats)
        view.sig_lineprof_missing.connect(heatmaps.show_line_profiler_missing)
        view.sig_open_trace.connect(self.window.open_path)  # a window clicked in Whole run
        view.sig_status_changed.connect(self.update_actions)
        view.sig_run_finished.connect(self.update_actions)

    def views(self) -> list[RunView]:
        tabs = self.window.tabs
        return [w for w in (tabs.widget(i) for i in range(tabs.count()))
                if isinstance(w, RunView)]

    def running_view(self) -> RunView | None:
        """The run Run > Stop ends: the current tab's when it runs, else the newest live one."""
        # a run being stopped has its own Stop button disabled: the action follows it
        live = [v for v in self.views() if v.is_running and v.stop_button.isEnabled()]
        current = self.window.tabs.currentWidget()
        if current in live:
            return current
        return live[-1] if live else None

    def update_actions(self, *_args) -> None:
        stop = getattr(self.window, "actions_by_name", {}).get("Stop")
        if stop is not None:
            stop.setEnabled(self.running_view() is not None)

    def stop_run(self) -> None:
        view = self.running_view()
        if view is None:
            self.window.status_bar.showMessage("No run is going on", 4000)
            return
        view.stop()  # SIGTERM to the runner, then its whole process tree after a grace period
        self.window.status_bar.showMessage("Stopping the run…", 8000)
        self.update_actions()
