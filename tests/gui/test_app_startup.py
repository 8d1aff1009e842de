"""The app answers its launch before its heavy imports: the first window painted is the
splash (gui/splash.py), with pyqtgraph, numpy and the document machinery not yet imported, and
the splash hands over to the main window (issue 34's start-up budget)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.runner  # starts the app in a child process

CHILD = r"""
import os, sys
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication
from stallscope.gui import app as app_module

seen = []

class Painted(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint and obj.isWidgetType() and obj.isWindow():
            name = type(obj).__name__
            heavy = sorted(m for m in ("pyqtgraph", "numpy", "stallscope.core.document")
                           if m in sys.modules)
            paint = (name, heavy, list(getattr(obj, "steps", [])))
            if not seen or seen[-1] != paint:
                seen.append(paint)
            if name == "MainWindow":
                QTimer.singleShot(0, QApplication.instance().quit)
        return False

app_module.is_headless = lambda _env: False  # as on a desktop
app_module.xcb_problem = lambda _env: None
qapp = QApplication(sys.argv[:1])
painted = Painted()
qapp.installEventFilter(painted)
rc = app_module.main([])
for name, heavy, steps in seen:
    print("PAINT", name, ",".join(heavy) or "-", "|".join(steps) or "-")
splash = [w for w in QApplication.topLevelWidgets() if type(w).__name__ == "Splash"]
print("SPLASH_VISIBLE", any(w.isVisible() for w in splash))
"""


def test_the_splash_paints_before_the_heavy_imports_and_hands_over(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               XDG_DATA_HOME=str(tmp_path / "data"), STALLSCOPE_CONFIG_DIR=str(tmp_path / "cfg"))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    paints = [ln.split(" ", 3)[1:] for ln in out.stdout.splitlines() if ln.startswith("PAINT")]
    assert paints[0][0] == "Splash" and paints[0][1] == "-", paints
    loading = [p for p in paints if p[2].startswith("Starting: loading the analysis views")]
    assert loading and loading[0][0] == "Splash" and loading[0][1] == "-", paints
    assert paints[-1][0] == "MainWindow" and "pyqtgraph" in paints[-1][1], paints
    assert "SPLASH_VISIBLE False" in out.stdout
