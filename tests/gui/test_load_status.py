"""gui/views/load_status.py and gui/controllers/compare_tab.py: the status bar's "what is open"
(file, window, how busy each device was, what it is compared with) from real traces, the load's
progress and Cancel, and the compare pair named until its tab closes."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from fixture_traces import fixture_path
from PySide6.QtWidgets import QMainWindow
from shots import save_shot

from stallscope.core import units
from stallscope.core.document import analyze_path
from stallscope.gui.views.load_status import LoadStatus, loaded_text


def test_loaded_text_names_file_window_and_each_device():
    report = analyze_path(fixture_path("kineto_nw0"))
    (dev,) = report.devices
    lo, hi = report.window
    util = report.devices[dev].utilization
    assert 0.3 < util < 0.8  # GPU 0 is about half busy on this trace
    text = loaded_text(report)
    assert text == (f"{report.trace.path.name} · window {units.duration(hi - lo)} · "
                    f"{report.trace.device_label(dev)} {units.pct(util)} busy")  # the panel's
    assert loaded_text(report, vs="after.json") == f"{text} · vs after.json"
    assert loaded_text(None) == "Nothing open"


def test_loaded_text_without_a_gpu():
    report = analyze_path(fixture_path("hta_cpu_only"))
    assert not report.devices
    assert loaded_text(report).endswith(" · no GPU")


def test_progress_and_cancel_show_only_while_busy(qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    status = LoadStatus(window.statusBar())
    window.resize(1024, 700)
    window.show()
    assert not status.progress.isVisible() and not status.cancel_button.isVisible()
    status.set_busy(True)
    status.set_progress(3, 8)
    assert status.progress.isVisible() and status.cancel_button.isVisible()
    # the job fills JOB_SHARE of the bar; drawing the document is the rest
    assert (status.progress.value(), status.progress.maximum()) == (round(900 * 3 / 8), 1000)
    status.set_progress(0, 0)  # an unknown total is the start, not a busy spinner
    assert status.progress.value() == 0 and status.progress.maximum() == 1000
    status.set_busy(False)
    assert not status.progress.isVisible() and not status.cancel_button.isVisible()
    save_shot(window, "load_status")


def test_the_compare_pair_is_named_until_its_tab_closes(qtbot, window, open_and_wait):
    open_and_wait(fixture_path("kineto_nw0"))
    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000):
        window.open_compare(str(fixture_path("kineto_nw4")))
    comparison = window.model.comparison  # the pair shown is the model's
    assert comparison is not None
    after = comparison.after_document
    assert window.loaded_label.full_text().endswith(f" · vs {after.title}")
    assert window.loaded_label.full_text().startswith("kineto_nw0")
    window.close_tab(window.tabs.indexOf(window.compare))
    assert window.model.comparison is None
    assert " · vs " not in window.loaded_label.full_text()
