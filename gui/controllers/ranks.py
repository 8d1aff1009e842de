"""Opens a folder of ranks off the GUI thread: plan, per-rank tasks on a process pool (or a Dask
cluster), each rank's summary handed over as it finishes; then the full trace of one rank.

    ctl = RanksController()
    ctl.sig_plan_ready.connect(view.set_plan)          # FolderPlan: picks, runs, skips
    ctl.sig_rank_finished.connect(view.add_result)     # (task index, RankSummary | RankFailure)
    ctl.sig_job_finished.connect(view.set_job)         # RankJob: summaries + straggler table
    ctl.open_folder(path)
    ctl.open_rank(path)  ->  sig_rank_document_loaded(Document)   # the full trace of one rank

Starting a folder cancels the one before; results of a superseded job are dropped. Errors arrive
as one line naming the file. Never touches widgets.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from stallscope.core.document import load_document_job, plan_path
from stallscope.core.jobs import CancelFlag
from stallscope.core.ranks.job import analyze_ranks_job
from stallscope.gui.controllers.document import name_the_file
from stallscope.gui.workers import JobRunner, JobWorker


class RanksController(QObject):
    sig_job_started = Signal(str)              # folder
    sig_plan_ready = Signal(object)            # FolderPlan
    sig_rank_progress = Signal(int, int)       # ranks done, ranks in the job
    sig_rank_finished = Signal(int, object)    # task index, RankSummary | RankFailure
    sig_job_finished = Signal(object)          # RankJob
    sig_job_failed = Signal(str)               # one line naming the folder or file
    sig_job_cancelled = Signal()
    sig_rank_load_started = Signal(str)        # trace path
    sig_rank_document_loaded = Signal(object)  # Document of one rank (its full trace)
    sig_rank_load_failed = Signal(str)
    sig_busy_changed = Signal(bool)

    # emitted from the worker thread; queued to the GUI thread, where the token is checked
    _sig_plan = Signal(object, object)
    _sig_result = Signal(object, int, object)

    def __init__(self, parent: QObject | None = None, workers: int | None = None,
                 scheduler: str | None = None) -> None:
        super().__init__(parent)
        self.workers = workers
        self.scheduler = scheduler
        self.runner = JobRunner(self)  # slots "ranks" (the folder) and "rank" (one in full)
        self.runner.sig_busy_changed.connect(self.sig_busy_changed)
        self._sig_plan.connect(self._on_plan)
        self._sig_result.connect(self._on_result)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    # ------------------------------------------------------------------ a folder of ranks

    def open_folder(self, path: str, run: str | None = None, plan=None) -> JobWorker:
        """Plan the folder (or take the FolderPlan already made) and analyse its ranks."""
        path = str(path)
        workers, scheduler = self.workers, self.scheduler
        token: list[JobWorker] = []
        planned = plan

        def make(cancel: CancelFlag):
            plan = planned if planned is not None else plan_path(path, run=run)
            self._sig_plan.emit(token[0], plan)
            picks = plan.picks
            return (yield from analyze_ranks_job(
                picks, workers=workers, scheduler=scheduler, cancel=cancel, plan=plan,
                compare=len(picks) > 1,
                on_result=lambda i, r: self._sig_result.emit(token[0], i, r)))

        worker = JobWorker(make)
        token.append(worker)
        sig = worker.signals
        current = self.runner.while_current(worker, "ranks")
        sig.sig_progress.connect(current(self.sig_rank_progress.emit))
        sig.sig_result.connect(current(self.sig_job_finished.emit))
        sig.sig_error.connect(current(lambda msg: self.sig_job_failed.emit(name_the_file(msg,
                                                                                       path))))
        sig.sig_cancelled.connect(current(self.sig_job_cancelled.emit))
        self.runner.start(worker, "ranks")
        self.sig_job_started.emit(path)
        return worker

    def cancel(self) -> None:
        self.runner.cancel("ranks")

    def _current(self, worker: JobWorker) -> bool:
        return self.runner.is_current(worker, "ranks")

    def _on_plan(self, worker: JobWorker, plan) -> None:
        if self._current(worker):
            self.sig_plan_ready.emit(plan)

    def _on_result(self, worker: JobWorker, index: int, result) -> None:
        if self._current(worker):
            self.sig_rank_finished.emit(index, result)

    # ------------------------------------------------------------------ one rank in full

    def open_rank(self, trace_path: str) -> JobWorker:
        """Load and analyse one rank's whole trace (the rank the user opens)."""
        trace_path = str(trace_path)
        worker = JobWorker(lambda cancel: load_document_job(trace_path, cancel))
        sig = worker.signals
        current = self.runner.while_current(worker, "rank")
        sig.sig_result.connect(current(self.sig_rank_document_loaded.emit))
        sig.sig_error.connect(current(lambda msg: self.sig_rank_load_failed.emit(
            name_the_file(msg, trace_path))))
        self.runner.start(worker, "rank")
        self.sig_rank_load_started.emit(trace_path)
        return worker


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from PySide6.QtWidgets import QApplication

    from stallscope.gui.views.ranks import RanksView

    parser = argparse.ArgumentParser(description="The rank table of a folder of ranks' traces.")
    parser.add_argument("folder")
    parser.add_argument("--run", help="the run to open when the folder holds several")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--scheduler", help="a Dask scheduler address (tcp://HOST:8786)")
    parser.add_argument("--screenshot", metavar="OUT.png",
                        help="wait for the job (and open the slowest rank), save a PNG and exit")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    view = RanksView(details=True)
    ctl = RanksController(view, workers=args.workers, scheduler=args.scheduler)
    view.bind(ctl)
    view.resize(1200, 860)
    rc = [0]
    if args.screenshot:
        def finish(_doc=None) -> None:
            view.grab().save(args.screenshot)
            app.quit()

        def failed(message: str) -> None:
            print(f"stallscope: error: {message}", file=sys.stderr)
            rc[0] = 2
            app.quit()

        def open_slowest(job) -> None:
            slow = job.stragglers.slowest if job.stragglers else None
            path = next((s.path for s in job.summaries if slow and s.key == slow.key), None)
            if path is None:
                finish()
            else:
                view.table.selectRow(0)
                ctl.open_rank(path)

        ctl.sig_job_finished.connect(open_slowest)
        ctl.sig_rank_document_loaded.connect(finish)
        ctl.sig_job_failed.connect(failed)
        ctl.sig_rank_load_failed.connect(failed)
    else:
        view.show()
    ctl.open_folder(args.folder, run=args.run)
    code = app.exec()
    return rc[0] or code


if __name__ == "__main__":
    raise SystemExit(main())
