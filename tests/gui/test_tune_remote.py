"""The tune dialog on a remote host: Where "A remote host (SSH)" runs the trials over a real
OpenSSH server on 127.0.0.1 (tests/sshd.py, never a mock of ssh), as `tune --host` does. The
"host" is this machine, so the test can read the trials' mirrored sessions and see where they
ran. Two short trials (the script as written, then one worker) keep it short."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from scripts import training
from shots import save_shot

from stallscope.core.tune import load_result
from stallscope.gui.controllers.tune import tune_dialog

pytestmark = pytest.mark.runner  # runners under ssh

WAIT_MS = 300_000  # a loaded 2-core machine: ssh, deploy, torch import, two trials


def test_the_tune_dialog_tunes_on_a_host(qtbot, server, tmp_path, monkeypatch):
    # STALLSCOPE_SSH_CONFIG gives ssh the test host's config, as for the CLI
    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.config))
    script = tmp_path / "train.py"  # the host's path (the host is this machine)
    script.write_text(training(items=400, item_s=0.0075, dim=4, batch=8, loader="",
                               step_s=0.04))
    dialog = tune_dialog(str(script), host=server.alias, python=sys.executable,
                         out=str(tmp_path / "tune"), max_workers=2, max_trials=2,
                         remote_cache=str(tmp_path / "cache"))
    qtbot.addWidget(dialog)
    dialog.show()
    rows = dialog.host_rows
    # Where: the host, preselected with its interpreter; the rows say what the CLI says
    assert dialog.where.is_remote and rows.host() == server.alias
    assert rows.script_edit.text() == str(script) and rows.python() == sys.executable
    assert rows.host_combo.isVisible() and rows.folder_row.isVisible()
    assert "no memory guard" in rows.hint.text() and "worker-CPU hint" in rows.hint.text()
    assert dialog.windowTitle() == f"Tune the DataLoader: train.py on {server.alias}"
    # the host's interpreter is asked for torch over ssh, as the Run dialog asks it
    qtbot.waitUntil(lambda: rows.python_status.text().startswith("torch "), timeout=WAIT_MS)
    assert rows.python_status.text().endswith(f" on {server.alias}")

    with qtbot.waitSignal(dialog.sig_tune_ended, timeout=WAIT_MS) as ended:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
        assert dialog.is_running and not dialog.where.isEnabled()
        assert dialog.status.text().startswith(
            f"Trial 1 runs the script as written on {server.alias}…")
    assert ended.args == ["done"], dialog.status.text()
    # the result says where it ran, and the trials' sessions were run there
    assert dialog.status.text().startswith(f"Done: 2 trials on {server.alias} in ")
    result = load_result(tmp_path / "tune")
    assert [t.label for t in result.trials] == ["as written", "num_workers=1"]
    assert all(t.ok for t in result.trials), [(t.status, t.message) for t in result.trials]
    for trial in result.trials:
        run = json.loads((Path(trial.session) / "run.json").read_text())
        assert run["remote"]["host"] == server.alias
        assert run["remote"]["session"].startswith(str(tmp_path / "cache"))
    # memory is not sampled on a host: no peak RSS
    assert [dialog.table.item(r, 4).text() for r in range(2)] == ["-", "-"]
    assert dialog.where.isEnabled() and dialog.start_button.text() == "Run again"
    # the host is remembered with its interpreter, for the next tune and the Run dialog
    assert dialog.memory.hosts()[0] == server.alias
    assert dialog.memory.pythons(server.alias)[0] == sys.executable
    save_shot(dialog, "tune_dialog_remote_done")


def test_a_remote_tune_without_a_script_says_so_and_runs_nothing(qtbot, tmp_path):
    dialog = tune_dialog(str(tmp_path / "train.py"), out=str(tmp_path / "tune"))
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.where.is_remote and not dialog.host_rows.host_combo.isVisible()
    dialog.where.set_remote(True)  # the local path is offered as the host's
    assert dialog.host_rows.script_edit.text() == str((tmp_path / "train.py").resolve())
    dialog.host_rows.host_combo.setCurrentText("-oProxyCommand=x")
    dialog.start()
    assert dialog.state == "idle" and "not a host name" in dialog.status.text()
    dialog.host_rows.host_combo.setCurrentText("gpu-box")
    dialog.host_rows.script_edit.setText("  ")
    dialog.start()
    assert dialog.status.text() == "type the script's path on gpu-box"
    assert not (tmp_path / "tune").exists()
    dialog.close()
