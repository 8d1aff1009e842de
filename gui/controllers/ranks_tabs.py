"""The main window's "Ranks" tab: a folder of many ranks as the rank table (File > Open folder
of ranks, or a folder whose plan picks a job of more than RANKS_IN_FULL ranks).

    ranks = RanksTabs(window)          # window: a WindowPort (gui/controllers/__init__.py)
    ranks.open_folder(path, plan=None) # per-rank progress; the table fills as ranks finish
    ranks.closed(widget)               # the tab was closed: its job is cancelled

One tab, reused (a new folder cancels the job before it); opening a rank (double-click, Enter,
"Open rank") loads its full trace through the window's own open path, into the analysis view.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from stallscope.core import units
from stallscope.gui.controllers import WindowPort
from stallscope.gui.controllers.ranks import RanksController
from stallscope.gui.views.ranks import RanksView


class RanksTabs(QObject):
    def __init__(self, window: WindowPort, workers: int | None = None) -> None:
        super().__init__(window.as_widget())
        self.window = window
        self.workers = workers
        self.view: RanksView | None = None
        self.controller: RanksController | None = None

    def _make(self) -> tuple[RanksView, RanksController]:
        if self.view is None or self.controller is None:
            view = RanksView()
            ctl = RanksController(self, workers=self.workers)
            view.bind(ctl, open_ranks=False)
            view.sig_rank_open_requested.connect(self.open_rank)
            ctl.sig_job_failed.connect(
                lambda message: self.window.show_status("Ranks: open failed", 8000))
            ctl.sig_job_finished.connect(self._on_job_finished)
            self.view, self.controller = view, ctl
        return self.view, self.controller

    def open_folder(self, path: str, plan=None) -> RanksView:
        view, ctl = self._make()
        title = f"Ranks: {Path(path).name or path}"
        self.window.show_page(view, title, str(path))
        self.window.hide_message()
        self.window.show_status(f"Analysing the ranks of {path}…", 8000)
        ctl.open_folder(str(path), plan=plan)
        return view

    def _on_job_finished(self, job) -> None:
        slow = job.stragglers.slowest if job.stragglers is not None else None
        self.window.show_status(
            f"Ranks: {units.plural(len(job.summaries), 'rank')} analysed"
            + (f"; the slowest is {slow.key}" if slow is not None else ""), 15000)

    def open_rank(self, trace_path: str) -> None:
        """A rank's full trace, in the analysis view (the window's own open path)."""
        self.window.open_path(trace_path)

    def closed(self, widget) -> None:
        if widget is self.view and self.controller is not None:
            self.controller.cancel()
