"""The tune dialog: measure DataLoader settings on the user's script, trial by trial, live.

    dialog = TuneDialog("train.py", args=["--epochs", "1"])
    dialog = TuneDialog("~/proj/train.py", host="gpu-box", python="~/venv/bin/python")  # there
    dialog.sig_compare_requested.connect(lambda before, after: ...)  # baseline, best session
    dialog.start()          # or autostart=True

The tune runs in its controller (gui/controllers/tune.py, the dialog's `tuner`: a JobRunner
there); each finished trial it reports adds a bar to the chart (tune_chart: step time per trial,
data wait inside it, the best in green) and a row to the table (tune_table). Cancel stops the
running trial; the finished ones stay in the tune folder. Where (run_where.HostForm, the same
rows as the Run dialog's) runs the trials on this computer or on a host over the user's own ssh
(script, folder and interpreter the host's, typed; STALLSCOPE_SSH_CONFIG applies as for the
CLI). Made with its controller by gui/controllers/tune.tune_dialog; standalone:
`python -m stallscope.gui.controllers.tune`.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QSettings, Qt, QTimer, Signal, SignalInstance
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import units
from stallscope.core.tune import TuneConfig, TuneResult, usable_cores, verdict
from stallscope.core.tune.job import DEFAULT_BUDGET_S
from stallscope.core.tune.search import most_workers_default
from stallscope.core.tune.trial import Trial
from stallscope.gui.colors import BETTER_COLOR, BUSY_COLOR, MUTED_TEXT, WORSE_COLOR, error_text
from stallscope.gui.dialogs.run_where import HostForm, HostMemory, WhereChoice
from stallscope.gui.dialogs.tune_chart import WAIT_COLOR, TuneChart
from stallscope.gui.dialogs.tune_table import TrialTable
from stallscope.gui.run_request import run_settings
from stallscope.gui.widgets import rich_label, set_rich

# what `tune --host` says (core/commands/tune.py)
ON_HOST = ("Trials run there one at a time, over your own ssh (~/.ssh/config, keys, agent). Their "
           "memory and workers' CPU time are not sampled there: no memory guard, no worker-CPU "
           "hint.")


class Tuner(Protocol):
    """What the dialog needs of its controller (gui/controllers/tune.TuneController)."""

    sig_trial: SignalInstance      # Trial (a copy), best index, baseline index
    sig_progress: SignalInstance   # trials done, at most
    sig_result: SignalInstance     # TuneResult
    sig_error: SignalInstance      # str
    sig_cancelled: SignalInstance
    sig_finished: SignalInstance

    @property
    def running(self) -> bool: ...

    def start(self, cfg: TuneConfig) -> None: ...

    def cancel(self) -> None: ...

    def wait(self, timeout_ms: int = 30_000) -> bool: ...


class TuneDialog(QDialog):
    sig_compare_requested = Signal(str, str)  # the baseline's and the best trial's sessions
    sig_tune_ended = Signal(str)  # "done", "cancelled" or "failed"

    def __init__(self, script: str, args: list[str] | None = None, *, tuner: Tuner,
                 cwd: str = "", python: str = "", parent: QWidget | None = None,
                 budget_s: float = DEFAULT_BUDGET_S, out: str | None = None,
                 max_workers: int | None = None, max_trials: int | None = None,
                 autostart: bool = False, host: str = "", settings: QSettings | None = None,
                 ssh_options: tuple[str, ...] = (), remote_cache: str = "") -> None:
        """host: the script, cwd and python are that host's (typed paths, kept as typed);
        ssh_options and remote_cache as Where's (STALLSCOPE_SSH_CONFIG's -F comes first)."""
        super().__init__(parent)
        self.max_trials = max_trials
        self.host = host.strip()
        self.script = script if self.host else str(Path(script).resolve())
        self.args = list(args or [])
        self.cwd = cwd if self.host else cwd or str(Path(self.script).parent)
        self.python = python if self.host else python or sys.executable
        self.ssh_options, self.remote_cache = tuple(ssh_options), remote_cache
        self.memory = HostMemory(settings or run_settings())
        self.ran_on = ""  # the host of the tune shown ("": this computer)
        self.out = out
        self.trials: list[Trial] = []
        self.best: int | None = None
        self.baseline: int | None = None
        self.tune_result: TuneResult | None = None
        self.folder: Path | None = None
        self.state = "idle"  # idle, running, done, cancelled, failed
        self.tuner = tuner
        tuner.sig_trial.connect(self._on_trial)
        tuner.sig_progress.connect(self._on_progress)
        tuner.sig_result.connect(self._on_result)
        tuner.sig_error.connect(self._on_error)
        tuner.sig_cancelled.connect(self._on_cancelled)
        tuner.sig_finished.connect(self._on_finished)
        self.setMinimumWidth(760)  # the height: the layout's minimum
        self._build(budget_s, max_workers)
        self.host_rows.fill(self.host, self.script if self.host else "", self.cwd, self.python)
        self.where.set_remote(bool(self.host))
        self._where_changed(bool(self.host))
        layout = self.layout()
        if layout is not None:
            layout.activate()  # its minimum set before there is a window to tell
        if autostart:
            QTimer.singleShot(0, self.start)

    # ------------------------------------------------------------------ layout
    def _build(self, budget_s: float, max_workers: int | None) -> None:
        self.title = title = rich_label("")
        title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        about = QLabel("Runs the script a few times with other DataLoader settings: more "
                       "workers while steps get faster beyond the noise (the fewest that are "
                       "as fast are kept); the leader is repeated against the script as "
                       "written in alternating pairs and kept only when its gain is beyond "
                       "the noise; then, with budget left, pin_memory, persistent_workers, "
                       "prefetch_factor beside it. Each trial counts its steady steps after a "
                       "warm-up. The script is not edited.")
        about.setWordWrap(True)
        about.setObjectName("hint")

        self.budget_spin = QSpinBox(minimum=10, maximum=24 * 3600, value=int(budget_s),
                                    suffix=" s")
        self.budget_spin.setToolTip("time for all trials together")
        cores = usable_cores()
        self.workers_spin = QSpinBox(minimum=1, maximum=256,
                                     value=max_workers or most_workers_default(cores))
        self.workers_spin.setToolTip(f"the most num_workers to try: the climb stops at the "
                                     f"{cores} usable cores when the workers compute, and goes "
                                     f"on up to this many while they wait on I/O (memory "
                                     f"bounds it too)")
        self.where_form = QFormLayout()
        self.where_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.where = WhereChoice()
        self.where_form.addRow("Where", self.where)
        self.host_rows = HostForm(self.where_form, self.memory, ON_HOST, self)
        self.host_rows.default_script = self.script  # a host without a last script: the same path
        hint = self.host_rows.hint
        hint.setMinimumWidth(600)  # wrapped labels: their height at their narrowest, so that
        hint.setMinimumHeight(hint.heightForWidth(600))  # the dialog's minimum holds them
        self.where.sig_changed.connect(self._where_changed)
        self.host_rows.host_combo.currentTextChanged.connect(lambda _t: self._retitle())
        self.host_rows.script_edit.textChanged.connect(lambda _t: self._retitle())

        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        row = QHBoxLayout()
        row.addWidget(QLabel("Budget"))
        row.addWidget(self.budget_spin)
        row.addSpacing(12)
        row.addWidget(QLabel("Most workers"))
        row.addWidget(self.workers_spin)
        row.addStretch(1)
        row.addWidget(self.start_button)

        self.chart = TuneChart()
        self.chart.setMinimumHeight(220)
        legend = rich_label(f"<span style='color:{MUTED_TEXT}'>&#9632;</span> as written &nbsp; "
                        f"<span style='color:{BUSY_COLOR}'>&#9632;</span> trial &nbsp; "
                        f"<span style='color:{BETTER_COLOR}'>&#9632;</span> kept (faster) &nbsp; "
                        f"<span style='color:{WAIT_COLOR}'>&#9632;</span> data wait &nbsp; "
                        f"<span style='color:{WORSE_COLOR}'>&#10005;</span> failed or skipped")

        self.table = TrialTable()

        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(8)
        self.status = QLabel("Press Start: the first trial runs the script as written.")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # paths, the script's messages
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict = QLabel("")
        self.verdict.setWordWrap(True)
        self.verdict.setTextFormat(Qt.TextFormat.PlainText)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.change_edit = QLineEdit(readOnly=True)
        self.change_edit.setPlaceholderText("the line to change appears here")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(self.change_edit.text()))
        change_row = QHBoxLayout()
        change_row.addWidget(self.change_edit, 1)
        change_row.addWidget(self.copy_button)

        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.compare_button = QPushButton("Compare before/after")
        self.compare_button.setEnabled(False)
        self.compare_button.setToolTip("open the two trials the claim rests on (the script as "
                                       "written and the best settings) side by side")
        self.compare_button.clicked.connect(self._compare)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        buttons.addWidget(self.compare_button)
        buttons.addWidget(self.close_button)

        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(about)
        layout.addLayout(self.where_form)
        layout.addLayout(row)
        layout.addWidget(self.chart, 3)
        layout.addWidget(legend)
        layout.addWidget(self.table, 2)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.verdict)
        layout.addLayout(change_row)
        layout.addLayout(buttons)
        margins = layout.contentsMargins()
        about.setMinimumHeight(about.heightForWidth(760 - margins.left() - margins.right()))

    # ------------------------------------------------------------------ running
    @property
    def is_running(self) -> bool:
        return self.state == "running"

    def _where_changed(self, remote: bool) -> None:
        self.host_rows.set_active(remote)
        if remote and not self.host_rows.script_edit.text().strip():
            self.host_rows.script_edit.setText(self.script)  # a start: the same path there
        self._retitle()
        # the rows above the chart grow the dialog (640 without them), never squeeze the chart:
        # the layout's minimum is the dialog's (chart, table, the verdict once it is there)
        self.where_form.invalidate()
        layout = self.layout()
        gap = max(0, layout.spacing()) if layout is not None else 0
        height = 640 + self.where_form.sizeHint().height() + gap
        if self.height() < height:
            self.resize(max(self.width(), 760), height)

    def _retitle(self) -> None:
        remote = self.where.is_remote
        script = self.host_rows.script_edit.text().strip() if remote else self.script
        name = Path(script).name or script
        host = self.host_rows.host() if remote else ""
        on = f" on {host}" if host else ""
        self.setWindowTitle(f"Tune the DataLoader: {name}{on}")
        set_rich(self.title, "<b>{}</b> {}" + (" &nbsp;on <b>{}</b>" if host else ""), name,
                 shlex.join(self.args), *([host] if host else []))

    def config(self) -> TuneConfig:
        """The tune to run, from the fields; ValueError with one line when a field is wrong."""
        where = self.host_rows.where(self.ssh_options, self.remote_cache) \
            if self.where.is_remote else None
        script = self.host_rows.fields()["script"] if where is not None else self.script
        cfg = TuneConfig(script=Path(script), args=self.args,
                         cwd=Path(self.cwd) if where is None else Path.cwd(),
                         python=self.python if where is None else "",
                         out=Path(self.out) if self.out else None,
                         budget_s=float(self.budget_spin.value()),
                         max_workers=self.workers_spin.value(), max_trials=self.max_trials,
                         where=where)
        cfg.out = cfg.folder()
        return cfg

    def start(self) -> None:
        if self.is_running:
            return
        try:
            cfg = self.config()
        except ValueError as exc:
            self._set_status(str(exc), error_text())
            return
        if cfg.where is not None:
            self.host_rows.remember()
        self.ran_on = str(cfg.where.host) if cfg.where is not None else ""
        self.folder = cfg.out
        self.trials, self.best, self.baseline, self.tune_result = [], None, None, None
        self.table.clear_trials()
        self.chart.set_trials([], None, None)
        self.verdict.setText("")
        self.change_edit.clear()
        self.copy_button.setEnabled(False)
        self.compare_button.setEnabled(False)
        self.state = "running"
        self.start_button.setEnabled(False)
        self.where.setEnabled(False)  # a running tune's place stays as it started
        self.host_rows.set_enabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 0)
        self._set_status(f"Trial 1 runs the script as written{self._on()}… (trials go to "
                         f"{cfg.out})")
        self.tuner.start(cfg)

    def cancel(self) -> None:
        if self.is_running:
            self._set_status("Cancelling: stopping the running trial…")
            self.cancel_button.setEnabled(False)
            self.tuner.cancel()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block (with events) until the tune has ended; False on timeout."""
        return self.tuner.wait(timeout_ms) if self.is_running else True

    # ------------------------------------------------------------------ job signals
    def _on_trial(self, trial: Trial, best, baseline) -> None:
        self.trials.append(trial)
        self.best, self.baseline = best, baseline
        self.table.add(trial)
        self.chart.set_trials(self.trials, best, baseline)
        self.table.mark_best(self.trials, best)
        self._set_status(f"Trial {trial.index} ({trial.label}): "
                         + (f"{units.ms((trial.step_ms or 0.0) * 1e3)} per step" if trial.ok
                            else f"{trial.status}" + (f": {trial.message}" if trial.message
                                                      else "")))

    def _on_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        if self.is_running and done < total:
            self._set_status(f"Trial {done + 1} of at most {total} running{self._on()}…")

    def _on_result(self, result: TuneResult) -> None:
        self.tune_result = result
        self.state = "done"
        self.best, self.baseline = result.best, result.baseline
        self.chart.set_trials(self.trials, self.best, self.baseline, done=True)
        self.table.mark_best(self.trials, self.best)
        lines = verdict(result)
        self.verdict.setText("\n".join(line for line in lines
                                       if not line.startswith("change: ")))
        self.verdict.setMinimumHeight(self.verdict.heightForWidth(max(self.verdict.width(), 300)))
        self.change_edit.setText(result.change)
        self.copy_button.setEnabled(bool(result.change))
        self.compare_button.setEnabled(self.compare_pair() is not None)
        base = result.baseline_trial
        failed = base is None or not base.ok
        self._set_status(f"Done: {units.plural(len(result.trials), 'trial')}{self._on()} in "
                         f"{result.elapsed_s:.0f} s, kept in {result.folder}",
                         error_text() if failed else None)

    def _on_error(self, message: str) -> None:
        self.state = "failed"
        self._set_status(message, error_text())

    def _on_cancelled(self) -> None:
        self.state = "cancelled"
        done = [t for t in self.trials if t.status != "interrupted"]
        self._set_status(f"Cancelled: {units.plural(len(done), 'finished trial')} kept in "
                         f"{self.folder}")
        self.compare_button.setEnabled(self.compare_pair() is not None)

    def _on_finished(self) -> None:
        if self.state == "running":
            self.state = "failed"
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.start_button.setEnabled(True)
        self.where.setEnabled(True)
        self.host_rows.set_enabled(True)
        self.start_button.setText("Run again")
        self.cancel_button.setEnabled(False)
        self.sig_tune_ended.emit(self.state)

    # ------------------------------------------------------------------ compare
    def compare_pair(self) -> tuple[str, str] | None:
        """(baseline session, best session) once the best is not the script as written: once
        the tune has ended, the pair its claim rests on (result.sessions)."""
        if self.tune_result is not None and self.tune_result.best != self.tune_result.baseline:
            before, after = self.tune_result.sessions
            return (before, after) if before and after else None
        by_index = {t.index: t for t in self.trials}
        base = by_index.get(self.baseline) if self.baseline is not None else None
        best = by_index.get(self.best) if self.best is not None else None
        if base is None or best is None or base.index == best.index:
            return None
        if not (base.session and best.session):
            return None
        if not all(any((Path(s) / "traces").glob("*.pt.trace.json*"))
                   for s in (base.session, best.session)):
            return None  # search trials record no trace: nothing for the compare view
        return base.session, best.session

    def _compare(self) -> None:
        pair = self.compare_pair()
        if pair is not None:
            self.sig_compare_requested.emit(*pair)

    def _on(self) -> str:
        return f" on {self.ran_on}" if self.ran_on else ""

    def _set_status(self, text: str, color: str | None = None) -> None:
        self.status.setStyleSheet(f"color: {color};" if color else "")
        self.status.setText(text)

    # ------------------------------------------------------------------ closing
    def reject(self) -> None:
        """Close: a running tune is cancelled first (its finished trials stay)."""
        if self.is_running:
            self.cancel()
            self.wait()
        super().reject()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        if self.is_running:
            self.cancel()
            self.wait()
        super().closeEvent(event)

    def done(self, result: int) -> None:
        self.host_rows.stop()  # the host's interpreter check, if one is under way
        super().done(result)
