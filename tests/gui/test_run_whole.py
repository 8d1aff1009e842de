"""The run view's Whole run tab: a real session's epoch-start pauses drawn and named with their
saving, a profiled window that opens its trace when clicked, and a long record drawn decimated
and redrawn on zoom. Screenshots at 1024x700 and 1400x900 (saved with STALLSCOPE_SHOTS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from scripts import training
from shots import save_shot

from stallscope.core.capture import record as fmt
from stallscope.core.capture.options import sessions_root
from stallscope.core.capture.record import RunRecord
from stallscope.core.launch.local import runner_command
from stallscope.core.session.record import read_record
from stallscope.gui.controllers.run import new_run_view
from stallscope.gui.dialogs.run import RunDialog
from stallscope.gui.views.run_whole import MAX_POINTS, WholeRunPanel

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess, QProcess)

RUNNER = Path(fmt.__file__).resolve().with_name("runner.py")

EPOCHS = dict(items=32, loader="num_workers=2, worker_init_fn=slow_start", epochs=5, head="""
    def slow_start(worker_id):
        time.sleep(0.3)
""")


def run_session(tmp_path: Path, *options: str) -> Path:
    script = tmp_path / "epochs.py"
    script.write_text(training(**EPOCHS))
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session), *options,
                           "--", str(script)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    return session


def test_whole_run_tab_names_epoch_pauses_and_opens_a_window(qtbot, tmp_path):
    session = run_session(tmp_path, "--profile-at", "6", "--active", "2")
    view = new_run_view()
    qtbot.addWidget(view)
    view.resize(1024, 700)
    view.show()
    view.controller.replay(session)
    assert view.chart_tabs.currentWidget() is view.whole  # a run with stalls opens on it
    text = view.whole.stalls.text()
    assert "each epoch starts with a" in text
    assert "while 2 workers start: persistent_workers=True saves" in text and "x 4 epochs" in text
    assert view.whole.stalls.textFormat() == Qt.TextFormat.PlainText
    chart = view.whole.chart
    assert len(chart.epochs) == 5
    marks = chart.epoch_marks.getData()
    assert len(marks[0]) == 5 and min(marks[1]) > 250  # the marks sit on the pauses (ms)
    x, y = chart.mean_curve.getData()
    assert len(x) == 20 + 1  # every step, drawn as steps: one more edge than steps
    assert sorted(y, reverse=True)[3] > 250  # the later epochs' first steps stand out
    assert len(chart.regions) == 1
    region = chart.regions[0]
    assert region.getRegion() == (5.5, 7.5)
    save_shot(view, "run_whole_1024x700")
    view.resize(1400, 900)
    qtbot.wait(50)
    save_shot(view, "run_whole_1400x900")

    # a click inside the shaded window asks for its trace
    vb = chart.step_plot.getViewBox()
    scene_pos = vb.mapViewToScene(QPointF(6.5, 1.0))
    widget_pos = chart.mapFromScene(scene_pos)
    with qtbot.waitSignal(view.sig_open_trace, timeout=3000) as got:
        qtbot.mouseClick(chart.viewport(), Qt.MouseButton.LeftButton, pos=widget_pos)
    assert Path(got.args[0]).is_file() and got.args[0].endswith(".pt.trace.json.gz")

    # the same script with persistent workers: no epoch-start pause left to name
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    view.controller.replay(run_session(tuned, "--no-stop-after-window", "--set",
                                       "persistent_workers=true"))
    assert view.whole.report.steps == 20
    assert "each epoch starts" not in view.whole.stalls.text()


def test_a_long_record_is_drawn_decimated_and_redrawn_on_zoom(qtbot, tmp_path):
    path = tmp_path / "record.bin"
    rec = RunRecord(path)
    n = 2 * fmt.RECENT_MAX + 5000
    wall = 10 + 5 * np.sin(np.arange(n) / 3000.0)
    wall[12_345] = 500.0
    for i in range(n):
        rec.step({"wall_ms": float(wall[i]), "data_wait_ms": 1.0, "batches": 1})
    rec.close()
    back = read_record(path)
    panel = WholeRunPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 700)
    panel.show()
    panel.show_record(back)
    chart = panel.chart
    x, _ = chart.max_curve.getData()
    assert len(x) <= min(MAX_POINTS, chart.step_plot.width()) + 1
    _, top = chart.max_curve.getData()
    assert top.max() == 500.0  # the one slow step survives decimation (folded into a block)
    chart.step_plot.setXRange(n - 200, n, padding=0)
    qtbot.wait(20)
    x, y = chart.mean_curve.getData()
    assert x[0] >= n - 201 - 1 and len(x) > 150  # zoomed in: full resolution again
    np.testing.assert_allclose(y[1:50], wall[int(x[1] + 0.5):int(x[1] + 0.5) + 49], rtol=1e-5)


def test_run_dialog_windows_and_session_folder(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    dialog = RunDialog(script=str(script))
    qtbot.addWidget(dialog)
    assert str(sessions_root()) in dialog.session_edit.placeholderText()
    req = dialog._collect()
    assert req.session == "" and req.session_root == str(tmp_path / "data" / "stallscope" /
                                                         "sessions")
    assert req.new_session_dir().parent == tmp_path / "data" / "stallscope" / "sessions"
    for index, text, want, argv in ((1, "500", {"profile_every": 500}, ["--profile-every", "500"]),
                                    (2, "100, 5000", {"profile_at": [100, 5000]},
                                     ["--profile-at", "100,5000"]),
                                    (3, "", {"profile_epochs": True}, ["--profile-epochs"])):
        dialog.windows_combo.setCurrentIndex(index)
        dialog.windows_edit.setText(text)
        req = dialog._collect()
        assert {k: req.options[k] for k in want} == want
        args = runner_command(sys.executable, req.job(tmp_path / "s"))  # what the launcher runs
        assert args[args.index(argv[0]):args.index(argv[0]) + len(argv)] == argv
        assert not dialog.checks["stop_after_window"].isEnabled()
    dialog.windows_combo.setCurrentIndex(1)
    dialog.windows_edit.setText("soon")
    dialog.accept()
    assert "windows: every N steps needs a number" in dialog.error_label.text()


def test_whole_run_tab_follows_a_live_run(qtbot, tmp_path):
    from stallscope.gui.run_request import RunRequest

    script = tmp_path / "live.py"
    script.write_text(training(**{**EPOCHS, "epochs": 10**6}))
    view = new_run_view()
    qtbot.addWidget(view)
    view.resize(1024, 700)
    view.show()
    run = view.controller
    run.start(RunRequest(script=str(script), session=str(tmp_path / "session"),
                         options={"stop_after_window": False}))
    qtbot.waitUntil(lambda: view.whole.report is not None and view.whole.report.epochs >= 3,
                    timeout=90_000)
    assert view.whole.report.steps >= 8
    assert "each epoch starts with a" in view.whole.stalls.text()
    run.stop()
    qtbot.waitUntil(lambda: not run.is_running, timeout=30_000)
    assert run.end is not None  # (how Stop ends a run: tests/gui/test_run_view.py)


def test_the_small_plots_keep_their_room_and_name_only_what_the_run_has(qtbot, tmp_path):
    # hunt: the memory plot was 15 px high with its axis labels on each other, and the
    # legends named "torch.save" and "CUDA allocated" for a CPU-only run with no saves
    path = tmp_path / "record.bin"
    rec = RunRecord(path)
    for i in range(200):
        rec.step({"wall_ms": 70.0 + (i % 7), "data_wait_ms": 30.0, "batches": 1,
                  "rss": (300 + i // 20) * 2**20})
    rec.close()
    panel = WholeRunPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 650)
    panel.show()
    panel.show_record(read_record(path))
    chart = panel.chart
    qtbot.waitUntil(lambda: chart.height() >= chart.MEMORY_FROM)
    titles = chart.step_plot.titleLabel.text + chart.mem_plot.titleLabel.text
    assert "process RSS" in titles and "MB" in titles
    assert "torch.save" not in titles and "CUDA allocated" not in titles
    assert "epoch start" not in titles  # no epochs recorded either
    assert chart.mem_plot.isVisible() and chart.mem_plot.vb.height() >= 20
    assert chart.step_plot.vb.height() > chart.wait_plot.vb.height()
    save_shot(panel, "whole_run_small_plots_1400x650")
    panel.resize(1024, 330)  # short: the memory plot goes, the step time keeps its room
    qtbot.waitUntil(lambda: not chart.mem_plot.isVisible())
    assert chart.step_plot.vb.height() >= 50  # its least, 90, less its title
