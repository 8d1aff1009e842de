"""Loads documents off the GUI thread: one job slot per role ("main", "compare").

Starting a load cancels the one it supersedes in the same role; results of a superseded job
are dropped. Errors arrive as one line that names the file. Never touches widgets.

What a path opens as is core/document.open_as's answer (the CLI's rule too), asked in the
worker: a job of more than RANKS_IN_FULL ranks loads nothing, sig_ranks_folder hands the folder
and its plan on, for the rank table (summaries on a process pool) to open instead; a session's
folder is announced by sig_session (its run replay) once its trace is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from stallscope.core.document import RANKS, Document, load_document_job, open_as
from stallscope.core.errors import TraceError
from stallscope.core.folder import FolderPlan
from stallscope.gui.workers import JobRunner, JobWorker


@dataclass
class RanksFolder:
    """A folder that opens as a job of too many ranks to load in full: the rank table."""

    path: str
    plan: FolderPlan


def open_job(path: str, cancel, route_ranks: bool = True):
    """What `path` opens as (core/document.open_as, the CLI's rule too), loaded: a Document,
    or a RanksFolder (nothing loaded) for a job of many ranks. A session without a trace yet
    loads nothing: its Document has no reports (the run replay shows it)."""
    opening = open_as(path)
    if route_ranks and opening.kind == RANKS and not opening.in_full:
        assert opening.plan is not None  # a job's ranks come from a folder's plan
        return RanksFolder(path, opening.plan)
    if opening.files:
        doc = yield from load_document_job(path, cancel, files=opening.files)
    elif route_ranks:
        doc = Document(path=Path(path), reports=[], labels=[])
    else:
        raise TraceError(f"{path}: this session holds no trace yet")
    doc.opening = opening
    return doc


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
    sig_session = Signal(str)                  # a session folder opened as "main": its run
    sig_nothing_to_show = Signal(str, str)     # role, why: a session without a usable trace
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
            return
        if role == "main" and doc.opening is not None and doc.opening.session is not None:
            self.sig_session.emit(str(doc.opening.session))  # first: the trace takes the front
        if doc.reports:
            self.sig_document_loaded.emit(role, doc)
        else:
            why = doc.opening.no_trace if doc.opening is not None else ""
            self.sig_nothing_to_show.emit(role, why or f"{doc.path}: no trace to show")
