"""Loads documents off the GUI thread: one job slot per role ("main", "compare").

Starting a load cancels the one it supersedes in the same role; results of a superseded job
are dropped. Errors arrive as one line that names the file. Never touches widgets.

A folder opened as "main" is planned first (core/folder.py's rules, in the worker): when the run
it picks is one job of more than RANKS_IN_FULL ranks, nothing is loaded; sig_ranks_folder hands
the folder and its plan on, for the rank table (summaries on a process pool) to open instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from stallscope.core.document import Document, load_document_job, plan_path
from stallscope.core.folder import FolderPlan
from stallscope.gui.workers import JobRunner, JobWorker

RANKS_IN_FULL = 8  # a job of more ranks opens as the rank table, not every rank's full trace


@dataclass
class RanksFolder:
    """A folder whose picked run is one job of many ranks."""

    path: str
    plan: FolderPlan


def many_ranks(plan: FolderPlan) -> bool:
    """The plan picks one job of more than RANKS_IN_FULL ranks."""
    if plan.every or plan.chosen is None:
        return False
    run = plan.runs[plan.chosen]
    return run.kind == "job" and len(run.files) > RANKS_IN_FULL


def open_job(path: str, cancel, route_ranks: bool = True):
    """load_document_job, or a RanksFolder (without loading) for a folder of many ranks."""
    if route_ranks and Path(path).is_dir():
        plan = plan_path(path)
        if many_ranks(plan):
            return RanksFolder(path, plan)
        return (yield from load_document_job(path, cancel, files=plan.picks))
    return (yield from load_document_job(path, cancel))


def name_the_file(message: str, path: str) -> str:
    """Core errors name their file; make sure a message always does."""
    name = Path(path).name
    return message if (name and name in message) or str(path) in message else f"{path}: {message}"


class DocumentController(QObject):
    sig_load_started = Signal(str, str)        # role, path
    sig_load_progress = Signal(int, int)       # done, total
    sig_document_loaded = Signal(str, object)  # role, Document
    sig_load_failed = Signal(str, str)         # role, one-line message naming the file
    sig_load_cancelled = Signal(str)           # role
    sig_ranks_folder = Signal(str, object)     # folder, FolderPlan: many ranks, not loaded
    sig_busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = JobRunner(self)  # the one record of which loads run
        self.runner.sig_busy_changed.connect(self.sig_busy_changed)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def open(self, path: str, role: str = "main") -> JobWorker:
        path = str(path)
        worker = JobWorker(lambda cancel: open_job(path, cancel, route_ranks=role == "main"))
        sig = worker.signals
        live = self.runner.while_current(worker, role)  # a superseded load's signals drop
        sig.sig_progress.connect(live(self.sig_load_progress.emit))
        sig.sig_result.connect(live(lambda doc: self._result(role, doc)))
        sig.sig_error.connect(live(lambda msg: self.sig_load_failed.emit(
            role, name_the_file(msg, path))))
        sig.sig_cancelled.connect(live(lambda: self.sig_load_cancelled.emit(role)))
        self.sig_load_started.emit(role, path)
        self.runner.start(worker, role)
        return worker

    def cancel(self) -> None:
        self.runner.cancel()

    def _result(self, role: str, doc: Document | RanksFolder) -> None:
        if isinstance(doc, RanksFolder):
            self.sig_ranks_folder.emit(doc.path, doc.plan)
        else:
            self.sig_document_loaded.emit(role, doc)
