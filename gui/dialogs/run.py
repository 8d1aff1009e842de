"""The Run dialog: what to run, with which interpreter, under which profiler schedule.

    dialog = RunDialog(parent)
    if dialog.exec():
        request = dialog.request()     # a RunRequest; RunController.start(request) runs it

Settings are remembered per script (QSettings) and come back when that script is chosen again.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from PySide6.QtCore import QProcess, QSettings, Signal
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
from shiboken6 import isValid

from stallscope.core.capture import options as run_options
from stallscope.core.capture.overrides import OverrideError, parse_sets
from stallscope.gui.dialogs.fields import row_widget, with_button
from stallscope.gui.dialogs.run_windows import WINDOW_CHOICES, window_options, windows_of
from stallscope.gui.run_request import (  # noqa: F401 - re-exported for callers
    DEFAULT_OPTIONS,
    DEMO_SCRIPT,
    RUNNER_PATH,
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
        self._probe: QProcess | None = None
        self._request: RunRequest | None = None
        self._build()
        last = script or str(self.settings.value("runs/last_script", "") or "")
        if last:
            self.script_edit.setText(last)
            self._load_remembered()
        else:
            self._fill_interpreters("")

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

        self.script_edit = QLineEdit(placeholderText="train.py: your unmodified training script")
        self.script_edit.editingFinished.connect(self._load_remembered)
        form.addRow("Script", with_button(self.script_edit, "Browse…", self._browse_script))

        self.args_edit = QLineEdit(placeholderText="--epochs 10 --batch-size 64")
        form.addRow("Arguments", self.args_edit)

        self.cwd_edit = QLineEdit(placeholderText="the script's folder")
        form.addRow("Working folder", with_button(self.cwd_edit, "Browse…",
                                                        self._browse_cwd))

        self.python_combo = QComboBox(editable=True)
        self.python_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.python_combo.currentTextChanged.connect(self._probe_python)
        form.addRow("Python", with_button(self.python_combo, "Browse…",
                                                self._browse_python))
        self.python_status = QLabel(" ")
        self.python_status.setObjectName("hint")
        self.python_status.setWordWrap(True)
        form.addRow("", self.python_status)

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

        self.error_label = QLabel("")
        self.error_label.setObjectName("error")
        self.error_label.setStyleSheet("color: #c92a2a;")
        self.error_label.setWordWrap(True)

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
        current = chosen or self.python_combo.currentText() or default_python()
        self.python_combo.blockSignals(True)
        self.python_combo.clear()
        for path in detect_interpreters(script):
            label = path + ("   (this app)" if path == sys.executable else "")
            self.python_combo.addItem(label, path)
        self.python_combo.blockSignals(False)
        self.python_combo.setCurrentText(current)
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
        self.script_edit.setText(req.script)
        self._set_fields(req)
        self._fill_interpreters(req.script, req.python)

    def _load_remembered(self) -> None:
        script = self.script_edit.text().strip()
        if not script:
            return
        raw = self.settings.value(settings_key(script))
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
        text = self.python_combo.currentText().strip()
        index = self.python_combo.findText(text)
        data = self.python_combo.itemData(index) if index >= 0 else None
        return str(data or text.replace("   (this app)", ""))

    def _collect(self) -> RunRequest:
        script = self.script_edit.text().strip()
        if not script:
            raise ValueError("choose the training script to run")
        if not Path(script).is_file():
            raise ValueError(f"{script}: no such script")
        cwd = self.cwd_edit.text().strip()
        if cwd and not Path(cwd).is_dir():
            raise ValueError(f"{cwd}: working folder does not exist")
        python = self._python()
        if not python or not (Path(python).is_file() or shutil.which(python)):
            raise ValueError(f"{python or '(empty)'}: no such Python interpreter")
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
            script=str(Path(script).resolve()), args=args, cwd=cwd, python=python,
            env=parse_env(self.env_edit.toPlainText()),
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
        python = self._python()
        self._stop_probe()
        if not python or not (Path(python).is_file() or shutil.which(python)):
            self._set_python_status(f"{python or 'No interpreter'}: not found", ok=False)
            return
        self._set_python_status("checking for torch…", ok=None)
        probe = QProcess(self)
        probe.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        probe.finished.connect(lambda code, _status, p=probe, py=python:
                               self._on_probe(p, py, code))
        probe.errorOccurred.connect(lambda error, p=probe, py=python:
                                    self._on_probe_error(p, py, error))
        self._probe = probe
        probe.start(python, ["-c", TORCH_PROBE])

    def _stop_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is None:
            return
        for sig in (probe.finished, probe.errorOccurred):
            try:
                sig.disconnect()
            except (RuntimeError, TypeError):
                pass
        probe.kill()
        probe.waitForFinished(1000)
        probe.deleteLater()

    def _on_probe_error(self, probe: QProcess, python: str, error) -> None:
        if not (isValid(self) and isValid(probe)) or probe is not self._probe:
            return  # the dialog went away while its probe still ran
        if error == QProcess.ProcessError.FailedToStart:
            self._set_python_status(f"{python}: cannot be started", ok=False)

    def _on_probe(self, probe: QProcess, python: str, code: int) -> None:
        if not (isValid(self) and isValid(probe)) or probe is not self._probe:
            return
        out = bytes(probe.readAll().data()).decode(errors="replace").strip().splitlines()
        last = out[-1] if out else ""
        if last.startswith("OK "):
            _, version, cuda = last.split()
            self._set_python_status(f"torch {version} · CUDA {'yes' if cuda == '1' else 'no'}",
                                    ok=True)
        elif last.startswith("NO"):
            self._set_python_status(f"{python} has no torch: install it with  {python} -m pip "
                                    "install torch", ok=False)
        else:
            self._set_python_status(f"{python} did not answer (exit {code})", ok=False)

    def _set_python_status(self, text: str, ok: bool | None) -> None:
        color = {True: "#2b8a3e", False: "#c92a2a", None: "#5c6670"}[ok]
        self.python_status.setStyleSheet(f"color: {color};")
        self.python_status.setText(text)

    # ------------------------------------------------------------------ result
    def accept(self) -> None:
        try:
            req = self._collect()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return
        self._request = req
        remembered = req.to_dict()
        self.settings.setValue(settings_key(req.script), json.dumps(remembered))
        self.settings.setValue("runs/last_script", req.script)
        self.settings.sync()
        self.sig_request_ready.emit(req)
        super().accept()

    def request(self) -> RunRequest | None:
        return self._request

    def done(self, result: int) -> None:
        self._stop_probe()
        super().done(result)


if __name__ == "__main__":
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])
    dialog = RunDialog(script=sys.argv[1] if len(sys.argv) > 1 else str(DEMO_SCRIPT))
    if dialog.exec() and (req := dialog.request()) is not None:  # accepted: a request is set
        print(json.dumps(req.to_dict(), indent=2))
