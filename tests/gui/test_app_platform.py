"""`stallscope` before Qt starts: no display, missing xcb libraries, Qt's noise on stderr, and
`stallscope --demo` without a display (what `make run` does over ssh): a screenshot, then exit."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from stallscope.gui import app as app_module
from stallscope.gui import platform_check as pc

pytestmark = pytest.mark.runner  # the app in a child process


def test_headless_means_offscreen_or_no_display_on_linux():
    assert pc.is_headless({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"})
    assert pc.is_headless({}, platform="linux")
    assert not pc.is_headless({"DISPLAY": ":0"}, platform="linux")
    assert not pc.is_headless({"WAYLAND_DISPLAY": "wayland-0"}, platform="linux")
    assert not pc.is_headless({}, platform="darwin")  # macOS and Windows always have one


def test_the_xcb_check_names_the_missing_packages_in_one_line():
    present = {"libxcb-cursor.so.0", "libxcb-image.so.0"}

    def load(soname):
        if soname not in present:
            raise OSError(f"{soname}: cannot open shared object file")

    env = {"DISPLAY": ":0"}
    line = pc.xcb_problem(env, "linux", load)
    missing = [pkg for so, pkg in pc.XCB_LIBRARIES.items() if so not in present]
    assert line == (f"Qt's xcb platform needs system libraries that are missing: "
                    f"{' '.join(missing)} (Debian/Ubuntu: sudo apt-get install "
                    f"{' '.join(missing)})")
    assert "libxcb-icccm4" in line and "libxcb-keysyms1" in line and "\n" not in line
    assert pc.xcb_problem(env, "linux", lambda so: None) is None  # all there
    # not xcb: Wayland, offscreen, macOS
    assert pc.xcb_problem({"DISPLAY": ":0", "WAYLAND_DISPLAY": "w"}, "linux", load) is None
    assert pc.xcb_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux", load) is None
    assert pc.xcb_problem({"DISPLAY": ":0"}, "darwin", load) is None
    assert pc.xcb_problem({"QT_QPA_PLATFORM": "xcb"}, "linux", load) is not None


def test_app_says_there_is_no_display_and_exits(monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert app_module.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stallscope: error: no display") and "\n" not in err


def test_app_names_missing_xcb_libraries_instead_of_aborting(monkeypatch, capsys):
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setattr(pc, "missing_xcb_packages", lambda load=None: ["libxcb-icccm4"])
    assert app_module.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("stallscope: error: Qt's xcb platform needs system libraries that are "
                   "missing: libxcb-icccm4 (Debian/Ubuntu: sudo apt-get install "
                   "libxcb-icccm4)")


def test_real_xcb_libraries_of_this_machine(tmp_path):
    """In a child process with a display named: a one-line message when this machine lacks
    xcb libraries (the one the suite runs on lacks icccm4 and keysyms1), never a Qt abort."""
    missing = pc.missing_xcb_packages()
    if not missing:
        pytest.skip("every xcb library is installed here: Qt would try to connect")
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "DISPLAY": ":99",
           "STALLSCOPE_CONFIG_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "stallscope.gui.app"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(pkg in lines[0] for pkg in missing), done.stderr


@pytest.mark.slow
def test_demo_without_a_display_writes_a_screenshot_and_exits(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), STALLSCOPE_CONFIG_DIR=str(tmp_path / "cfg"))
    env.pop("QT_QPA_PLATFORM", None)
    done = subprocess.run([sys.executable, "-m", "stallscope.gui.app", "--demo"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = [ln for ln in done.stdout.splitlines() if "the demo's analysis:" in ln]
    assert len(said) == 1
    png = Path(said[0].split("the demo's analysis:", 1)[1].strip())
    assert png.is_file() and png.is_relative_to(tmp_path / "data")
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1400, 900)
    assert "propagateSizeHints" not in done.stderr
    assert "no display" in done.stdout


CTRL_C_CHILD = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from stallscope.gui import app as app_module
from stallscope.gui.main_window import MainWindow

app = QApplication(sys.argv[:1])
window = MainWindow(persist=False)
app_module.quit_on_interrupt(app, window)
window.show()
QTimer.singleShot(0, lambda: print("in the event loop", flush=True))
sys.exit(app.exec())
"""


def test_ctrl_c_in_the_terminal_ends_the_app_cleanly(tmp_path):
    """SIGINT sent once the app's event loop runs (a known point, not a race): the window
    closes and the app exits with 130, without a KeyboardInterrupt traceback."""
    import signal

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "STALLSCOPE_CONFIG_DIR": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == "in the event loop"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == app_module.INTERRUPTED, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


@pytest.mark.parametrize(("size", "message"), [
    ("10x10", "--size 10x10: smaller than the window can be, at least "),
    ("1400by900", "--size 1400by900: expected WxH, e.g. 1400x900"),
    ("99999x900", "--size 99999x900: larger than 16384x16384")])
def test_a_size_the_window_cannot_take_is_refused_in_one_line(tmp_path, real_trace, size,
                                                               message):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "STALLSCOPE_CONFIG_DIR": str(tmp_path)}
    out = tmp_path / "shot.png"
    done = subprocess.run([sys.executable, "-m", "stallscope.gui.app", str(real_trace(
        "kineto_nw0")), "--screenshot", str(out), "--size", size], env=env,
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"stallscope: error: {message}"), done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_during_the_headless_demo_ends_it_cleanly(tmp_path):
    """Ctrl-C reaches the whole process group (as a terminal sends it) once the demo's runner
    has recorded a step: the runner writes its last record, the app exits 130 in one line."""
    import json
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), STALLSCOPE_CONFIG_DIR=str(tmp_path / "cfg"))
    env.pop("QT_QPA_PLATFORM", None)
    child = subprocess.Popen([sys.executable, "-m", "stallscope.gui.app", "--demo"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        line = child.stdout.readline()
        assert "running the demo headless into" in line, line
        session = Path(line.split("headless into", 1)[1].strip())
        events = session / "events.jsonl"
        deadline = time.monotonic() + 240
        while not events.is_file() or b'"step"' not in events.read_bytes():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == app_module.INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and f"stallscope: interrupted (the demo's session: {session})" \
        in err
    last = json.loads(events.read_text().splitlines()[-1])
    assert last["event"] == "finished"
