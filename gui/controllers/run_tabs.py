"""The main window's run tabs: start a run (dialog or request), the demo, a session's replay,
and Run > Stop, which ends the current tab's run or the newest live one.

    runs = RunTabs(window)       # window: a WindowPort (add_page, open_path, tabs, ...)
    runs.show_run(request)       # None: ask with the run dialog first

Each tab is a RunView bound to its own RunController (controllers/run.py).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from stallscope.core.errors import StallscopeError
from stallscope.core.launch import Where
from stallscope.core.session.reader import is_session
from stallscope.gui import run_request
from stallscope.gui.controllers import WindowPort
from stallscope.gui.controllers.run import new_run_view
from stallscope.gui.controllers.run_remote import mirror_of
from stallscope.gui.dialogs.attach import AttachDialog
from stallscope.gui.dialogs.run import RunDialog
from stallscope.gui.run_request import RunRequest
from stallscope.gui.views.run import RunView


class RunTabs(QObject):
    def __init__(self, window: WindowPort) -> None:
        super().__init__(window.as_widget())
        self.window = window

    def show_run(self, request: RunRequest | None = None) -> RunView | None:
        if request is None:
            dialog = RunDialog(self.window.as_widget())
            if not dialog.exec() or (request := dialog.request()) is None:
                return None
        view = self._new_view()
        view.controller.sig_trace_ready.connect(self.window.open_path)
        self.window.add_page(view, f"Run: {Path(request.script).name}")
        view.controller.start(request)
        self.update_actions()
        return view

    def attach_run(self, target: tuple[str, str, str] | None = None) -> RunView | None:
        """Run > Attach to remote run…: follow a run on a host again, in a new tab, into a
        local mirror (an existing mirror of it is taken up where it stopped)."""
        if target is None:
            dialog = AttachDialog(self.window.as_widget())
            if not dialog.exec() or (target := dialog.target()) is None:
                return None
        host, remote_session, python = target
        where = Where(host=host, python=python, ssh_options=run_request.ssh_env_options())
        view = self._new_view()
        view.controller.sig_trace_ready.connect(self.window.open_path)
        self.window.add_page(view, f"Run: {host}:{Path(remote_session).name}")
        view.controller.attach(where, remote_session, mirror_of(host, remote_session))
        self.update_actions()
        return view

    def run_demo(self) -> RunView | None:
        return self.show_run(run_request.demo_request())  # by module: tests swap the request

    def replay_session(self, path: str) -> RunView | None:
        """A stallscope session folder: its run (step charts, console) in a tab by the trace."""
        if not is_session(path):
            return None
        view = self._new_view()
        try:
            view.controller.replay(path)
        except StallscopeError as exc:
            view.deleteLater()
            self.window.show_message(f"Could not replay the session: {exc}", "error")
            return None
        # traces that arrive after a Reconnect open as a live run's do (not the replayed ones)
        view.controller.sig_trace_ready.connect(self.window.open_path)
        self.window.add_page(view, f"Run: {Path(path).name}")
        return view

    def _new_view(self) -> RunView:
        view = new_run_view()
        run, heatmaps = view.controller, self.window.heatmaps
        run.sig_lineprof_ready.connect(heatmaps.show_run_line_stats)
        run.sig_lineprof_missing.connect(heatmaps.show_line_profiler_missing)
        run.sig_stoppable.connect(self.update_actions)
        run.sig_run_finished.connect(self.update_actions)
        view.sig_open_trace.connect(self.window.open_path)  # Open trace, or a window clicked
        return view

    def views(self) -> list[RunView]:
        return [w for w in self.window.pages() if isinstance(w, RunView)]

    def running_view(self) -> RunView | None:
        """The run Run > Stop ends: the current tab's when it runs, else the newest live one."""
        live = [v for v in self.views() if v.controller.stoppable]  # not one being stopped
        current = self.window.current_page()
        return next((v for v in live if v is current), live[-1] if live else None)

    def update_actions(self, *_args) -> None:
        stop = self.window.actions_by_name.get("Stop")
        if stop is not None:
            stop.setEnabled(self.running_view() is not None)

    def stop_run(self) -> None:
        view = self.running_view()
        if view is None:
            self.window.show_status("No run is going on", 4000)
            return
        view.controller.stop()  # SIGTERM to the runner, then its process tree after a grace
        self.window.show_status("Stopping the run…", 8000)
        self.update_actions()
