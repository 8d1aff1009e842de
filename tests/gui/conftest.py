"""GUI tests run offscreen, with the main window and a way to open a document and wait."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402


@pytest.fixture
def window(qtbot):
    from stallscope.gui.main_window import MainWindow

    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


@pytest.fixture
def open_and_wait(qtbot, window):
    """open_and_wait(path) opens a document in `window` and returns it once it is shown."""

    def run(path, timeout=60_000):
        with qtbot.waitSignal(window.sig_document_shown, timeout=timeout) as blocker:
            window.open_path(str(path))
        return blocker.args[0]

    return run
