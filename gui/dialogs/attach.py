"""Run > Attach to remote run…: which run on which host to follow again (one started from
another app, the CLI, or a run whose tab was closed): the host, the session folder there (or
HOST:FOLDER as `stallscope-cli run --host` prints it) and the host's interpreter.

    dialog = AttachDialog(parent)
    if dialog.exec():
        host, remote_session, python = dialog.target()
"""

from __future__ import annotations

import re

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from stallscope.gui.dialogs.fields import error_label, refill
from stallscope.gui.dialogs.run_where import HostMemory, check_host, host_rows
from stallscope.gui.run_request import run_settings

HOST_AND_FOLDER = re.compile(r"^([^\s/:]+):(.+)$")  # gpu-box:/home/me/.cache/stallscope/...


def split_target(host: str, folder: str) -> tuple[str, str]:
    """(host, remote folder) from the two fields; the folder field may hold HOST:FOLDER.
    ValueError with one line when either is missing or the host is no host name."""
    folder = folder.strip()
    m = HOST_AND_FOLDER.match(folder)
    if m is not None:
        host, folder = m[1], m[2]
    host = check_host(host)
    if not folder:
        raise ValueError(f"give the run's session folder on {host}")
    return host, folder


class AttachDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Attach to a run on a remote host")
        self.setMinimumWidth(600)
        self.memory = HostMemory(settings or run_settings())
        form = QFormLayout()
        self.host_combo, _hint = host_rows(form, self.memory)
        self.host_combo.setCurrentText(next(iter(self.memory.hosts()), ""))
        self.host_combo.currentTextChanged.connect(self._host_changed)
        self.folder_edit = QLineEdit(placeholderText="~/.cache/stallscope/sessions/train-… "
                                                     "or HOST:FOLDER, as the run printed it")
        form.addRow("Session there", self.folder_edit)
        self.python_combo = QComboBox(editable=True)
        form.addRow("Python there", self.python_combo)
        self._host_changed()
        self.error_label = error_label()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Attach")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self._target: tuple[str, str, str] | None = None

    def _host_changed(self, _text: str = "") -> None:
        pythons = self.memory.pythons(self.host_combo.currentText().strip())
        refill(self.python_combo, [(p, p) for p in pythons])
        self.python_combo.setCurrentText(pythons[0])

    def accept(self) -> None:
        try:
            host, folder = split_target(self.host_combo.currentText(), self.folder_edit.text())
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return
        self._target = (host, folder, self.python_combo.currentText().strip() or "python3")
        super().accept()

    def target(self) -> tuple[str, str, str] | None:
        """(host, remote session folder, python) once accepted."""
        return self._target
