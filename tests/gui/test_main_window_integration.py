"""Main-window integration: Run > Stop, the permanent status label, --screenshot leaves the
settings alone, the dark theme reaches the message strip and the timeline, the session's line
heatmap tab (also before/after and a missing line_profiler), the frozen app's interpreter."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from fixture_traces import fixture_path
from PySide6.QtGui import QColor, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog
from scripts import training
from shots import save_shot

from stallscope.core import lineprof, units
from stallscope.core.capture import runner
from stallscope.gui import app as app_module
from stallscope.gui import colors, theme
from stallscope.gui.dialogs import run as run_dialog
from stallscope.gui.dialogs.run import RunRequest
from stallscope.gui.main_window import MainWindow
from stallscope.resources import RESOURCES

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess, QProcess)

ROOT = Path(__file__).resolve().parents[2]
DEMO = RESOURCES / "demo" / "train_demo.py"
FOREVER = training(items=64, item_s=0.003, forever=True,
                   loader="num_workers=2, persistent_workers=True")


@pytest.fixture(autouse=True)
def system_theme():
    yield
    theme.apply_theme(QApplication.instance(), "system")  # as test_theme leaves it


def shot(widget, name: str) -> None:
    save_shot(widget, f"polish_{name}")


def make_session(folder: Path, *demo_args: str, env: dict | None = None) -> Path:
    """A real, fast demo run with --lineprof auto (about 5 s)."""
    cmd = [sys.executable, str(Path(runner.__file__)), "--session", str(folder),
           "--lineprof", "auto", "--wait", "0", "--warmup", "1", "--active", "2", "--",
           str(DEMO), "--images", "24", "--epochs", "1", "--batch-size", "4", *demo_args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, **(env or {})}, cwd=str(folder.parent))
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Two demo sessions with line stats: big JPEGs (before) and small ones (after)."""
    root = tmp_path_factory.mktemp("sessions")
    return (make_session(root / "big-jpegs", "--image-size", "160"),
            make_session(root / "small-jpegs", "--image-size", "64"))


# ------------------------------------------------------------------ 1. Run > Stop

def test_run_stop_action_ends_the_live_run_tree(qtbot, window, tmp_path):
    stop = window.actions_by_name["Stop"]
    assert stop in window.menuBar().actions()[2].menu().actions()  # the Run menu
    assert QKeySequence("Shift+F5") in stop.shortcuts()
    assert QKeySequence("Ctrl+.") in stop.shortcuts()
    assert not stop.isEnabled()  # nothing runs yet
    script = tmp_path / "forever.py"
    script.write_text(textwrap.dedent(FOREVER))
    window.show_run(RunRequest(script=str(script), session=str(tmp_path / "session"),
                               options={"stop_after_window": False}))
    view = window.tabs.currentWidget()
    run = view.controller  # gui/controllers/run.py: the process, its series and Stop
    qtbot.waitUntil(lambda: run.is_running, timeout=5_000)
    qtbot.waitUntil(stop.isEnabled, timeout=1_000)  # at once, not at the first step
    qtbot.waitUntil(lambda: run.series.n >= 2, timeout=60_000)
    assert stop.isEnabled()
    tree = psutil.Process(run.handle.local_pid).children(recursive=True)
    assert len(tree) >= 2, "the DataLoader workers should be running"
    window.tabs.setCurrentWidget(window.analysis)  # the live run is still the one to stop
    assert stop.isEnabled() and window.running_view() is view
    with qtbot.waitSignal(run.sig_run_finished, timeout=30_000):
        stop.trigger()
        assert not stop.isEnabled() or not run.is_running  # no second Stop meanwhile
    qtbot.waitUntil(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                    for p in tree), timeout=15_000)
    assert not run.is_running
    assert not stop.isEnabled()
    assert "stopped" in (run.finished_record or {}).get("reason", "") \
        or (run.finished_record or {}).get("rc") not in (0, None)


# ------------------------------------------------------------------ 2. the status label

def test_status_label_names_what_is_loaded_and_outlives_messages(qtbot, window, open_and_wait):
    assert window.loaded_label.full_text() == "Nothing open"
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = doc.reports[0]
    text = window.loaded_label.full_text()
    lo, hi = report.window
    assert text.startswith("kineto_nw0_worker0")
    assert f"window {units.duration(hi - lo)}" in text  # one formatter: 1.05 s
    # the summary panel's figure, to its decimal (the AMD trace read "2% busy" beside 1.6%)
    assert f"GPU 0 {units.pct(report.devices[0].utilization)} busy" in text
    assert "GPU 0 56." in text
    window.status_bar.showMessage("a passing note", 5000)
    assert window.status_bar.currentMessage() == "a passing note"
    assert window.loaded_label.isVisible() and window.loaded_label.full_text() == text
    # the two texts never overlap: the label elides (whole text in its tooltip) instead
    window.resize(1024, 700)
    QApplication.processEvents()
    label = window.loaded_label
    message = window.load_status.message  # the message has its own label beside it now
    assert message.geometry().right() < label.geometry().left()
    assert label.is_elided() == (label.fontMetrics().horizontalAdvance(text) > label.width())
    shot(window.status_bar, "status_bar")

    open_and_wait(fixture_path("hta_cpu_only"))
    assert "no GPU" in window.loaded_label.full_text()
    assert "hta_cpu_only" in window.loaded_label.full_text()


# ------------------------------------------------------------------ 3. --screenshot writes nothing

def test_screenshot_writes_no_settings_layout_or_recent(qtbot, tmp_path, config_dir):
    out = tmp_path / "shot.png"
    assert app_module.main(["--screenshot", str(out), str(fixture_path("kineto_nw0"))]) == 0
    assert out.stat().st_size > 10_000
    written = sorted(p.name for p in config_dir.rglob("*")) if config_dir.exists() else []
    assert written == [], f"--screenshot wrote {written}"

    # The same open in the interactive app does remember it: the check above can fail.
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.sig_document_shown, timeout=60_000):
        w.open_path(str(fixture_path("kineto_nw0")))
    w.close()
    assert (config_dir / "recent.json").exists() and (config_dir / "stallscope.ini").exists()


# ------------------------------------------------------------------ 4. dark theme

def lightness(hex_or_color) -> int:
    return QColor(hex_or_color).lightness()


def test_message_strip_and_timeline_follow_the_dark_theme(qtbot, window, open_and_wait):
    app = QApplication.instance()
    theme.apply_theme(app, "light")
    window.show_message("Could not open: something is wrong.", "error")
    QApplication.processEvents()
    panel = window.messages
    light_bg = panel.grab().toImage().pixelColor(panel.width() // 2, 3)
    assert light_bg.lightness() > 200

    open_and_wait(fixture_path("kineto_nw0"))
    window.show_message("A note on the strip.", "info")
    theme.apply_theme(app, "dark")  # switching restyles what is already shown
    QApplication.processEvents()
    dark_bg = panel.grab().toImage().pixelColor(panel.width() // 2, 3)
    assert dark_bg.lightness() < 80, dark_bg.name()
    text_color = panel.label.palette().color(panel.label.foregroundRole())
    assert text_color.lightness() > 140  # readable on the dark strip

    # the cause band keeps its colours (the legend's) on the dark plot; the step lane's
    # tints follow the dark background
    timeline = window.analysis.timeline
    gpu = timeline.lane("gpu:0")
    idle = next(layer for layer in gpu.layers if layer.key == "data_loading")
    assert idle.color == colors.CAUSE_COLORS["data_loading"]
    steps = timeline.lane("steps")
    assert all(lightness(layer.color) < 80 for layer in steps.layers)
    image = window.analysis.timeline.grab().toImage()
    corner = image.pixelColor(image.width() - 3, image.height() // 2)
    assert corner.lightness() < 60, corner.name()  # the plot background itself is dark
    shot(window, "dark_kineto_nw0")


def test_rank_table_rows_follow_the_dark_theme(qtbot, window, tmp_path, open_and_wait):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        (ranks / f"rank-{r}.json.gz").symlink_to(fixture_path(f"hta_sampled_rank-{r}"))
    app = QApplication.instance()
    theme.apply_theme(app, "light")
    open_and_wait(ranks)
    table = window.analysis.rank_table
    slow = table.slowest_index
    assert slow is not None
    assert table.item(slow, 0).background().color().lightness() > 200
    theme.apply_theme(app, "dark")
    QApplication.processEvents()
    assert table.item(slow, 0).background().color().lightness() < 80
    assert "◀ slowest" in table.item(slow, 0).text()
    assert table.currentRow() == window.analysis.rank_index  # the selection survives
    selected = table.grab().toImage().pixelColor(table.width() // 3,
                                                 table.rowViewportPosition(slow)
                                                 + table.horizontalHeader().height() + 4)
    assert selected.lightness() < 110, selected.name()  # no light selection bar in the dark
    shot(window, "dark_ranks")


# ------------------------------------------------------------------ 5. line heatmap tab

def test_opened_session_shows_its_line_heatmap_and_compare_passes_before(qtbot, window,
                                                                          sessions, open_and_wait):
    before_dir, after_dir = sessions
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_session(str(before_dir))
    # line stats are read off the GUI thread: the tab fills once they are in
    qtbot.waitUntil(lambda: window.heatmap is not None and bool(window.heatmap.profiles),
                    timeout=20_000)
    view = window.heatmap
    assert view is not None and window.tabs.indexOf(view) > 0
    assert window.tabs.currentWidget() is window.analysis  # the trace stays in front
    assert window.tabs.tabText(window.tabs.indexOf(view)) == "Line heatmap: big-jpegs"
    expected = lineprof.load_session(before_dir)
    assert [p.qualname for p in view.profiles] == [p.qualname for p in expected]
    assert "__getitem__" in view.profile.qualname
    assert view.profile.total_s == pytest.approx(expected[0].total_s)
    assert view.model.rowCount() == len(expected[0].lines) > 3
    window.tabs.setCurrentWidget(view)
    shot(window, "session_heatmap")

    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000):
        window.open_compare(str(after_dir))
    qtbot.waitUntil(lambda: bool(view.compare), timeout=20_000)
    assert window.heatmap is view  # one heatmap tab, reused
    after = lineprof.load_session(after_dir)
    assert view.profile.total_s == pytest.approx(after[0].total_s)
    assert [p.total_s for p in view.compare] == pytest.approx([p.total_s for p in expected])
    assert "Before per sample" in view.model.headers()
    assert "big-jpegs → small-jpegs" in window.tabs.tabText(window.tabs.indexOf(view))
    window.tabs.setCurrentWidget(view)
    shot(window, "session_heatmap_compare")

    # a bare trace without line stats removes the stale session heatmap
    open_and_wait(fixture_path("kineto_nw0"))
    qtbot.waitUntil(lambda: window.heatmap is None)
    assert all(not window.tabs.tabText(i).startswith("Line heatmap")
               for i in range(window.tabs.count()))


def test_a_live_run_with_line_profiling_fills_the_heatmap_tab(qtbot, window, tmp_path):
    request = RunRequest(script=str(DEMO), session=str(tmp_path / "live"),
                         args=["--images", "24", "--epochs", "1", "--batch-size", "4",
                               "--image-size", "96"],
                         schedule={"wait": 0, "warmup": 1, "active": 2, "repeat": 1},
                         options={"lineprof": "auto", "stop_after_window": True})
    window.show_run(request)
    run = window.tabs.currentWidget().controller
    with qtbot.waitSignal(run.sig_run_finished, timeout=120_000):
        pass
    qtbot.waitUntil(lambda: window.document is not None and window.heatmap is not None
                    and bool(window.heatmap.profiles), timeout=30_000)
    assert window.tabs.currentWidget() is not window.heatmap  # the run's trace stays in front
    expected = lineprof.load_session(tmp_path / "live")
    assert window.heatmap.profile.total_s == pytest.approx(expected[0].total_s)
    assert window.tabs.tabText(window.tabs.indexOf(window.heatmap)) == "Line heatmap: live"
    headings = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert sum(t.startswith("Line heatmap") for t in headings) == 1, headings


def test_file_open_line_profile_takes_a_json(qtbot, window, sessions, monkeypatch):
    action = window.actions_by_name["Open line profile"]
    assert action in window.menuBar().actions()[0].menu().actions()  # the File menu
    stats = lineprof.find_profiles(sessions[1])[0]
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(stats), "Line profiles (*.json *.lprof)"))
    action.trigger()  # read off the GUI thread: the tab comes when the stats are in
    qtbot.waitUntil(lambda: window.heatmap is not None and bool(window.heatmap.profiles),
                    timeout=20_000)
    view = window.heatmap
    assert window.tabs.currentWidget() is view
    assert view.profile.total_s == pytest.approx(lineprof.load(stats).total_s)
    assert stats.name in window.tabs.tabText(window.tabs.indexOf(view))


def test_run_without_line_profiler_shows_the_install_banner(qtbot, window, tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "line_profiler.py").write_text("raise ImportError('no line_profiler here')\n")
    session = make_session(tmp_path / "no-lp", env={"PYTHONPATH": str(shadow)})
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_session(str(session))  # the run's replay reports the missing module
    view = window.heatmap
    assert view is not None and view.missing is not None
    assert view.missing.python == sys.executable
    assert view.missing.command[:4] == [sys.executable, "-m", "pip", "install"]
    assert view.missing.isVisibleTo(view)
    window.tabs.setCurrentWidget(view)
    shot(window, "missing_line_profiler")


# ------------------------------------------------------------------ 6. frozen app's python

def test_frozen_app_defaults_to_the_python_on_path(tmp_path, monkeypatch):
    monkeypatch.delattr(sys, "frozen", raising=False)
    assert run_dialog.default_python() == sys.executable
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        exe = bin_dir / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert run_dialog.default_python() == str(bin_dir / "python3")
    assert RunRequest(script="x.py").python == str(bin_dir / "python3")
    (bin_dir / "python3").unlink()
    assert run_dialog.default_python() == str(bin_dir / "python")
