"""Where "A remote host": the Run and the Tune dialog show the same host rows (run_where.HostForm)
and they behave the same: the hosts remembered (the newest first, each with its script, folder
and interpreters), the host's interpreter asked for torch over a real OpenSSH server on
127.0.0.1 (tests/sshd.py, never a mock of ssh), and a wrong host said in the same words, under
the rows and when Run or Start is pressed."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import sys

import pytest
from PySide6.QtCore import QSettings
from shots import save_shot

from stallscope.gui.controllers.tune import tune_dialog
from stallscope.gui.dialogs.run import RunDialog
from stallscope.gui.dialogs.run_where import HostForm, HostMemory

pytestmark = pytest.mark.runner  # ssh to the test host

WAIT_MS = 120_000  # a loaded 2-core machine: ssh, torch import there


def open_run(settings: QSettings, tmp_path):
    dialog = RunDialog(settings=settings, script=str(tmp_path / "local.py"))
    return dialog, dialog.error_label, dialog.accept


def open_tune(settings: QSettings, tmp_path):
    dialog = tune_dialog(str(tmp_path / "local.py"), settings=settings,
                         out=str(tmp_path / "tune"))
    return dialog, dialog.status, dialog.start


def observed(qtbot, opener, settings, tmp_path, server) -> list:
    """What a user meets in a dialog's host rows, step by step."""
    dialog, error, press = opener(settings, tmp_path)
    qtbot.addWidget(dialog)
    dialog.resize(760, 640)
    dialog.show()
    rows: HostForm = dialog.host_rows
    seen: list = [rows.host_combo.isVisible()]
    dialog.where.remote.click()
    assert rows.host_combo.isVisible() and rows.folder_row.isVisible()
    offered = [rows.host_combo.itemText(i) for i in range(rows.host_combo.count())]
    seen += [offered[:2], rows.host(), rows.script_edit.text(), rows.cwd_edit.text(),
             rows.python()]  # the newest host, its fields back
    rows.host_combo.setCurrentText(server.alias)
    rows.host_combo.lineEdit().editingFinished.emit()  # another host: its own fields
    seen += [rows.script_edit.text(), rows.cwd_edit.text(), rows.python()]
    qtbot.waitUntil(lambda: rows.python_status.text().startswith("torch "), timeout=WAIT_MS)
    seen.append(rows.python_status.text().rsplit(" on ", 1)[1])
    save_shot(dialog, f"host_rows_{type(dialog).__name__}")
    rows.host_combo.setCurrentText("-oProxyCommand=touch x")  # an ssh option, not a host
    rows.host_combo.lineEdit().editingFinished.emit()
    seen.append(rows.python_status.text())
    press()
    seen.append(error.text())
    rows.host_combo.setCurrentText("lab")
    rows.host_combo.lineEdit().editingFinished.emit()
    rows.script_edit.setText("")
    press()
    seen.append(error.text())
    dialog.close()
    return seen


def test_the_run_and_tune_dialogs_host_rows_behave_the_same(qtbot, server, tmp_path,
                                                             monkeypatch):
    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.config))
    (tmp_path / "local.py").write_text("print('hi')\n")
    settings = QSettings(str(tmp_path / "runs.ini"), QSettings.Format.IniFormat)
    memory = HostMemory(settings)
    memory.remember(server.alias, sys.executable, str(tmp_path), str(tmp_path / "train.py"))
    memory.remember("lab", "~/envs/cuda/bin/python", "~/proj", "~/proj/train.py")

    run = observed(qtbot, open_run, settings, tmp_path, server)
    tune = observed(qtbot, open_tune, settings, tmp_path, server)
    assert run == tune
    assert run == [
        False,
        ["lab", server.alias], "lab", "~/proj/train.py", "~/proj", "~/envs/cuda/bin/python",
        str(tmp_path / "train.py"), str(tmp_path), sys.executable,
        server.alias,
        "remote host '-oProxyCommand=touch x': not a host name (no spaces, no leading '-')",
        "remote host '-oProxyCommand=touch x': not a host name (no spaces, no leading '-')",
        "type the script's path on lab",
    ]
