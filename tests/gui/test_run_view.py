"""The run view: live figures from a real runner, Stop ends the whole process tree (also when the
script ignores SIGTERM), an interpreter that cannot start, replay of a session folder."""

from __future__ import annotations

import json
import os
import sys
import textwrap

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import psutil
from shots import save_shot

from stallscope.core.session.reader import open_session
from stallscope.gui.dialogs.run import RunRequest
from stallscope.gui.views import run as run_view
from stallscope.gui.views.run import RunView

FOREVER = """
import signal, sys, time, torch
from torch.utils.data import DataLoader, Dataset
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

class Slow(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(8), torch.randn(1)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Slow(), batch_size=8, num_workers=2, persistent_workers=True)
while True:
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("loss", round(loss.item(), 4), flush=True)
"""


def forever_request(tmp_path, *args) -> RunRequest:
    script = tmp_path / "forever.py"
    script.write_text(textwrap.dedent(FOREVER))
    return RunRequest(script=str(script), args=list(args), session=str(tmp_path / "session"),
                      options={"stop_after_window": False})


def tree_of(view: RunView) -> list[psutil.Process]:
    return psutil.Process(int(view.process.processId())).children(recursive=True)


def test_stop_ends_the_whole_process_tree(qtbot, tmp_path):
    view = RunView()
    qtbot.addWidget(view)
    view.resize(1100, 760)
    view.show()
    view.start(forever_request(tmp_path))
    qtbot.waitUntil(lambda: view.series.n >= 4, timeout=60_000)
    assert "loss" in view.console.toPlainText()  # stdout reaches the console live
    tree = tree_of(view)
    assert len(tree) >= 2, "two DataLoader workers should be running"
    assert view.series["wall_ms"].min() > 0 and np.all(view.series["data_wait_ms"] >= 0)
    save_shot(view, "run_view_live")
    with qtbot.waitSignal(view.sig_run_finished, timeout=30_000) as done:
        view.stop_button.click()
    assert done.args == [143]  # the runner ended on SIGTERM and said so
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"left behind: {alive}"
    fin = open_session(view.session).finished
    assert fin["reason"] == "stopped by SIGTERM" and fin["rc"] == 143
    assert "Finished: stopped by SIGTERM" in view.status.text()
    assert (view.session / "stdout.log").read_text().count("loss") >= 4


def test_stop_kills_a_script_that_ignores_sigterm(qtbot, tmp_path):
    view = RunView()
    qtbot.addWidget(view)
    view._kill_timer.setInterval(1500)
    view.start(forever_request(tmp_path, "--ignore-term"))
    qtbot.waitUntil(lambda: view.series.n >= 2, timeout=60_000)
    tree = tree_of(view)
    with qtbot.waitSignal(view.sig_run_finished, timeout=30_000) as done:
        view.stop()
    assert done.args == [-1]
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive
    fin = open_session(view.session).finished
    assert fin["reason"] == "stopped by the app" and fin["written_by"] == "stallscope app"


def test_interpreter_that_cannot_start(qtbot, tmp_path):
    view = RunView()
    qtbot.addWidget(view)
    req = forever_request(tmp_path)
    req.python = str(tmp_path / "no" / "python")
    with qtbot.waitSignal(view.sig_run_finished, timeout=10_000) as done:
        view.start(req)
    assert done.args == [-1]
    assert f"cannot start the interpreter {req.python}" in view.console.toPlainText()
    assert "cannot start the interpreter" in open_session(view.session).finished["reason"]


def test_chart_before_the_first_step_is_a_plain_frame(qtbot):
    """No "ms (x0.001)" from -400 to 400, no "-0" step tick: steps 0..10, 0..100 ms."""
    view = RunView()
    qtbot.addWidget(view)
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
    (session / "run.json").write_text(json.dumps({"script": "/x/train.py", "args": ["--a"]}))
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
    view = RunView()
    qtbot.addWidget(view)
    traces = []
    view.sig_trace_ready.connect(traces.append)
    view.replay(session)
    assert view.series.n == 8 and view.series.active == [2, 3, 4, 5]
    assert view.charts.window_region.getRegion() == (1.5, 5.5)
    assert traces == [str(session / "traces" / "t.pt.trace.json.gz")]
    assert view.title.text() == "train.py --a"
    assert "Finished: stopped after profiling window · 8 steps" in view.status.text()
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

    original = run_view.demo_request

    def demo_here():
        req = original()
        req.session_root = str(tmp_path / "sessions")
        req.args = ["--images", "96"]
        return req

    monkeypatch.setattr(run_view, "demo_request", demo_here)
    window = MainWindow()
    qtbot.addWidget(window)
    shown = []
    window.sig_document_shown.connect(shown.append)
    window.run_demo()
    view = window.tabs.currentWidget()
    assert isinstance(view, RunView)
    qtbot.waitUntil(lambda: bool(shown), timeout=120_000)
    assert shown[0].path.parent.parent.parent == tmp_path / "sessions"
    qtbot.waitUntil(lambda: view.exit_code is not None, timeout=60_000)
    assert view.exit_code == 0
    assert sys.executable == view.request.python


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
    assert view.series.n == 1 and "exited with code 3" in view.status.text()


def test_closing_a_running_tab_ends_the_run(qtbot, tmp_path):
    from stallscope.core.session.reader import has_finished
    from stallscope.gui.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.show_run(forever_request(tmp_path))
    view = window.tabs.currentWidget()
    qtbot.waitUntil(lambda: view.series.n >= 2, timeout=60_000)
    tree = tree_of(view) + [psutil.Process(int(view.process.processId()))]
    session = view.session
    window._close_tab(window.tabs.indexOf(view))  # deleteLater: the view stops its run first
    qtbot.waitUntil(lambda: has_finished(session), timeout=20_000)
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive
    assert open_session(session).finished["reason"] == "stopped by SIGTERM"
