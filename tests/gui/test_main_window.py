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
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QImage

from stallscope.core.causes import CAUSES
from stallscope.core.compare import step_ms
from stallscope.gui import app as app_module
from stallscope.gui.colors import BUSY_COLOR, CAUSE_COLORS
from stallscope.gui.views.summary_parts import shown_parts


def gpu_lanes(window):
    return [lane for lane in window.analysis.timeline.lanes if lane.kind == "gpu"]


def test_open_kineto_nw0_draws_lanes_gaps_memory_and_advice(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("kineto_nw0"))
    report = doc.reports[0]
    view = window.analysis
    assert window.stack.currentWidget() is window.tabs
    assert [lane.label for lane in view.timeline.lanes] == [
        "steps", "GPU 0", "CPU main thread", "CPU backward"]
    (gpu,) = gpu_lanes(window)
    assert len(gpu.gaps) == report.devices[0].idle_gaps
    alloc, _ = view.timeline.memory.lines[0]
    assert len(alloc.xData) == len(report.memory[0].ts)
    assert len(view.summary.advice_cards) == len(report.advice) >= 1
    assert "dataloader_bound" in [a.id for a in report.advice]
    assert all(card.isVisibleTo(window) for card in view.summary.advice_cards)
    first = view.summary.advice_cards[0].text
    assert report.advice[0].title in first and report.advice[0].fix in first
    assert view.step_combo.count() == 1 + len(report.steps)
    # The per-step stacked bar: GPU busy and every cause in its own colour, adding up to the
    # step's duration; the cause the top card names is one of its parts (no lumped "other").
    parts = view.summary.step_parts
    assert list(parts) == ["compute", *CAUSES]
    total = sum(parts[p] for p in parts)
    np.testing.assert_allclose(total, [s.dur_us for s in report.steps], rtol=1e-6)
    chart = view.summary.step_plot
    assert set(shown_parts(parts)) == set(chart.bars) >= {"compute", "data_loading"}
    for cause in chart.bars.keys() - {"compute"}:
        assert chart.bars[cause].opts["brush"] == CAUSE_COLORS[cause]
    assert "cpu_ops" in chart.bars and "optimizer" in chart.bars
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
    qtbot.mouseClick(summary.cause_table.row("cpu_ops"), Qt.MouseButton.LeftButton)
    lo, hi = report.worst_gap("cpu_ops")
    vlo, vhi = window.analysis.timeline.x_range_us()
    assert vlo < lo and vhi > hi and (vhi - vlo) < 2 * (hi - lo)


@pytest.mark.parametrize("name", ["hta_sampled_rank-0", "hta_nccl_parser_config_nccl_data"])
def test_every_card_jumps_to_its_span(qtbot, window, open_and_wait, name):
    """The v2 cards (backward, queued work, optimizer, exposed communication, ...) each zoom the
    timeline to the span they are about."""
    report = open_and_wait(fixture_path(name)).reports[0]
    cards = window.analysis.summary.advice_cards
    assert len(cards) == len(report.advice) >= 3
    for card, advice in zip(cards, report.advice, strict=True):
        window.analysis.fit()
        qtbot.mouseClick(card, Qt.MouseButton.LeftButton)
        lo, hi = advice.focus or report.worst_gap(advice.cause)
        vlo, vhi = window.analysis.timeline.x_range_us()
        assert vlo <= lo and vhi >= hi and (vhi - vlo) < 2 * (hi - lo) + 1, advice.id


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


def test_a_step_zooms_the_timeline_and_says_the_summary_stays_whole(qtbot, window,
                                                                    open_and_wait):
    """As in Nsight Systems, zooming is a view, not a filter: the summary keeps the whole
    window's figures, and the bar says so while a step is picked."""
    open_and_wait(fixture_path("kineto_nw0"))
    analysis = window.analysis
    whole = analysis.summary.subtitle.text()
    assert "summary on the right stays on the whole" in analysis.step_combo.toolTip()
    analysis.step_combo.setCurrentIndex(3)
    assert analysis.hint.full_text() == (f"timeline: {analysis.step_combo.currentText()} alone "
                                         "· summary: the whole window")
    assert analysis.summary.subtitle.text() == whole
    window.actions_by_name["Zoom to fit"].trigger()
    assert analysis.hint.full_text().startswith("wheel: zoom")


def test_hta_df_index_resolver_memory_with_totals(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("hta_df_index_resolver"))
    report = doc.reports[0]
    (gpu,) = gpu_lanes(window)
    assert gpu.label == "GPU 1"
    assert len(gpu.gaps) == report.devices[1].idle_gaps
    alloc, reserved = window.analysis.timeline.memory.lines[1]
    assert len(alloc.xData) == len(reserved.xData) == len(report.memory[1].ts)
    assert np.nanmax(reserved.yData) * window.analysis.timeline.memory.scale == pytest.approx(
        report.memory[1].peak_reserved)
    cards = window.analysis.summary.advice_cards
    assert len(cards) == max(len(report.advice), 1)
    if not report.advice:
        assert "Nothing stands out" in cards[0].text and not cards[0].clickable


@pytest.mark.parametrize("size", [(1024, 700), (1400, 900)])
def test_the_memory_legend_leaves_the_lines_uncovered(qtbot, window, open_and_wait, size):
    """hta_df_index_resolver's reserved line runs flat near its peak: at 1024x700 the plot is
    short and a 40% headroom was less than the legend's row, which hid the line's start."""
    window.resize(*size)
    open_and_wait(fixture_path("hta_df_index_resolver"))
    qtbot.wait(10)
    plot = window.analysis.timeline.memory
    legend = plot.legend.sceneBoundingRect()
    view = plot.getViewBox()
    for line in plot.lines[1]:
        points = [view.mapViewToScene(QPointF(x, y)) for x, y in zip(line.xData, line.yData,
                                                                      strict=True)]
        under = [pt for pt in points if legend.left() <= pt.x() <= legend.right()]
        assert under and all(pt.y() > legend.bottom() for pt in under), (size, legend)


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


def test_trace_without_gpu_speaks_of_step_time_and_threads(qtbot, window, open_and_wait):
    doc = open_and_wait(fixture_path("hta_cpu_only"))
    report = doc.reports[0]
    assert not report.devices
    timeline, summary = window.analysis.timeline, window.analysis.summary
    assert not gpu_lanes(window)
    assert [lane.kind for lane in timeline.lanes] == ["steps", "cpu", "thread", "thread"]
    assert "Main thread in" in timeline.legend.text() and "GPU busy" not in timeline.legend.text()
    # one short note, in the summary: no banner, no overlay on the lanes
    assert not window.messages.isVisible()
    assert summary.note.isVisibleTo(window) and "No GPU activity" in summary.note.text()
    assert not summary.util_heading.isVisibleTo(window)
    assert "main thread" in summary.cause_heading.text()
    assert summary.cause_table.row("python") is not None  # the 210 ms step is Python ...
    assert "gloo:all_reduce" in summary.threads_label.text()  # ... while threads all-reduce
    assert summary.threads_label.isVisibleTo(window)
    # the per-step bars split the main thread's step time by cause
    assert summary.step_plot.isVisibleTo(window)
    assert "main thread" in summary.step_heading.text()
    total = sum(summary.step_parts[p] for p in summary.step_parts)
    assert total == pytest.approx([s.dur_us for s in report.steps])
    assert "no GPU in this trace" in summary.memory_label.text()
    # the start screen does not keep a note about the document
    window.show_start()
    assert not window.messages.isVisible()
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


def two_of_128(tmp_path) -> Path:
    """hta_sampled_rank-0/1: 2 ranks of a 128-rank job, in one folder."""
    folder = tmp_path / "job"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), folder)
    return folder


@pytest.mark.runner  # the CLI analyses the ranks in a process pool
def test_two_ranks_of_a_larger_job_say_its_world_size_as_the_cli_does(qtbot, window, tmp_path,
                                                                      open_and_wait, capsys):
    from stallscope.core.cli import main as cli

    folder = two_of_128(tmp_path)
    assert cli(["analyze", str(folder)]) == 0
    said = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("2 ranks of world size"))
    cli_line = said.split(";")[0]  # "2 ranks of world size 128 over 2 compared steps"
    open_and_wait(folder)
    assert f"· {cli_line} ·" in window.analysis.ranks_heading.text()


def test_switching_rank_leaves_no_band_above_the_ranks_heading(qtbot, window, tmp_path,
                                                               open_and_wait):
    """The heading's wrapped text is as tall as its lines at its width, not at a narrow guessed
    width with the text centred in the room (an empty band above it)."""
    open_and_wait(two_of_128(tmp_path))
    analysis = window.analysis
    heading = analysis.ranks_heading
    for index in (1 - analysis.rank_index, 1 - analysis.rank_index):
        analysis.set_rank(index)
        qtbot.wait(10)
        assert heading.isVisible() and heading.width() > 300
        assert heading.height() == heading.heightForWidth(heading.width())
        assert analysis.rank_table.y() - heading.geometry().bottom() <= 12


def test_the_per_step_bars_draw_bare_communication_as_the_timeline_does(qtbot, window,
                                                                         open_and_wait):
    """hta_sampled_rank-0's GPU runs all-to-alls with nothing beside them: the timeline paints
    that time purple (lanes.device_lane's "comm" layer); each step's bar gives the same time
    the same colour, out of GPU busy, the parts still adding up to the step."""
    from stallscope.core import intervals as iv
    from stallscope.core.compare import primary_device, step_breakdown
    from stallscope.gui.colors import COMM_COLOR

    doc = open_and_wait(fixture_path("hta_sampled_rank-0"))
    report = doc.reports[0]
    lane = next(spec for spec in window.analysis.timeline.specs if spec.kind == "gpu")
    comm_layer = next(layer for layer in lane.layers if layer.key == "comm")
    assert comm_layer.color == COMM_COLOR and len(comm_layer.intervals)
    summary = window.analysis.summary
    parts, chart = summary.step_parts, summary.step_plot
    assert chart.bars["communication"].opts["brush"] == COMM_COLOR
    assert chart.bars["compute"].opts["brush"] == BUSY_COLOR
    stats = report.devices[primary_device(report)]
    lo = np.array([s.start_us for s in report.steps])
    hi = lo + np.array([s.dur_us for s in report.steps])
    bare = iv.measure_in(stats.exposed_comm, lo, hi)
    assert bare.min() > 0
    np.testing.assert_allclose(parts["communication"], bare)
    busy = step_breakdown(report)["compute"]
    np.testing.assert_allclose(parts["compute"] + parts["communication"], busy)
    np.testing.assert_allclose(sum(parts.values()), hi - lo, rtol=1e-6)
    assert "communication" in summary.step_legend.text()


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
    assert len(window.compare.chart.bars) == 2 * len(window.compare.chart.values)
    row = [m.key for m in table.metrics].index("step_ms")
    assert table.item(row, 3).text() == "✓ -35.14 ms (-20%)"
    cause_rows = [r for r, m in enumerate(table.metrics) if m.cause is not None]
    assert [table.item(r, 0).text().strip() for r in cause_rows] == [
        f"↳ {c}" for c in ("queued work", "data loading", "sync", "optimizer", "CPU ops",
                           "backward", "Python", "uncovered")]
    assert not window.compare.warnings.isVisible()  # same GPU, same step count
    assert [c.text.split("\n")[0] for c in window.compare.after.advice_cards] == [
        a.title for a in after.advice]


def test_compare_warns_when_the_inputs_differ(qtbot, window, open_and_wait):
    open_and_wait(fixture_path("kineto_nw0"))
    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000):
        window.open_compare(str(fixture_path("hta_cpu_only")))
    warnings = window.compare.warnings
    assert warnings.isVisible()
    assert "CPU-only" in warnings.text() and "6 steps vs 1 step" in warnings.text()
    assert window.compare.mismatches[0].startswith("before ran on a GPU")


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
    assert data["devices"]["0"]["idle_gaps"] == report.devices[0].idle_gaps
    assert [a["id"] for a in data["advice"]] == [a.id for a in report.advice]
    assert not window.export_to(str(tmp_path / "r.txt"))
    assert "r.txt" in window.messages.text


def content_fraction(image: QImage, background: str) -> float:
    """Share of pixels (on a grid) that are not the background colour."""
    bg = QColor(background)
    seen = drawn = 0
    for x in range(0, image.width(), 7):
        for y in range(0, image.height(), 7):
            c = image.pixelColor(x, y)
            seen += 1
            drawn += max(abs(c.red() - bg.red()), abs(c.green() - bg.green()),
                         abs(c.blue() - bg.blue())) > 24
    return drawn / seen


def has_color(image: QImage, color: str, tol: int = 8) -> bool:
    want = QColor(color)
    for x in range(0, image.width(), 3):
        for y in range(0, image.height(), 3):
            c = image.pixelColor(x, y)
            if max(abs(c.red() - want.red()), abs(c.green() - want.green()),
                   abs(c.blue() - want.blue())) <= tol:
                return True
    return False


def test_screenshot_entry_point(qtbot, tmp_path, capfd):
    out = tmp_path / "shot.png"
    rc = app_module.main(["--screenshot", str(out), str(fixture_path("hta_sampled_rank-0"))])
    assert rc == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)
    # a blank or half-drawn window fails: lanes, summary and charts put colour on the page
    from stallscope.gui import theme

    assert content_fraction(image, theme.PALETTES["light"].window) > 0.15  # blank: < 0.05
    assert has_color(image, BUSY_COLOR) and has_color(image, CAUSE_COLORS["backward"])
    assert "propagateSizeHints" not in capfd.readouterr().err  # no Qt noise on stderr
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
