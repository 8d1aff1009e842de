"""Loading runs off the GUI thread: the event loop keeps turning while a big trace loads,
the progress bar moves, and Cancel stops the load and keeps the open document."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time

import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import Qt, QTimer
from trace_tiling import tile_trace  # tests/gui is on sys.path (rootdir-less test dirs)


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """kineto_nw0 tiled 3x in time: ~225k events, ~100 MB of JSON, seconds to load."""
    path = tmp_path_factory.mktemp("big") / "tiled3.pt.trace.json"
    gpu = tile_trace(fixture_path("kineto_nw0"), path, 3)
    assert gpu == 3 * 9096
    return path


def test_event_loop_keeps_turning_while_a_big_trace_loads(qtbot, window, big_trace):
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    progress: list[int] = []
    window.controller.sig_load_progress.connect(lambda d, t: progress.append(d))
    timer.start()
    t0 = time.perf_counter()
    with qtbot.waitSignal(window.sig_document_shown, timeout=120_000) as blocker:
        window.open_path(str(big_trace))
        assert window.progress.isVisible() and window.cancel_button.isVisible()
    load_s = time.perf_counter() - t0
    timer.stop()
    doc = blocker.args[0]
    assert len(doc.reports[0].steps) == 3 * 6
    assert load_s > 0.25, "the tiled trace should take a while to load"
    during = [t for t in ticks if t0 <= t]
    gaps = [b - a for a, b in zip([t0] + during, during, strict=False)]
    # A load on the GUI thread would freeze the 20 ms timer for the whole load.
    assert len(during) >= 5
    assert max(gaps) < min(1.5, 0.6 * load_s), f"GUI froze {max(gaps):.2f}s of {load_s:.2f}s"
    assert len(set(progress)) > 3 and progress == sorted(progress)
    qtbot.waitUntil(lambda: not window.progress.isVisible(), timeout=5_000)


def test_cancel_keeps_the_open_document(qtbot, window, big_trace):
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000) as blocker:
        window.open_path(str(fixture_path("hta_sampled_rank-0")))
    doc = blocker.args[0]
    with qtbot.waitSignal(window.controller.sig_load_cancelled, timeout=60_000):
        window.open_path(str(big_trace))
        qtbot.waitUntil(lambda: window.progress.value() > 0, timeout=30_000)
        qtbot.mouseClick(window.cancel_button, Qt.MouseButton.LeftButton)
    assert window.document is doc
    assert window.analysis.report is doc.reports[0]
    qtbot.waitUntil(lambda: not window.cancel_button.isVisible(), timeout=10_000)
    assert "cancelled" in window.status_bar.currentMessage().lower()
