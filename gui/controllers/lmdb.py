"""The LMDB wizard's work (core/lmdb: inspect, estimate, convert, verify, measure) on this
controller's JobRunner, one slot each; the wizard's pages (gui/dialogs/lmdb_wizard) only show
what the jobs report.

    wizard = open_lmdb_wizard(parent, source="")   # the wizard with its jobs, shown
    python -m stallscope.gui.controllers.lmdb [SRC]  # standalone

Each method starts its job with the page's handlers connected first (result=, error=,
progress=, finished=, cancelled=: the names of gui/workers.JobSignals without `sig_`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import cast

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QApplication, QWidget, QWizard

from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import inspect_job, inspect_source
from stallscope.core.lmdb.measure import measure
from stallscope.core.lmdb.verify import verify
from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard
from stallscope.gui.workers import JobRunner, JobWorker

SLOTS = ("inspect", "estimate", "convert", "verify", "measure")


class LMDBJobs(QObject):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = JobRunner(self)

    def inspect(self, source, pre: Preprocess, **handlers: Callable) -> JobWorker:
        """The first page's look at a source: fields, classes, a preview of 8 samples."""
        return self._start("inspect", lambda cancel: inspect_job(source, pre, n_preview=8),
                           handlers)

    def estimate(self, source, pre: Preprocess, **handlers: Callable) -> JobWorker:
        """The options page's size estimate for these preprocessing options."""
        return self._start("estimate", lambda cancel: inspect_source(source, pre, n_preview=1),
                           handlers)

    def convert(self, source, dst: str, workers: int, pre: Preprocess,
                **handlers: Callable) -> JobWorker:
        return self._start("convert", lambda cancel: convert(
            source, dst, workers=workers, preprocess=pre, cancel=cancel), handlers)

    def verify(self, dst: str, **handlers: Callable) -> JobWorker:
        return self._start("verify", lambda cancel: verify(dst, n=64, cancel=cancel), handlers)

    def measure(self, dst: str, **handlers: Callable) -> JobWorker:
        return self._start("measure", lambda cancel: measure(dst, cancel=cancel), handlers)

    def cancel(self, slot: str | None = None) -> None:
        """Stop one job, or every one (work done is kept: a conversion resumes)."""
        for name in (slot,) if slot else SLOTS:
            self.runner.cancel(name)

    def _start(self, slot: str, job, handlers: dict[str, Callable]) -> JobWorker:
        worker = JobWorker(job)
        for name, handler in handlers.items():
            getattr(worker.signals, f"sig_{name}").connect(handler)
        return self.runner.start(worker, slot)


def open_lmdb_wizard(parent: QWidget | None = None, source: str = "") -> QWizard:
    """Show the wizard (non-modal) with its jobs and return it; it deletes itself (and its
    jobs' controller, its child) when closed."""
    wizard = lmdb_wizard(parent, source)
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    wizard.show()
    return wizard


def lmdb_wizard(parent: QWidget | None = None, source: str = "") -> LMDBWizard:
    """The wizard with a controller of its own for its jobs (not shown)."""
    jobs = LMDBJobs()
    wizard = LMDBWizard(parent, source, jobs=jobs)
    jobs.setParent(wizard)
    return wizard


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    try:
        from stallscope.gui import theme

        theme.apply_theme(app, theme.saved_mode())
    except Exception:  # noqa: BLE001 - the wizard works unthemed too
        pass
    wizard = open_lmdb_wizard(None, argv[0] if argv else "")
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
    return app.exec()


# guarded: the converter's spawned decoding processes import this module again (as
# __mp_main__) and must not open a wizard of their own
if __name__ == "__main__":
    sys.exit(main())
