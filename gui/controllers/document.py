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
        self.runner = JobRunner(self)
        self._active: dict[str, JobWorker] = {}

    @property
    def busy(self) -> bool:
        return bool(self._active)

    def open(self, path: str, role: str = "main") -> JobWorker:
        path = str(path)
        worker = JobWorker(lambda cancel: open_job(path, cancel, route_ranks=role == "main"))
        sig = worker.signals
        sig.sig_progress.connect(lambda d, t, w=worker: self._progress(role, w, d, t))
        sig.sig_result.connect(lambda doc, w=worker: self._result(role, w, doc))
        sig.sig_error.connect(lambda msg, w=worker: self._error(role, w, path, msg))
        sig.sig_cancelled.connect(lambda w=worker: self._cancelled(role, w))
        sig.sig_finished.connect(lambda w=worker: self._finished(role, w))
        was_busy = self.busy
        self._active[role] = worker
        self.runner.start(worker, role)
        self.sig_load_started.emit(role, path)
        if not was_busy:
            self.sig_busy_changed.emit(True)
        return worker

    def cancel(self) -> None:
        for role in list(self._active):
            self.runner.cancel(role)

    def _current(self, role: str, worker: JobWorker) -> bool:
        return self._active.get(role) is worker

    def _progress(self, role: str, worker: JobWorker, done: int, total: int) -> None:
        if self._current(role, worker):
            self.sig_load_progress.emit(done, total)

    def _result(self, role: str, worker: JobWorker, doc: Document | RanksFolder) -> None:
        if not self._current(role, worker):
            return
        if isinstance(doc, RanksFolder):
            self.sig_ranks_folder.emit(doc.path, doc.plan)
        else:
            self.sig_document_loaded.emit(role, doc)

    def _error(self, role: str, worker: JobWorker, path: str, message: str) -> None:
        if self._current(role, worker):
            self.sig_load_failed.emit(role, name_the_file(message, path))

    def _cancelled(self, role: str, worker: JobWorker) -> None:
        if self._current(role, worker):
            self.sig_load_cancelled.emit(role)

    def _finished(self, role: str, worker: JobWorker) -> None:
        if self._current(role, worker):
            del self._active[role]
            if not self.busy:
                self.sig_busy_changed.emit(False)
