"""A view run on its own (`python -m stallscope.gui.views.<view> TRACE --screenshot OUT.png`)
starts as the app does (themed, light for a PNG) and ends without a word on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fixture_traces import fixture_path
from PySide6.QtGui import QImage

from stallscope.gui.theme import PALETTES

pytestmark = pytest.mark.runner  # views standalone in child processes


@pytest.mark.parametrize("view, size", [("summary", (460, 900)), ("compare", (1400, 900))])
def test_a_standalone_view_saves_its_png_and_exits_quietly(tmp_path, view, size):
    out = tmp_path / f"{view}.png"
    traces = [fixture_path("kineto_nw0")]
    if view == "compare":
        traces.append(fixture_path("kineto_nw4_worker0.1623212756351"))
    done = subprocess.run(
        [sys.executable, "-m", f"stallscope.gui.views.{view}", *map(str, traces),
         "--screenshot", str(out)], capture_output=True, text=True, timeout=180,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    image = QImage(str(out))
    assert (image.width(), image.height()) == size
    # themed as the app: its light window colour is the page's (Qt's own grey without it)
    corner = image.pixelColor(2, image.height() - 3).name()
    assert corner == PALETTES["light"].window, corner
