"""The Run dialog: where (this computer or a remote host over ssh), what to run, with which
interpreter, under which profiler schedule. A remote host's rows are run_where.HostForm's, the
same rows as the Tune dialog's; this computer's script, folder and interpreter rows (with
Browse…) are the dialog's own, and the two sets take turns in one form.

    dialog = RunDialog(parent)
    if dialog.exec():
        request = dialog.request()     # a RunRequest; RunController.start(request) runs it

Settings are remembered per script (QSettings) and come back when that script is chosen again;
a remote host's interpreters, working folder and last script are remembered per host
(run_where.HostMemory). A remote script and folder are typed paths on the host: no Browse.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.capture import options as run_options
from stallscope.core.capture.overrides import OverrideError, parse_sets
from stallscope.gui.colors import BETTER_COLOR, MUTED_TEXT, error_text
from stallscope.gui.dialogs.fields import error_label, refill, row_widget, with_button
from stallscope.gui.dialogs.run_probe import TorchProbe
from stallscope.gui.dialogs.run_where import (
    HostForm,
    HostMemory,
    WhereChoice,
    placeholders,
    where_fields,
)
from stallscope.gui.dialogs.run_windows import WINDOW_CHOICES, window_options, windows_of
from stallscope.gui.run_request import (  # noqa: F401 - re-exported for callers
    DEFAULT_OPTIONS,
    DEMO_SCRIPT,
    TORCH_PROBE,
    RunRequest,
    default_python,
    demo_request,
    detect_interpreters,
    parse_env,
    run_settings,
    sessions_root,
    settings_key,
)


class RunDialog(QDialog):
    sig_request_ready = Signal(object)

    def __init__(self, parent: QWidget | None = None, settings: QSettings | None = None,
                 script: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Run a training script")
        self.setMinimumWidth(640)
        self.settings = settings or run_settings()
        self.memory = HostMemory(self.settings)
        self.probe = TorchProbe(self)  # this computer's interpreter (the host's: host_rows)
        self.probe.sig_result.connect(self._set_python_status)
        self._request: RunRequest | None = None
        self._build()
        last_host = "" if script else str(self.settings.value("runs/last_host", "") or "")
        self.local_script.setText(script or str(self.settings.value("runs/last_script", "")
                                                or ""))
        if last_host:
            self.host_rows.host_combo.setCurrentText(last_host)
            self.where.set_remote(True)
        elif self.local_script.text():
            self._load_remembered()
        else:
            self._fill_interpreters("")

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        self.form = form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

        self.where = WhereChoice()
        self.where.sig_changed.connect(self._where_changed)
        form.addRow("Where", self.where)
        self.host_rows = HostForm(form, self.memory, parent=self)
        self.host_rows.sig_host_chosen.connect(lambda _host: self._load_remembered())
        self.host_rows.script_edit.editingFinished.connect(self._load_remembered)

        script_hint, cwd_hint = placeholders(remote=False)
        self.local_script = QLineEdit(placeholderText=script_hint)
        self.local_script.editingFinished.connect(self._load_remembered)
        self.script_row = with_button(self.local_script, "Browse…", self._browse_script)
        form.addRow("Script", self.script_row)

        self.args_edit = QLineEdit(placeholderText="--epochs 10 --batch-size 64")
        form.addRow("Arguments", self.args_edit)

        self.local_cwd = QLineEdit(placeholderText=cwd_hint)
        self.cwd_row = with_button(self.local_cwd, "Browse…", self._browse_cwd)
        form.addRow("Working folder", self.cwd_row)

        self.local_python = QComboBox(editable=True)
        self.local_python.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.local_python.currentTextChanged.connect(self._probe_python)
        self.python_row = with_button(self.local_python, "Browse…", self._browse_python)
        form.addRow("Python", self.python_row)
        self.local_status = QLabel(" ")
        self.local_status.setObjectName("hint")
        self.local_status.setWordWrap(True)
        form.addRow("", self.local_status)

        self.env_edit = QPlainTextEdit(placeholderText="NAME=value, one a line "
                                                       "(e.g. CUDA_VISIBLE_DEVICES=0)")
        self.env_edit.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 12)
        form.addRow("Environment", self.env_edit)

        sched = QHBoxLayout()
        self.spins: dict[str, QSpinBox] = {}
        for key, value in run_options.DEFAULT_SCHEDULE.items():
            spin = QSpinBox(minimum=1 if key == "active" else 0, maximum=10_000, value=value)
            spin.setToolTip({"wait": "steps skipped before profiling",
                             "warmup": "steps with the profiler on but discarded",
                             "active": "steps recorded into the trace",
                             "repeat": "cycles (0: repeat until the script ends)"}[key])
            self.spins[key] = spin
            sched.addWidget(QLabel(key))
            sched.addWidget(spin)
        sched.addStretch(1)
        form.addRow("Schedule", row_widget(sched))

        opts = QHBoxLayout()
        self.checks = {
            "profile_memory": QCheckBox("Memory"),
            "record_shapes": QCheckBox("Shapes"),
            "with_stack": QCheckBox("Python stacks"),
            "stop_after_window": QCheckBox("Stop after the profiling window"),
        }
        self.checks["stop_after_window"].setToolTip(
            "End the script once the trace is written, instead of waiting for all its steps")
        for box in self.checks.values():
            opts.addWidget(box)
        opts.addStretch(1)
        form.addRow("Record", row_widget(opts))

        more = QHBoxLayout()
        self.nproc_spin = QSpinBox(minimum=1, maximum=64, value=1)
        self.nproc_spin.setToolTip("more than 1: launch through torch.distributed.run")
        more.addWidget(QLabel("Ranks (torchrun)"))
        more.addWidget(self.nproc_spin)
        more.addSpacing(16)
        self.lineprof_combo = QComboBox(editable=True)
        self.lineprof_combo.addItems(["off", "auto"])
        self.lineprof_combo.setToolTip("line-profile Dataset.__getitem__: auto, or "
                                       "module:Class.method")
        self.lineprof_combo.setMinimumContentsLength(14)
        more.addWidget(QLabel("Line profile"))
        more.addWidget(self.lineprof_combo)
        self.depth_spin = QSpinBox(minimum=0, maximum=5, value=0)
        self.depth_spin.setToolTip("also profile functions called this many levels deep")
        more.addWidget(QLabel("depth"))
        more.addWidget(self.depth_spin)
        more.addStretch(1)
        form.addRow("", row_widget(more))

        windows = QHBoxLayout()
        self.windows_combo = QComboBox()
        for choice_text, choice_key in WINDOW_CHOICES:
            self.windows_combo.addItem(choice_text, choice_key)
        self.windows_combo.setToolTip(
            "Repeated profiling windows, each its own trace (warmup and active above); the "
            "run goes on to its end and its whole-run record shows where each window fell")
        self.windows_edit = QLineEdit()
        self.windows_edit.setPlaceholderText("N steps, or 100,5000,…")
        self.windows_combo.currentIndexChanged.connect(self._windows_changed)
        windows.addWidget(self.windows_combo)
        windows.addWidget(self.windows_edit, 1)
        form.addRow("Windows", row_widget(windows))

        self.sets_edit = QLineEdit(placeholderText="num_workers=4 pin_memory=true   (changes "
                                                   "every DataLoader, without editing the script)")
        self.sets_edit.setToolTip("DataLoader settings for this run: num_workers, pin_memory, "
                                  "persistent_workers, prefetch_factor. KEY=VALUE for every "
                                  "DataLoader, N:KEY=VALUE for the N-th one built, "
                                  "FILE:LINE:KEY=VALUE for the one built at that line.")
        form.addRow("DataLoader", self.sets_edit)

        self.session_edit = QLineEdit(
            placeholderText=f"{run_options.sessions_root()}/<script>-<time>")
        self.session_edit.setToolTip("Empty: a new folder in your data folder (never the "
                                     "script's folder nor the installed app)")
        form.addRow("Session folder", with_button(self.session_edit, "Browse…",
                                                        self._browse_session))

        self.error_label = error_label()

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.run_button = QPushButton("Run")
        self.run_button.setDefault(True)
        buttons.addButton(self.run_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self._set_fields(RunRequest(script=""))
        self._show_where(remote=False)

    # ------------------------------------------------------------------ where
    # The fields shown: the host's (host_rows) on a remote run, this computer's otherwise.
    @property
    def host_combo(self) -> QComboBox:
        return self.host_rows.host_combo

    @property
    def script_edit(self) -> QLineEdit:
        return self.host_rows.script_edit if self.where.is_remote else self.local_script

    @property
    def cwd_edit(self) -> QLineEdit:
        return self.host_rows.cwd_edit if self.where.is_remote else self.local_cwd

    @property
    def python_combo(self) -> QComboBox:
        return self.host_rows.python_combo if self.where.is_remote else self.local_python

    @property
    def python_status(self) -> QLabel:
        return self.host_rows.python_status if self.where.is_remote else self.local_status

    def _show_where(self, remote: bool) -> None:
        """The host's rows (typed paths, nothing to browse) or this computer's."""
        for row in (self.script_row, self.cwd_row, self.python_row, self.local_status):
            self.form.setRowVisible(row, not remote)
        if remote:
            self.probe.stop()
        self.host_rows.set_active(remote)  # a host picked: sig_host_chosen loads its script's

    def _where_changed(self, remote: bool) -> None:
        self._show_where(remote)
        self.error_label.setText("")
        if self.script_edit.text().strip():  # that script's settings, on that side
            self._load_remembered()
        else:
            self._fill_interpreters("")

    def _host(self) -> str:
        return self.host_rows.host() if self.where.is_remote else ""

    # ------------------------------------------------------------------ browsing
    def _browse_script(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Training script", self._start_dir(),
                                              "Python scripts (*.py);;All files (*)")
        if path:
            self.script_edit.setText(path)
            self._load_remembered()

    def _browse_cwd(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Working folder", self._start_dir())
        if path:
            self.cwd_edit.setText(path)

    def _browse_python(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Python interpreter", "/usr/bin")
        if path:
            self.python_combo.setCurrentText(path)

    def _browse_session(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Session folder", self._start_dir())
        if path:
            self.session_edit.setText(path)

    def _start_dir(self) -> str:
        script = self.script_edit.text().strip()
        return str(Path(script).parent) if script else str(Path.home())

    # ------------------------------------------------------------------ request <-> fields
    def _fill_interpreters(self, script: str, chosen: str = "") -> None:
        if self.where.is_remote:  # the ones used on this host, the newest first
            self.host_rows.set_python(chosen)
            return
        current = chosen or self.local_python.currentText() or default_python()
        refill(self.local_python, [(path + ("   (this app)" if path == sys.executable else ""),
                                    path) for path in detect_interpreters(script)])
        self.local_python.setCurrentText(current)
        self._probe_python(current)

    def _set_fields(self, req: RunRequest) -> None:
        self.args_edit.setText(shlex.join(req.args))
        self.cwd_edit.setText(req.cwd)
        self.env_edit.setPlainText("\n".join(f"{k}={v}" for k, v in req.env.items()))
        for key, spin in self.spins.items():
            spin.setValue(int(req.schedule.get(key, run_options.DEFAULT_SCHEDULE[key])))
        for key, box in self.checks.items():
            box.setChecked(bool(req.options.get(key, DEFAULT_OPTIONS[key])))
        self.nproc_spin.setValue(int(req.options.get("nproc_per_node", 1)))
        self.lineprof_combo.setCurrentText(str(req.options.get("lineprof", "off")))
        self.depth_spin.setValue(int(req.options.get("lineprof_depth", 0)))
        self.sets_edit.setText(" ".join(req.options.get("sets") or []))
        self.session_edit.setText(req.session)
        windows_key, windows_text = windows_of(req.options)
        self.windows_combo.setCurrentIndex(max(0, self.windows_combo.findData(windows_key)))
        self.windows_edit.setText(windows_text)
        self._windows_changed()

    def _windows_changed(self, _index: int = 0) -> None:
        key = self.windows_combo.currentData()
        self.windows_edit.setEnabled(key in ("profile_every", "profile_at"))
        self.checks["stop_after_window"].setEnabled(key is None)

    def set_request(self, req: RunRequest) -> None:
        self.where.blockSignals(True)
        self.where.set_remote(req.is_remote)
        self.where.blockSignals(False)
        if req.is_remote:
            self.host_rows.fill(req.host, req.script, req.cwd, req.python)
        else:
            self.local_script.setText(req.script)
        self._show_where(req.is_remote)
        self._set_fields(req)
        self._fill_interpreters(req.script, req.python)

    def _load_remembered(self) -> None:
        script = self.script_edit.text().strip()
        if not script:
            return
        raw = self.settings.value(settings_key(script, self._host()))
        req = None
        if raw:
            try:
                req = RunRequest.from_dict({**json.loads(str(raw)), "script": script})
            except (ValueError, TypeError):
                req = None
        if req is not None:
            self._set_fields(req)
        self._fill_interpreters(script, req.python if req else "")

    def _python(self) -> str:
        """This computer's interpreter chosen (an item's path, without "(this app)")."""
        text = self.local_python.currentText().strip()
        index = self.local_python.findText(text)
        data = self.local_python.itemData(index) if index >= 0 else None
        return str(data or text.replace("   (this app)", ""))

    def _collect(self) -> RunRequest:
        where = self.host_rows.fields() if self.where.is_remote else where_fields(
            None, self.local_script.text(), self.local_cwd.text(), self._python())
        try:
            args = shlex.split(self.args_edit.text())
        except ValueError as exc:
            raise ValueError(f"arguments: {exc}") from None
        sets = self.sets_edit.text().split()
        try:
            parse_sets(sets)
        except OverrideError as exc:
            raise ValueError(f"DataLoader: {exc}") from None
        session = self.session_edit.text().strip()
        return RunRequest(
            **where, args=args, env=parse_env(self.env_edit.toPlainText()),
            schedule={k: s.value() for k, s in self.spins.items()},
            options={**{k: b.isChecked() for k, b in self.checks.items()},
                     "nproc_per_node": self.nproc_spin.value(),
                     "lineprof": self.lineprof_combo.currentText().strip() or "off",
                     "lineprof_depth": self.depth_spin.value(), "sets": sets,
                     **self._windows()},
            session=session,
            session_root="" if session else str(run_options.sessions_root()),
        )

    def _windows(self) -> dict:
        return window_options(self.windows_combo.currentData(), self.windows_edit.text())

    # ------------------------------------------------------------------ interpreter check
    def _probe_python(self, _text: str = "") -> None:
        """This computer's interpreter asked for torch (the host's: host_rows.check)."""
        if not self.where.is_remote:
            self.probe.check(self._python())

    def _set_python_status(self, text: str, ok: bool | None) -> None:
        color = {True: BETTER_COLOR, False: error_text(), None: MUTED_TEXT}[ok]
        self.local_status.setStyleSheet(f"color: {color};")
        self.local_status.setText(text)

    # ------------------------------------------------------------------ result
    def accept(self) -> None:
        try:
            req = self._collect()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return
        self._request = req
        self.settings.setValue(settings_key(req.script, req.host), json.dumps(req.to_dict()))
        if req.is_remote:
            self.host_rows.remember()
        else:
            self.settings.setValue("runs/last_script", req.script)
        self.settings.setValue("runs/last_host", req.host)
        self.settings.sync()
        self.sig_request_ready.emit(req)
        super().accept()

    def request(self) -> RunRequest | None:
        return self._request

    def done(self, result: int) -> None:
        self.probe.stop()
        self.host_rows.stop()
        super().done(result)


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])
    dialog = RunDialog(script=sys.argv[1] if len(sys.argv) > 1 else str(DEMO_SCRIPT))
    if dialog.exec() and (req := dialog.request()) is not None:  # accepted: a request is set
        print(json.dumps(req.to_dict(), indent=2))
