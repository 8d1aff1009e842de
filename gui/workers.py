"""One worker base for every long job (ARCHITECTURE.md): a QRunnable whose signals live on a
separate QObject. Workers never touch widgets; a newer request cancels the one it supersedes.

    worker = JobWorker(lambda cancel: core_job(..., cancel=cancel))
    worker.signals.sig_progress.connect(...)   # (done, total)
    worker.signals.sig_result.connect(...)     # the job's return value
    worker.signals.sig_error.connect(...)      # one-line message (str)
    worker.signals.sig_finished.connect(...)   # always, last
    JobRunner.start(worker)
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal
from shiboken6 import isValid

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job


class JobSignals(QObject):
    sig_progress = Signal(int, int)
    sig_result = Signal(object)
    sig_error = Signal(str)
    sig_cancelled = Signal()
    sig_finished = Signal()


class JobWorker(QRunnable):
    """Runs `make_job(cancel)`: a generator job (yields (done, total)) or a plain result."""

    def __init__(self, make_job: Callable[[CancelFlag], Job[Any] | Any]) -> None:
        super().__init__()
        self.setAutoDelete(False)
        self.signals = JobSignals()
        self.cancel_flag = CancelFlag()
        self._make_job = make_job

    def cancel(self) -> None:
        self.cancel_flag.set()

    def run(self) -> None:  # worker thread
        try:
            job = self._make_job(self.cancel_flag)
            result = self._drain(job) if hasattr(job, "__next__") else job
            if self.cancel_flag.is_set():
                self.signals.sig_cancelled.emit()
            else:
                self.signals.sig_result.emit(result)
        except Cancelled:
            self.signals.sig_cancelled.emit()
        except StallscopeError as exc:
            self.signals.sig_error.emit(str(exc))
        except MemoryError:
            self.signals.sig_error.emit("out of memory while working; the previous view stays open")
        except Exception as exc:  # noqa: BLE001 - a bug must still not reach the user as a traceback
            traceback.print_exc()
            self.signals.sig_error.emit(f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self.signals.sig_finished.emit()

    def _drain(self, job: Job[Any]) -> Any:
        try:
            while True:
                done, total = next(job)
                self.signals.sig_progress.emit(int(done), int(total))
                if self.cancel_flag.is_set():
                    job.close()
                    raise Cancelled("cancelled")
        except StopIteration as stop:
            return stop.value


class JobRunner(QObject):
    """Keeps at most one live job per slot: starting a new one cancels the one it supersedes.

    The only record of which jobs run: `is_current(worker, slot)` tells a superseded job's
    late signals apart, `busy` is True while any slot has a live job (sig_busy_changed on
    each change)."""

    sig_busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._current: dict[str, JobWorker] = {}
        self._all: set[JobWorker] = set()

    @property
    def busy(self) -> bool:
        return bool(self._current)

    def start(self, worker: JobWorker, slot: str = "default") -> JobWorker:
        was_busy = self.busy
        old = self._current.get(slot)
        if old is not None:
            old.cancel()
        self._current[slot] = worker
        self._all.add(worker)
        worker.signals.sig_finished.connect(lambda w=worker, s=slot: self._done(w, s))
        QThreadPool.globalInstance().start(worker)
        if not was_busy:
            self.sig_busy_changed.emit(True)
        return worker

    def cancel(self, slot: str | None = None) -> None:
        """Cancel the live job of `slot` (None: of every slot)."""
        for name in list(self._current) if slot is None else [slot]:
            worker = self._current.get(name)
            if worker is not None:
                worker.cancel()

    def is_current(self, worker: JobWorker, slot: str = "default") -> bool:
        return self._current.get(slot) is worker

    def while_current(self, worker: JobWorker, slot: str = "default"):
        """`wrap(fn)`: fn, run only while `worker` is the live job of `slot`; a superseded
        job's late signals are dropped.  sig.sig_result.connect(wrap(on_result))"""
        def wrap(fn: Callable[..., object]) -> Callable[..., None]:
            def call(*args: object) -> None:
                if self.is_current(worker, slot):
                    fn(*args)
            return call
        return wrap

    def _done(self, worker: JobWorker, slot: str) -> None:
        if not isValid(self):  # its owner (a closed dialog's controller) went first
            return
        self._all.discard(worker)
        if self._current.get(slot) is worker:
            del self._current[slot]
            if not self._current:
                self.sig_busy_changed.emit(False)
