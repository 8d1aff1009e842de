"""The Run dialog: fields -> RunRequest, remembered per script, the interpreter probe, and the
whole path from clicking Run on the demo to its trace open in the main window."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QSettings, Qt
from shots import save_shot

from stallscope.core.launch.local import runner_command
from stallscope.gui.dialogs.run import DEMO_SCRIPT, RunDialog, RunRequest, parse_env
from stallscope.gui.views import run as run_view


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "runs.ini"), QSettings.Format.IniFormat)


def script(tmp_path, name: str) -> Path:
    path = tmp_path / name
    path.write_text("print('hi')\n")
    return path


@pytest.mark.runner  # the local interpreter is probed for torch (a child process)
def test_request_from_fields_and_remembered_per_script(qtbot, tmp_path, settings):
    a, b = script(tmp_path, "a.py"), script(tmp_path, "b.py")
    dialog = RunDialog(settings=settings, script=str(a))
    qtbot.addWidget(dialog)
    dialog.args_edit.setText("--lr 0.1 --name 'two words'")
    dialog.env_edit.setPlainText("CUDA_VISIBLE_DEVICES=1\n# a comment\nOMP_NUM_THREADS=2")
    dialog.spins["active"].setValue(3)
    dialog.checks["profile_memory"].setChecked(False)
    dialog.checks["stop_after_window"].setChecked(False)
    dialog.lineprof_combo.setCurrentText("auto")
    dialog.sets_edit.setText("num_workers=4  a.py:7:pin_memory=true")
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    req = dialog.request()
    assert dialog.result() == RunDialog.DialogCode.Accepted
    assert req.script == str(a.resolve()) and req.args == ["--lr", "0.1", "--name", "two words"]
    assert req.env == {"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "2"}
    assert req.schedule == {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}
    assert req.options["profile_memory"] is False and req.options["lineprof"] == "auto"
    assert req.python == sys.executable

    where = req.where()  # what the launcher runs: this computer, the script's folder
    assert not where.remote and where.cwd == str(tmp_path) and where.python == sys.executable
    program, *arguments = runner_command(where.python, req.job(tmp_path / "s"))
    assert program == sys.executable and arguments[0].endswith("core/capture/runner.py")
    assert "--no-profile-memory" in arguments and "--no-stop-after-window" in arguments
    assert "--process-group" in arguments  # so Stop can end the whole tree
    assert req.options["sets"] == ["num_workers=4", "a.py:7:pin_memory=true"]
    i = arguments.index("--set")
    assert arguments[i:i + 4] == ["--set", "num_workers=4", "--set", "a.py:7:pin_memory=true"]
    assert arguments[-5:] == [str(a.resolve()), "--lr", "0.1", "--name", "two words"]

    again = RunDialog(settings=settings)  # the last script comes back with its settings
    qtbot.addWidget(again)
    assert again.script_edit.text() == str(a.resolve())
    assert again.spins["active"].value() == 3 and not again.checks["profile_memory"].isChecked()
    assert again.sets_edit.text() == "num_workers=4 a.py:7:pin_memory=true"
    assert "OMP_NUM_THREADS=2" in again.env_edit.toPlainText()
    again.script_edit.setText(str(b))
    again.script_edit.editingFinished.emit()
    # b was never run: its own fields are the defaults, a's are not carried over
    again.set_request(RunRequest(script=str(b)))
    assert again.spins["active"].value() == 4 and again.checks["profile_memory"].isChecked()


@pytest.mark.runner  # the local interpreter is probed for torch (a child process)
def test_bad_input_keeps_the_dialog_open(qtbot, tmp_path, settings):
    dialog = RunDialog(settings=settings, script=str(tmp_path / "missing.py"))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.accept()
    assert dialog.isVisible() and "missing.py: no such script" in dialog.error_label.text()
    dialog.script_edit.setText(str(script(tmp_path, "ok.py")))
    dialog.env_edit.setPlainText("JUSTANAME")
    dialog.accept()
    assert dialog.isVisible() and "environment line 1" in dialog.error_label.text()
    dialog.env_edit.setPlainText("")
    dialog.python_combo.setCurrentText(str(tmp_path / "nope" / "python"))
    dialog.accept()
    assert dialog.isVisible() and "no such Python interpreter" in dialog.error_label.text()
    dialog.python_combo.setCurrentText(sys.executable)
    dialog.sets_edit.setText("num_workers=0 prefetch_factor=4")
    dialog.accept()
    assert dialog.isVisible() and dialog.error_label.text() == (
        "DataLoader: --set prefetch_factor=4: prefetch_factor needs worker processes, but "
        "--set num_workers=0 asks for none")
    assert dialog.request() is None


@pytest.mark.runner  # the local interpreter is probed when the dialog goes back to local
def test_remote_where_is_remembered_per_host(qtbot, tmp_path, settings, monkeypatch):
    """Where: a remote host's script, folder and interpreter are typed text, remembered per
    host, and the dialog opens again on the last host with them."""
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/.ssh/config: the hosts offered
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        "Host gpu-box lab\n  HostName 10.0.0.7\nHost *.corp !x\nHost=cloud # a comment\n")
    local = script(tmp_path, "local.py")
    dialog = RunDialog(settings=settings, script=str(local))
    qtbot.addWidget(dialog)
    dialog.resize(720, 480)
    dialog.show()
    assert not dialog.host_combo.isVisible() and dialog.script_row.button.isVisible()
    dialog.where.remote.click()
    assert dialog.host_combo.isVisible() and not dialog.script_row.button.isVisible()
    assert not dialog.cwd_row.button.isVisible() and not dialog.python_row.button.isVisible()
    hosts = [dialog.host_combo.itemText(i) for i in range(dialog.host_combo.count())]
    assert hosts == ["gpu-box", "lab", "cloud"]  # the config's aliases, no patterns
    assert dialog.python_combo.currentText() == "python3"  # a new host: the remote default
    dialog.host_combo.setCurrentText("gpu-box")
    dialog.script_edit.setText("~/proj/train.py")  # the host's path: never checked here
    dialog.cwd_edit.setText("~/proj")
    dialog.python_combo.setCurrentText("~/envs/cuda/bin/python")
    dialog.args_edit.setText("--name 'a b' '$(touch x)'")
    dialog.spins["active"].setValue(2)
    save_shot(dialog, "run_dialog_remote")
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    req = dialog.request()
    assert dialog.result() == RunDialog.DialogCode.Accepted
    assert (req.host, req.script, req.cwd, req.python) == (
        "gpu-box", "~/proj/train.py", "~/proj", "~/envs/cuda/bin/python")
    assert req.is_remote and req.args == ["--name", "a b", "$(touch x)"]

    again = RunDialog(settings=settings)  # opens on the last host, its fields back
    qtbot.addWidget(again)
    assert again.where.is_remote and again.host_combo.currentText() == "gpu-box"
    assert again.script_edit.text() == "~/proj/train.py" and again.cwd_edit.text() == "~/proj"
    assert again.python_combo.currentText() == "~/envs/cuda/bin/python"
    assert again.args_edit.text() == "--name 'a b' '$(touch x)'"
    assert again.spins["active"].value() == 2
    assert again.host_combo.itemText(0) == "gpu-box"  # the hosts used before come first
    again.host_combo.setCurrentText("lab")  # another host: its own (empty) memory
    again.host_combo.lineEdit().editingFinished.emit()
    assert again.script_edit.text() == "" and again.cwd_edit.text() == ""
    assert again.python_combo.currentText() == "python3"
    again.script_edit.setText("~/other.py")
    again.host_combo.lineEdit().editingFinished.emit()  # the same host: what was typed stays
    assert again.script_edit.text() == "~/other.py"
    again.host_combo.setCurrentText("gpu-box")
    again.host_combo.lineEdit().editingFinished.emit()
    assert again.script_edit.text() == "~/proj/train.py"
    again.where.local.click()  # back to this computer: no local run yet, an empty script
    assert again.script_edit.text() == "" and again.python_combo.currentText() == sys.executable
    dialog.where.local.click()  # the first dialog: the local script it had comes back
    assert dialog.script_edit.text() == str(local) and not dialog.host_combo.isVisible()


@pytest.mark.runner  # the local interpreter is probed before the switch to remote
def test_remote_bad_input_keeps_the_dialog_open(qtbot, tmp_path, settings):
    dialog = RunDialog(settings=settings, script=str(script(tmp_path, "a.py")))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.where.remote.click()
    dialog.host_combo.setCurrentText("-oProxyCommand=touch /tmp/x")  # an ssh option, not a host
    dialog.script_edit.setText("train.py")
    dialog.accept()
    assert dialog.isVisible() and "not a host name" in dialog.error_label.text()
    dialog.host_combo.setCurrentText("gpu-box")
    dialog.script_edit.setText("")
    dialog.accept()
    assert dialog.isVisible() and dialog.error_label.text() == (
        "type the script's path on gpu-box")
    assert dialog.request() is None


def test_demo_sessions_go_to_one_stallscope_folder():
    from PySide6.QtCore import QStandardPaths

    from stallscope.gui.dialogs.run import demo_request

    root = Path(demo_request().session_root)
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    assert root == Path(data) / "stallscope" / "sessions"
    assert "stallscope/stallscope" not in root.as_posix()
    with pytest.raises(ValueError):
        parse_env("A B=1")


@pytest.mark.runner  # the interpreter is asked for torch in a child process
def test_interpreter_probe_names_torch_or_its_absence(qtbot, tmp_path, settings):
    dialog = RunDialog(settings=settings, script=str(script(tmp_path, "t.py")))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.python_status.text().startswith("torch "), timeout=60_000)
    assert "CUDA" in dialog.python_status.text()

    # the same interpreter without site-packages: no torch there
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    no_torch.chmod(no_torch.stat().st_mode | stat.S_IXUSR)
    dialog.python_combo.setCurrentText(str(no_torch))
    qtbot.waitUntil(lambda: "has no torch" in dialog.python_status.text(), timeout=60_000)
    assert f"{no_torch} -m pip install torch" in dialog.python_status.text()


@pytest.mark.runner  # the demo runs under the runner (QProcess)
def test_run_dialog_launches_demo_and_the_trace_opens(qtbot, tmp_path, settings, monkeypatch):
    from stallscope.gui.main_window import MainWindow

    dialog = RunDialog(settings=settings, script=str(DEMO_SCRIPT))
    qtbot.addWidget(dialog)
    dialog.resize(720, 480)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.python_status.text().startswith("torch "), timeout=60_000)
    save_shot(dialog, "run_dialog")
    dialog.args_edit.setText("--images 96")
    dialog.session_edit.setText(str(tmp_path / "demo-session"))
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    request = dialog.request()
    assert request is not None and request.script == str(DEMO_SCRIPT)

    window = MainWindow()
    qtbot.addWidget(window)
    window.resize(1300, 850)
    window.show()
    shown = []
    window.sig_document_shown.connect(shown.append)
    window.show_run(request)
    view = window.tabs.currentWidget()
    assert isinstance(view, run_view.RunView)
    assert window.tabs.tabText(window.tabs.currentIndex()) == "Run: train_demo.py"
    run = view.controller
    with qtbot.waitSignal(run.sig_trace_ready, timeout=120_000) as ready:
        pass
    trace = Path(ready.args[0])
    assert trace.parent == tmp_path / "demo-session" / "traces" and trace.is_file()
    qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    assert shown[0].path == trace
    assert "dataloader_bound" in [a.id for a in window.analysis.report.advice]
    qtbot.waitUntil(lambda: run.exit_code is not None, timeout=60_000)
    assert run.exit_code == 0 and run.finished_record["reason"].startswith("stopped after")
    save_shot(window, "run_main_window_trace")
    window.tabs.setCurrentWidget(view)
    save_shot(view, "run_view_finished")


def test_attach_dialog_takes_host_and_folder_or_host_colon_folder(qtbot, tmp_path, settings):
    from stallscope.gui.dialogs.attach import AttachDialog
    from stallscope.gui.dialogs.run_where import HostMemory

    HostMemory(settings).remember("gpu-box", "~/envs/cuda/bin/python", "~/proj", "train.py")
    dialog = AttachDialog(settings=settings)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.host_combo.currentText() == "gpu-box"  # the last host, its interpreter
    assert dialog.python_combo.currentText() == "~/envs/cuda/bin/python"
    save_shot(dialog, "attach_dialog")
    dialog.accept()
    assert dialog.isVisible() and dialog.error_label.text() == (
        "give the run's session folder on gpu-box")
    dialog.folder_edit.setText("lab:/home/me/.cache/stallscope/sessions/train-1")  # as printed
    dialog.accept()
    assert not dialog.isVisible()
    assert dialog.target() == ("lab", "/home/me/.cache/stallscope/sessions/train-1",
                               "~/envs/cuda/bin/python")
    again = AttachDialog(settings=settings)
    qtbot.addWidget(again)
    again.host_combo.setCurrentText("-oProxyCommand=x")
    again.folder_edit.setText("/s")
    again.accept()
    assert "not a host name" in again.error_label.text() and again.target() is None


def test_run_menu_attaches_to_a_remote_run(qtbot):
    from stallscope.gui.main_window import MainWindow

    window = MainWindow(persist=False)
    qtbot.addWidget(window)
    attach = window.actions_by_name["Attach to remote run"]
    run_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    assert attach in run_menu.actions() and attach.statusTip().startswith("Follow a run on")
