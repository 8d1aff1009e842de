"""The run view and its controller (gui/controllers/run.py): live figures from a real runner,
Stop ends the whole process tree (also when the script ignores SIGTERM), an interpreter that
cannot start, replay of a session folder."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import psutil
import pytest
from PySide6.QtCore import Qt
from scripts import training
from shots import save_shot

from stallscope.core.session.reader import open_session
from stallscope.gui import run_request
from stallscope.gui.controllers.run import RunController, new_run_view
from stallscope.gui.run_request import RunRequest
from stallscope.gui.views.run import RunView
from stallscope.gui.views.run_console import stderr_color

pytestmark = pytest.mark.runner  # QProcess runs of the runner

FOREVER = training(
    item_s=0.003, loader="num_workers=2, persistent_workers=True", forever=True,
    head="""
        import signal
        if "--ignore-term" in sys.argv:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    """,
    in_step='print("loss", round(loss.item(), 4), flush=True)')


def forever_request(tmp_path, *args) -> RunRequest:
    script = tmp_path / "forever.py"
    script.write_text(FOREVER)
    return RunRequest(script=str(script), args=list(args), session=str(tmp_path / "session"),
                      options={"stop_after_window": False})


def tree_of(run: RunController) -> list[psutil.Process]:
    assert run.handle is not None and run.handle.local_pid is not None
    return psutil.Process(run.handle.local_pid).children(recursive=True)


def bound_view(qtbot, grace_s: float | None = None) -> tuple[RunView, RunController]:
    view = RunView()
    qtbot.addWidget(view)
    run = RunController(view) if grace_s is None else RunController(view, grace_s=grace_s)
    view.bind(run)
    return view, run


def test_stop_ends_the_whole_process_tree(qtbot, tmp_path):
    # a grace a loaded machine cannot outlast: the runner ends on SIGTERM by itself (at 5 s, a
    # load of 14 on 2 cores had it SIGKILLed after it wrote its record: -9); the SIGKILL path is
    # the next test's
    view, run = bound_view(qtbot, grace_s=60)
    view.resize(1100, 760)
    view.show()
    run.start(forever_request(tmp_path))
    assert view.stop_button.isEnabled() and view.title.text() == "forever.py"
    qtbot.waitUntil(lambda: run.series.n >= 4, timeout=60_000)
    assert "loss" in view.console.toPlainText()  # stdout reaches the console live
    assert view.figures.text().startswith(f"step {view.steps - 1}") and view.steps >= 4
    tree = tree_of(run)
    assert len(tree) >= 2, "two DataLoader workers should be running"
    assert run.series["wall_ms"].min() > 0 and np.all(run.series["data_wait_ms"] >= 0)
    save_shot(view, "run_view_live")
    with qtbot.waitSignal(run.sig_run_finished, timeout=30_000) as done:
        view.stop_button.click()
        assert not view.stop_button.isEnabled() and not run.stoppable  # one Stop at a time
    assert done.args == [143]  # the runner ended on SIGTERM and said so
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"left behind: {alive}"
    fin = open_session(run.session).finished
    assert fin["reason"] == "stopped by SIGTERM" and fin["rc"] == 143
    assert run.finished_record["reason"] == "stopped by SIGTERM"
    assert "Finished: stopped by SIGTERM" in view.status.text()
    assert (run.session / "stdout.log").read_text().count("loss") >= 4


def test_stop_kills_a_script_that_ignores_sigterm(qtbot, tmp_path):
    view, run = bound_view(qtbot, grace_s=1.5)
    run.start(forever_request(tmp_path, "--ignore-term"))
    qtbot.waitUntil(lambda: run.series.n >= 2, timeout=60_000)
    tree = tree_of(run)
    with qtbot.waitSignal(run.sig_run_finished, timeout=30_000) as done:
        run.stop()
    # the launcher's one stop rule: SIGKILL after the grace; it writes the record the runner
    # could not (the reason and writer are the launcher's, as for the CLI and tune)
    assert done.args == [-9]
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive
    assert "Finished: stopped by the user" in view.status.text()
    fin = open_session(run.session).finished
    assert fin["reason"] == "stopped by the user" and fin["written_by"] == "stallscope launcher"


def test_interpreter_that_cannot_start(qtbot, tmp_path):
    view, run = bound_view(qtbot)
    req = forever_request(tmp_path)
    req.python = str(tmp_path / "no" / "python")
    with qtbot.waitSignal(run.sig_run_finished, timeout=10_000) as done:
        run.start(req)
    assert done.args == [-1]
    assert f"cannot start the interpreter {req.python}" in view.console.toPlainText()
    assert "cannot start the interpreter" in open_session(run.session).finished["reason"]
    assert not view.stop_button.isEnabled() and run.exit_code == -1


def test_chart_before_the_first_step_is_a_plain_frame(qtbot):
    """No "ms (x0.001)" from -400 to 400, no "-0" step tick: steps 0..10, 0..100 ms."""
    view = new_run_view()
    qtbot.addWidget(view)
    assert view.controller.parent() is view  # the view's run ends with it
    view.resize(900, 600)
    view.show()
    qtbot.waitExposed(view)
    (x0, x1), (y0, y1) = view.charts.step_plot.viewRange()
    assert (x0, x1, y0, y1) == (-0.5, 10.5, 0.0, 100.0)
    assert ">ms </span>" in view.charts.step_plot.getAxis("left").labelString()  # no "(x0.001)"
    assert "x0.001" not in view.charts.step_plot.getAxis("bottom").labelString()
    ticks = [v for _, values in view.charts.step_plot.getAxis("bottom").tickValues(x0, x1, 800)
             for v in values]
    assert ticks and min(ticks) >= 0 and all(float(v).is_integer() for v in ticks)
    assert not view.charts.step_curve.isVisible()
    save_shot(view, "run_view_empty")


def test_replay_a_session_folder(qtbot, tmp_path):
    session = tmp_path / "s"
    (session / "traces").mkdir(parents=True)
    (session / "traces" / "t.pt.trace.json.gz").write_bytes(b"")
    (session / "run.json").write_text(json.dumps({"script": "/x/train.py",
                                                  "args": ["--a", "<b>x</b>"]}))
    lines = [{"event": "started", "t": 1, "torch": "2.3", "devices": ["H100"],
              "overrides": ["num_workers=4"]}]
    for n in range(8):
        lines.append({"event": "step", "t": 2 + n, "n": n, "wall_ms": 100.0 + n,
                      "data_wait_ms": 60.0, "rss": 200 * 2**20, "cuda_allocated": 2**30,
                      "cuda_reserved": 2**31, "phase": "active" if 2 <= n < 6 else "wait"})
    lines += [{"event": "trace_ready", "t": 11, "path": "traces/t.pt.trace.json.gz"},
              {"event": "finished", "t": 12, "rc": 0, "reason": "stopped after profiling window",
               "steps": 8}]
    (session / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (session / "stdout.log").write_text("epoch 0 step 0\n")
    view, run = bound_view(qtbot)
    traces, opened = [], []
    run.sig_trace_ready.connect(traces.append)
    view.sig_open_trace.connect(opened.append)
    run.replay(session)
    assert run.series.n == 8 and run.series.active == [2, 3, 4, 5] and view.steps == 8
    assert view.charts.window_region.getRegion() == (1.5, 5.5)
    assert traces == [str(session / "traces" / "t.pt.trace.json.gz")]
    view.open_button.click()  # Open trace: the newest one
    assert opened == traces
    assert view.title.text() == "train.py --a <b>x</b>"  # shown as typed, never as markup
    assert all(label.textFormat() == Qt.TextFormat.PlainText
               for label in (view.title, view.status, view.figures, view.session_label))
    assert "Finished: stopped after profiling window · 8 steps" in view.status.text()
    assert view.status.styleSheet() == ""  # a clean end: no warning colour
    # The run view states the session's one steady statistic (as compare and tune do).
    _, want = open_session(session).steady()
    assert f"{want.step_ms:.1f} ms per step" in view.figures.text()
    assert "not steady yet" in view.figures.text()  # 8 steps: too short to be steady
    assert "CUDA allocated" in view.charts.mem_plot.titleLabel.text
    assert view.charts.step_curve.isVisible() and all(view.charts.step_plot.vb.state["autoRange"])
    assert view.console.toPlainText() == "epoch 0 step 0\n"
    x, y = view.charts.alloc_curve.getData()
    assert np.allclose(y, 1024.0)


def test_main_window_run_demo(qtbot, tmp_path, monkeypatch):
    """What `stallscope --demo` does: the demo runs and its trace opens."""
    from stallscope.gui.main_window import MainWindow

    original = run_request.demo_request

    def demo_here():
        req = original()
        req.session_root = str(tmp_path / "sessions")
        req.args = ["--images", "96"]
        return req

    monkeypatch.setattr(run_request, "demo_request", demo_here)
    window = MainWindow()
    qtbot.addWidget(window)
    shown = []
    window.sig_document_shown.connect(shown.append)
    window.run_demo()
    view = window.tabs.currentWidget()
    assert isinstance(view, RunView)
    run = view.controller
    qtbot.waitUntil(lambda: bool(shown), timeout=120_000)
    assert shown[0].path.parent.parent.parent == tmp_path / "sessions"
    qtbot.waitUntil(lambda: run.exit_code is not None, timeout=60_000)
    assert run.exit_code == 0
    assert sys.executable == run.request.python


def test_main_window_replays_an_opened_session(qtbot, tmp_path):
    from stallscope.gui.main_window import MainWindow

    session = tmp_path / "s"
    session.mkdir()
    (session / "events.jsonl").write_text(
        json.dumps({"event": "step", "t": 1, "n": 0, "wall_ms": 9.0, "data_wait_ms": 4.0}) + "\n"
        + json.dumps({"event": "finished", "t": 2, "rc": 3, "reason": "exited with code 3"})
        + "\n")
    window = MainWindow()
    qtbot.addWidget(window)
    window.replay_session(str(tmp_path))  # not a session: nothing happens
    assert window.tabs.count() == 1
    window.replay_session(str(session))
    view = window.tabs.currentWidget()
    assert isinstance(view, RunView) and window.tabs.tabText(window.tabs.currentIndex()) == "Run: s"
    assert view.controller.series.n == 1 and "exited with code 3" in view.status.text()
    assert stderr_color() in view.status.styleSheet()  # a failed run's status reads as one


def test_a_view_deleted_without_closing_still_ends_its_run(qtbot, tmp_path):
    """The launcher's runner leads a session of its own: nothing kills it when the app's
    objects go away, so the controller ends it when its view is destroyed, even without the
    close or DeferredDelete event the view reports (as QProcess's destructor did)."""
    from shiboken6 import delete

    from stallscope.core.session.reader import has_finished

    view = new_run_view()
    run = view.controller
    run.start(forever_request(tmp_path))
    qtbot.waitUntil(lambda: run.series.n >= 2, timeout=60_000)
    tree = tree_of(run) + [psutil.Process(run.handle.local_pid)]
    session = run.session
    delete(view)  # the C++ object at once: no closeEvent, no DeferredDelete
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive
    assert has_finished(session)


def test_closing_a_running_tab_ends_the_run(qtbot, tmp_path):
    from stallscope.core.session.reader import has_finished
    from stallscope.gui.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.show_run(forever_request(tmp_path))
    view = window.tabs.currentWidget()  # the run's tab (a trace it writes may open in front)
    run = view.controller
    run.grace_s = 60  # as in test_stop_ends_the_whole_process_tree: SIGTERM, not a load-timed kill
    qtbot.waitUntil(lambda: run.series.n >= 2, timeout=60_000)
    tree = tree_of(run) + [psutil.Process(run.handle.local_pid)]
    session = run.session
    window.close_tab(window.tabs.indexOf(view))  # the view stops its run before it goes
    assert has_finished(session)
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive
    assert open_session(session).finished["reason"] == "stopped by SIGTERM"
