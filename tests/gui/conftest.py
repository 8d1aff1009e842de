"""GUI tests run offscreen, with the main window and a way to open a document and wait."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def collect_on_the_gui_thread(qapp):
    """As in the app: no cycle collection in worker threads (see pyside_workaround); each test
    ends by deleting its closed widgets and collecting here, not in the middle of the next."""
    from PySide6.QtCore import QCoreApplication, QEvent

    from stallscope.gui import pyside_workaround

    pyside_workaround.collect_on_gui_thread()
    from stallscope.gui.widgets import install_plain_text_guard

    install_plain_text_guard(qapp)  # as gui/app.py: untrusted names never render as rich text
    yield
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    # What survives is older than every later test: frozen, their collections skip it (a full
    # collection over all that the tests before left alive took up to 58 s per test by the end)
    gc.freeze()


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
