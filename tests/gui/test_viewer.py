"""The main window on real traces: open, what is drawn, advice/cause clicks, bad input,
no-GPU traces, ranks, compare, export and the --screenshot entry point."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from stallscope.core.compare import step_ms
from stallscope.gui import app as app_module
from stallscope.gui.views.timeline import PHASE_ORDER


def gpu_lanes(window):
    return [lane for lane in window.analysis.timeline.lanes if lane.kind == "gpu"]


def test_open_kineto_nw0_draws_lanes_gaps_memory_and_advice(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = doc.reports[0]
    view = window.analysis
    assert window.stack.currentWidget() is window.tabs
    assert len(view.timeline.lanes) == 1 + 1 + len(PHASE_ORDER)
    (gpu,) = gpu_lanes(window)
    assert len(gpu.gaps) == report.devices["0"].idle_gaps
    alloc, _ = view.timeline.memory.lines["0"]
    assert len(alloc.xData) == len(report.memory["0"].ts)
    assert len(view.summary.advice_cards) == len(report.advice) >= 1
    assert "dataloader_bound" in [a.id for a in report.advice]
    assert all(card.isVisibleTo(window) for card in view.summary.advice_cards)
    first = view.summary.advice_cards[0].text
    assert report.advice[0].title in first and report.advice[0].fix in first
    assert view.step_combo.count() == 1 + len(report.steps)
    # The per-step stacked bar holds the four parts of every step, adding up to its duration.
    parts = view.summary.step_parts
    total = sum(parts[p] for p in parts)
    np.testing.assert_allclose(total, [s.dur_us for s in report.steps], rtol=1e-6)
    assert window.windowTitle().endswith(Path(doc.path).name)


def test_advice_and_cause_clicks_zoom_to_the_worst_gap(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = doc.reports[0]
    summary = window.analysis.summary
    i = next(k for k, a in enumerate(report.advice) if a.id == "dataloader_bound")
    qtbot.mouseClick(summary.advice_cards[i], Qt.MouseButton.LeftButton)
    advice = report.advice[i]
    lo, hi = advice.focus or report.worst_gap(advice.cause)
    vlo, vhi = window.analysis.timeline.x_range_us()
    assert vlo < lo and vhi > hi and (vhi - vlo) < 2 * (hi - lo)
    # A cause row does the same for its cause.
    window.analysis.fit()
    sync_row = next(r for r in range(summary.cause_list.count())
                    if summary.cause_list.item(r).data(Qt.ItemDataRole.UserRole) == "cpu_ops")
    item = summary.cause_list.item(sync_row)
    qtbot.mouseClick(summary.cause_list.viewport(), Qt.MouseButton.LeftButton,
                     pos=summary.cause_list.visualItemRect(item).center())
    lo, hi = report.worst_gap("cpu_ops")
    vlo, vhi = window.analysis.timeline.x_range_us()
    assert vlo < lo and vhi > hi and (vhi - vlo) < 2 * (hi - lo)


def test_step_selector_and_keyboard_steps(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    steps = doc.reports[0].steps
    window.analysis.step_combo.setCurrentIndex(3)
    lo, hi = window.analysis.timeline.x_range_us()
    assert lo < steps[2].start_us < hi < steps[2].start_us + 1.1 * steps[2].dur_us
    window.actions_by_name["Next step"].trigger()
    assert window.analysis.step_combo.currentIndex() == 4
    window.actions_by_name["Zoom to fit"].trigger()
    lo, hi = window.analysis.timeline.x_range_us()
    assert lo <= doc.reports[0].window[0] and hi >= doc.reports[0].window[1]


def test_hta_df_index_resolver_memory_with_totals(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("hta_df_index_resolver"))
    report = doc.reports[0]
    (gpu,) = gpu_lanes(window)
    assert gpu.label == "GPU 1"
    assert len(gpu.gaps) == report.devices["1"].idle_gaps
    alloc, reserved = window.analysis.timeline.memory.lines["1"]
    assert len(alloc.xData) == len(reserved.xData) == len(report.memory["1"].ts)
    assert np.nanmax(reserved.yData) * window.analysis.timeline.memory.scale == pytest.approx(
        report.memory["1"].peak_reserved)
    cards = window.analysis.summary.advice_cards
    assert len(cards) == max(len(report.advice), 1)
    if not report.advice:
        assert "Nothing stands out" in cards[0].text and not cards[0].clickable


def test_bad_input_keeps_the_open_document(qtbot, window, tmp_path, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = window.analysis.report
    bad = tmp_path / "broken.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    with qtbot.waitSignal(window.controller.sig_load_failed, timeout=20_000) as blocker:
        window.open_path(str(bad))
    assert "broken.pt.trace.json" in blocker.args[1]
    assert window.messages.isVisible() and "broken.pt.trace.json" in window.messages.text
    assert window.document is doc and window.analysis.report is report
    assert window.stack.currentWidget() is window.tabs
    missing = tmp_path / "nope.json.gz"
    with qtbot.waitSignal(window.controller.sig_load_failed, timeout=20_000):
        window.open_path(str(missing))
    assert "nope.json.gz" in window.messages.text
    assert window.analysis.report is report


def test_trace_without_gpu_shows_cpu_lanes_and_says_so(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("hta_cpu_only"))
    assert not doc.reports[0].devices
    lanes = window.analysis.timeline.lanes
    assert not gpu_lanes(window)
    assert [lane.kind for lane in lanes].count("cpu") == len(PHASE_ORDER)
    assert "no GPU activity" in window.messages.text
    assert "No GPU activity" in window.analysis.timeline.note_text
    assert window.analysis.summary.no_gpu_label.isVisibleTo(window)
    summary = window.analysis.summary
    assert not summary.cause_bar.isVisibleTo(window)
    # the per-step bars still say how each step's time went on the main thread
    assert summary.step_plot.isVisibleTo(window)
    assert "main thread" in summary.step_heading.text()
    steps = doc.reports[0].steps
    assert summary.step_parts["data_loading"].tolist() == [s.data_loading_us for s in steps]
    total = sum(summary.step_parts[p] for p in summary.step_parts)
    assert total == pytest.approx([s.dur_us for s in steps])
    assert "no GPU in this trace" in summary.memory_label.text()
    window.grab()  # paints without errors


def test_two_ranks_show_a_table_with_the_slowest_marked(qtbot, window, tmp_path, open_and_wait):
    folder = tmp_path / "job"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), folder)
    doc = open_and_wait(folder)
    assert doc.labels == ["rank 0", "rank 1"]
    table = window.analysis.rank_table
    assert table.rowCount() == 2 and table.isVisibleTo(window)
    times = [step_ms(r) for r in doc.reports]
    slowest = int(np.argmax(times))
    assert table.slowest_index == slowest
    assert "slowest" in table.item(slowest, 0).text()
    assert float(table.item(0, 1).text().replace(",", "")) == pytest.approx(times[0], abs=0.06)
    other = 1 - slowest
    table.selectRow(other)
    assert window.analysis.rank_index == other
    assert gpu_lanes(window)[0].label == f"GPU {other}"
    assert window.analysis.rank_combo.currentIndex() == other


def test_compare_shows_deltas(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000) as blocker:
        window.open_compare(str(fixture_path("kineto_nw4")))
    before, after = blocker.args[0]
    assert before is doc.reports[0]
    assert window.tabs.currentWidget() is window.compare
    table = window.compare.table
    step = table.metric_by_key("step_ms")
    assert step.before == pytest.approx(step_ms(before))
    assert step.after == pytest.approx(step_ms(after))
    assert step.verdict == "better"  # num_workers=4 is faster than 0
    dl = table.metric_by_key("idle_data_loading_ms")
    assert dl.after < dl.before and dl.verdict == "better"
    assert window.compare.chart.values["data_loading"] == (dl.before, dl.after)
    assert len(window.compare.chart.bars) == 2 * 5
    row = [m.key for m in table.metrics].index("step_ms")
    assert "better" in table.item(row, 4).text()
    assert "-20%" in table.item(row, 3).text()
    assert [c.text.split("\n")[0] for c in window.compare.after.advice_cards] == [
        a.title for a in after.advice]


def test_export_png_markdown_json(qtbot, window, tmp_path, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = doc.reports[0]
    png, md, js = tmp_path / "panels.png", tmp_path / "r.md", tmp_path / "r.json"
    assert window.export_to(str(png)) and window.export_to(str(md)) and window.export_to(str(js))
    image = QImage(str(png))
    assert image.width() > 1000 and image.height() > 600
    text = md.read_text()
    assert report.advice[0].title in text and "56.0%" in text
    data = json.loads(js.read_text())
    assert data["devices"]["0"]["idle_gaps"] == report.devices["0"].idle_gaps
    assert [a["id"] for a in data["advice"]] == [a.id for a in report.advice]
    assert not window.export_to(str(tmp_path / "r.txt"))
    assert "r.txt" in window.messages.text


def test_screenshot_entry_point(qtbot, tmp_path):
    out = tmp_path / "shot.png"
    rc = app_module.main(["--screenshot", str(out), str(fixture_path("hta_sampled_rank-0"))])
    assert rc == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)
    assert app_module.main(["--screenshot", str(out), str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert app_module.main(["--screenshot", str(tmp_path / "b.png"), str(bad)]) == 2
    assert not (tmp_path / "b.png").exists()


def test_drop_a_trace_on_the_window_opens_it(qtbot, window):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(fixture_path("hta_sampled_rank-1")))])
    event = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.sig_document_shown, timeout=30_000) as blocker:
        window.dropEvent(event)
    assert blocker.args[0].reports[0].trace.rank == 1
    assert gpu_lanes(window)[0].label == "GPU 1"


def test_recent_menu_lists_what_was_opened(qtbot, window, open_and_wait):
    path = fixture_path("hta_sampled_rank-0")
    open_and_wait(path)
    window.recent_menu.aboutToShow.emit()
    names = [a.text() for a in window.recent_menu.actions()]
    assert path.name in names
