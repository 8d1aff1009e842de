"""gui/views/load_status.py: progress stays short of its end until the document is shown, with
the step it is in; the passing message and what is open share the status bar, each eliding
with "…" into the width it gets (1024x700 and 2560x1440, real traces)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from fixture_traces import fixture_path
from PySide6.QtWidgets import QApplication
from shots import save_shot

from stallscope.core.document import analyze_path
from stallscope.gui.views.load_status import BAR_RANGE, JOB_SHARE, split_width

LONG = "Loading comparison trace htrace_from_the_other_machine_of_run_17_rank_3.json…"


def test_split_width_keeps_what_fits_and_halves_what_does_not():
    assert split_width(1000, 200, 300) == (700, 300)  # both whole, the spare to the left
    assert split_width(1000, 200, 1500) == (200, 800)  # the short one whole
    assert split_width(1000, 1500, 300) == (700, 300)
    assert split_width(1000, 900, 1500) == (500, 500)  # neither fits: halves
    assert split_width(-5, 10, 10) == (0, 0)


def test_progress_is_short_of_the_end_until_the_document_is_shown(qtbot, window):
    seen = []
    window.controller.sig_load_progress.connect(
        lambda *_: seen.append((window.progress.value(), window.progress.format())))
    at_shown = []
    window.sig_document_shown.connect(
        lambda _doc: at_shown.append((window.progress.value(), window.progress.format(),
                                      window.progress.isVisible())))
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(fixture_path("kineto_nw0")))
    assert seen and all(value < BAR_RANGE for value, _ in seen)
    assert seen[-1] == (round(BAR_RANGE * JOB_SHARE), "Drawing…")
    assert any(text.startswith("Reading and analysing") for _, text in seen[:-1])
    # when the document is shown, the bar still says it is drawing; it goes once idle
    assert at_shown == [(round(BAR_RANGE * JOB_SHARE), "Drawing…", True)]
    qtbot.waitUntil(lambda: not window.progress.isVisible(), timeout=10_000)


@pytest.mark.parametrize("size", [(1024, 700), (2560, 1440)])
def test_message_and_what_is_open_elide_into_the_width_they_get(qtbot, window, size):
    report = analyze_path(fixture_path("kineto_nw0"))
    window.resize(*size)
    status = window.load_status
    status.show_report(report, vs="kineto_nw4_from_the_other_machine.json")
    status.set_busy(True)
    window.status_bar.showMessage(LONG)
    QApplication.processEvents()
    message, loaded = status.message, status.label
    assert message.full_text() == LONG and loaded.full_text().endswith("other_machine.json")
    assert message.geometry().right() < loaded.geometry().left()  # never overlapping
    assert loaded.geometry().right() <= status.line.width()
    for label in (message, loaded):
        width = label.fontMetrics().horizontalAdvance(label.full_text())
        assert label.is_elided() == (width + 8 > label.width())
        if label.is_elided():
            assert "…" in label.text() and label.toolTip() == label.full_text()
    if size[0] >= 2560:  # room for both: neither is cut
        assert not message.is_elided() and not loaded.is_elided()
    else:  # not enough: each keeps at least half the line
        assert message.is_elided() and loaded.is_elided()
        assert min(message.width(), loaded.width()) >= status.line.width() // 2 - 20
    save_shot(window.status_bar, f"status_fits_{size[0]}")
    status.set_busy(False)
