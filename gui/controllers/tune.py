"""A tune's job: core/tune's search off the GUI thread, on this controller's JobRunner; the tune
dialog (gui/dialogs/tune.py) only shows what it reports.

    dialog = tune_dialog("train.py", ["--epochs", "1"], parent=window)  # dialog + its controller
    dialog.start()

Standalone: `python -m stallscope.gui.controllers.tune [--budget S] [--host H --remote-python P
--remote-cwd DIR] [--start | --screenshot OUT.png] -- train.py [args]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from stallscope.core.tune import TuneConfig, TuneResult, tune_job
from stallscope.core.tune.job import DEFAULT_BUDGET_S
from stallscope.core.tune.trial import Trial
from stallscope.gui.dialogs.tune import TuneDialog
from stallscope.gui.standalone import run_until_closed, standalone_app
from stallscope.gui.workers import JobRunner, JobWorker


class TuneController(QObject):
    """One tune at a time; each finished trial crosses back to the GUI thread (queued)."""

    sig_trial = Signal(object, object, object)  # Trial (a copy), best index, baseline index
    sig_progress = Signal(int, int)             # trials done, at most
    sig_result = Signal(object)                 # TuneResult
    sig_error = Signal(str)
    sig_cancelled = Signal()
    sig_finished = Signal()                     # after any of the three above

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = JobRunner(self)
        self.worker: JobWorker | None = None

    @property
    def running(self) -> bool:
        return self.runner.busy

    def start(self, cfg: TuneConfig) -> None:
        if self.running:
            return
        emit = self.sig_trial.emit

        def on_trial(trial: Trial, result: TuneResult) -> None:  # worker thread
            emit(dataclasses.replace(trial), result.best, result.baseline)

        worker = JobWorker(lambda cancel: tune_job(cfg, cancel, on_trial=on_trial))
        signals = worker.signals
        signals.sig_progress.connect(self.sig_progress)
        signals.sig_result.connect(self.sig_result)
        signals.sig_error.connect(self.sig_error)
        signals.sig_cancelled.connect(self.sig_cancelled)
        signals.sig_finished.connect(self.sig_finished)
        self.worker = worker
        self.runner.start(worker, "tune")

    def cancel(self) -> None:
        """Stop the running trial (the finished ones stay in the tune folder)."""
        if self.worker is not None:
            self.worker.cancel()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block (with events) until the job has ended; False on timeout."""
        if self.worker is None or not self.running:
            return True
        loop = QEventLoop()
        self.worker.signals.sig_finished.connect(loop.quit)
        QTimer.singleShot(timeout_ms, loop.quit)
        if self.running:
            loop.exec()
        return not self.running


def tune_dialog(script: str, args: list[str] | None = None, parent: QWidget | None = None,
                **options) -> TuneDialog:
    """The tune dialog with a controller of its own (a child of the dialog: closing the dialog
    ends its tune). `options`: TuneDialog's (cwd, python, budget_s, out, max_workers, host:
    the trials run there, ...)."""
    controller = TuneController()
    dialog = TuneDialog(script, args, tuner=controller, parent=parent, **options)
    controller.setParent(dialog)
    return dialog


def main(argv: list[str] | None = None) -> int:
    """`python -m stallscope.gui.controllers.tune [options] -- script.py [args]`: the dialog as
    the app opens it, themed, waiting for Start (--start, or --screenshot, starts at once)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    own, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    p = argparse.ArgumentParser(prog="python -m stallscope.gui.controllers.tune",
                                usage="%(prog)s [options] -- script.py [args]",
                                description="Tune a script's DataLoader settings, live.")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS")
    p.add_argument("--max-workers", type=int, metavar="N")
    p.add_argument("--out", metavar="DIR", help="tune folder")
    p.add_argument("--host", default="", help="run the trials there over ssh (the script's "
                                              "path is the host's)")
    p.add_argument("--remote-python", default="", metavar="PATH")
    p.add_argument("--remote-cwd", default="", metavar="DIR")
    p.add_argument("--start", action="store_true", help="start at once, without Start")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="start at once, save a PNG of the dialog when the tune ends, then exit")
    p.add_argument("script", nargs="?")
    args = p.parse_args(own)
    command = rest or ([args.script] if args.script else [])
    if not command:
        p.error("no script given: -- script.py [args]")
    if not args.host and not Path(command[0]).is_file():
        print(f"stallscope: error: script not found: {command[0]}", file=sys.stderr)
        return 2
    app = standalone_app(screenshot=bool(args.screenshot))
    dialog = tune_dialog(command[0], command[1:], budget_s=args.budget, out=args.out,
                         max_workers=args.max_workers, host=args.host,
                         python=args.remote_python, cwd=args.remote_cwd,
                         autostart=bool(args.start or args.screenshot))
    dialog.resize(900, max(760, dialog.minimumHeight()))
    dialog.start_button.setFocus()
    dialog.sig_compare_requested.connect(
        lambda before, after: print(f"compare: {before} {after}", flush=True))
    if args.screenshot:
        def shoot(state: str) -> None:
            dialog.grab().save(args.screenshot)
            print(f"screenshot ({state}): {args.screenshot}", flush=True)
            app.quit()

        dialog.sig_tune_ended.connect(lambda state: QTimer.singleShot(200, lambda: shoot(state)))
    return run_until_closed(app, dialog)


if __name__ == "__main__":
    sys.exit(main())
