"""Timeline: interval unions and per-column shares against brute force, and what the lanes draw
on real traces (busy on top, idle by cause below, streams, threads, CPU-only). The painted
areas themselves: test_lane_proportions.py."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gzip
import json

import numpy as np
import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from stallscope.core import causes, units
from stallscope.core import intervals as iv
from stallscope.core.analysis import analyze
from stallscope.core.trace import load
from stallscope.gui import lanes as lane_model
from stallscope.gui import theme
from stallscope.gui.colors import BUSY_COLOR, CAUSE_COLORS, OTHER_THREAD_COLOR
from stallscope.gui.views.lane_item import Coverage, column_shares
from stallscope.gui.views.timeline import TimelineView, legend_html


def brute_union(starts, ends):
    out = []
    for s, e in sorted(zip(starts, ends, strict=True)):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out).reshape(-1, 2)


def _covered(full, a, b):
    return float(np.clip(np.minimum(full[:, 1], b) - np.maximum(full[:, 0], a), 0, None).sum())


@pytest.mark.parametrize("seed", range(5))
def test_union_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    starts = rng.uniform(0, 1000, 400)
    ends = starts + rng.exponential(3, 400)
    u = iv.union(iv.as_intervals(starts, ends))
    np.testing.assert_allclose(u, brute_union(starts, ends))


@pytest.mark.parametrize("seed", range(3))
def test_coverage_up_to_any_point_matches_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    n = 8_000
    starts = np.cumsum(rng.exponential(10, n))
    ends = starts + rng.exponential(8, n) * (rng.random(n) < 0.7)
    cov = Coverage(starts, ends)
    full = np.column_stack([cov.starts, cov.ends])
    xs = np.sort(rng.uniform(-50, starts[-1] + 50, 200))
    np.testing.assert_allclose(cov.covered_upto(xs), [_covered(full, -1e18, x) for x in xs],
                               rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_each_columns_share_of_each_layer_matches_brute_force(seed):
    """column_shares against a column-by-column brute force over three disjoint layers."""
    rng = np.random.default_rng(7 + seed)
    cuts = np.sort(rng.uniform(0, 500, 1200))
    pieces = np.column_stack([cuts[:-1], cuts[1:]])[::2]  # disjoint, with holes between
    owner = rng.integers(0, 3, len(pieces))
    layers = [pieces[owner == k] for k in range(3)]
    edges = 40.0 + np.arange(601) * 0.7
    shares = column_shares([Coverage(p[:, 0], p[:, 1]) for p in layers], edges)
    assert shares.shape == (3, 600)
    for c, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        for k, p in enumerate(layers):
            assert shares[k, c] == pytest.approx(_covered(p, a, b) / (b - a), abs=1e-9)
    assert (shares.sum(axis=0) <= 1 + 1e-9).all()


@pytest.fixture(scope="module")
def nw0_report():
    return analyze(load(fixture_path("kineto_nw0")))


@pytest.fixture
def view(qtbot, nw0_report):
    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1300, 700)
    v.set_report(nw0_report)
    v.show()
    qtbot.waitExposed(v)
    return v


def _pixel(view, x_ms: float, y: float) -> QColor:
    image = view.graphics.grab().toImage()
    at = view.view_box.mapViewToScene(QPointF(x_ms, y))
    return image.pixelColor(int(at.x()), int(at.y()))


def _close(pixel: QColor, want: str, tol: int = 10) -> bool:
    w = QColor(want)
    return all(abs(a - b) <= tol for a, b in ((pixel.red(), w.red()), (pixel.green(), w.green()),
                                               (pixel.blue(), w.blue())))


def test_lanes_of_a_real_trace(view, nw0_report):
    report = nw0_report
    stats = report.devices[0]
    assert [lane.label for lane in view.lanes] == [
        "steps", "GPU 0", "CPU main thread", "CPU backward"]
    gpu = view.lane("gpu:0")
    # Every idle gap of the analysis is a gap of the lane, at the same place.
    assert len(gpu.gaps) == stats.idle_gaps
    assert np.isclose((gpu.gaps[:, 1] - gpu.gaps[:, 0]).sum() * 1000, stats.idle_us)
    assert sum(len(gpu.layer(c).coverage) for c in causes.CAUSES) == len(stats.cause_spans)
    # busy on top, the causes below it: two bands that do not overlap
    busy = gpu.layer("busy")
    cause = gpu.layer("data_loading")
    assert busy.top + busy.height < cause.top
    # the backward lane is the launching thread that is not the main one
    backward = view.lane(f"thread:{[t for t in stats.launch_tracks if t != report.main_track][0]}")
    assert backward is not None and backward.kind == "thread"
    view.grab()  # a full-window paint draws far fewer rectangles than events, but draws
    assert 0 < gpu.last_drawn["busy"] <= view.width()
    assert gpu.last_drawn["data_loading"] > 0


def test_worst_data_loading_gap_is_solid_in_its_cause_colour_under_an_empty_busy_band(
        view, nw0_report):
    lo, hi = nw0_report.worst_gap("data_loading")
    view.zoom_to(lo, hi, pad=0.1)
    gpu = view.lane("gpu:0")
    x = ((lo + hi) / 2 - view.t0_us) / 1000
    cause, busy = gpu.layer("data_loading"), gpu.layer("busy")
    assert _close(_pixel(view, x, gpu.y + (cause.top + cause.height / 2) * gpu.h),
                  CAUSE_COLORS["data_loading"])
    assert _close(_pixel(view, x, gpu.y + (busy.top + busy.height / 2) * gpu.h),
                  view.colors["bg"])


def test_a_busy_kernel_is_solid_busy_blue_on_top(view, nw0_report):
    stats = nw0_report.devices[0]
    k = int(np.argmax(stats.busy[:, 1] - stats.busy[:, 0]))
    lo, hi = stats.busy[k]
    view.zoom_to(lo, hi, pad=0.1)
    gpu = view.lane("gpu:0")
    busy = gpu.layer("busy")
    x = ((lo + hi) / 2 - view.t0_us) / 1000
    assert _close(_pixel(view, x, gpu.y + (busy.top + busy.height / 2) * gpu.h), BUSY_COLOR)


def test_hover_and_status_line_name_the_same_span_with_one_formatter(qtbot, nw0_report):
    from stallscope.core.document import Document
    from stallscope.gui.views.analysis import AnalysisView

    page = AnalysisView()
    qtbot.addWidget(page)
    page.set_document(Document(path=nw0_report.trace.path, reports=[nw0_report],
                               labels=[""]))
    with qtbot.waitSignal(page.sig_status) as status:
        assert page.show_worst_gap("data_loading")
    lo, hi = nw0_report.worst_gap("data_loading")
    duration = units.duration(hi - lo)
    assert duration in status.args[0]
    gpu = page.timeline.lane("gpu:0")
    x = ((lo + hi) / 2 - page.timeline.t0_us) / 1000
    text = page.timeline.describe_at(x, gpu.y + 0.8 * gpu.h)
    assert f"GPU 0 idle {duration} (data loading)" in text
    assert units.duration(lo - nw0_report.window[0]) in text  # from the same start


def test_hover_names_the_kernel(view, nw0_report):
    trace = nw0_report.trace
    gpu = view.lane("gpu:0")
    k = int(np.flatnonzero(trace.device == 0)[100])
    x = ((trace.start[k] + trace.end[k]) / 2 - view.t0_us) / 1000
    assert trace.names[trace.name[k]] in view.describe_at(x, gpu.y + 0.3 * gpu.h)


def test_stream_sub_lanes_on_demand(view, nw0_report):
    trace = nw0_report.trace
    gpu_ops = np.isin(trace.cat, np.array(lane_model.GPU_CATS, dtype=np.int8)) & \
        (trace.device == 0)
    streams = set(np.unique(trace.stream[gpu_ops]).tolist())
    assert not any(lane.kind == "stream" for lane in view.lanes)
    view.streams_button.setChecked(True)
    subs = [lane for lane in view.lanes if lane.kind == "stream"]
    assert {lane.spec.extra["stream"] for lane in subs} == streams
    assert view.lanes.index(subs[0]) == view.lanes.index(view.lane("gpu:0")) + 1
    # together the streams are busy exactly when the device is
    union = iv.union(np.concatenate([lane.spec.layers[0].intervals for lane in subs]))
    np.testing.assert_allclose(iv.length(union), iv.length(view.lane("gpu:0").spec.extra["busy"]),
                               rtol=1e-9)
    kinds = {lane.spec.extra["kind"] for lane in subs}
    assert "compute" in kinds and kinds <= {"compute", "copy", "communication"}
    view.streams_button.setChecked(False)
    assert not any(lane.kind == "stream" for lane in view.lanes)


def _two_gpu_trace(path):
    """Two GPUs, each with a compute stream and an NCCL stream, one step."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000}]
    for dev in (0, 1):
        for i in range(4):
            events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i}", "pid": dev,
                           "tid": 7, "ts": 100 + 200 * i, "dur": 80,
                           "args": {"device": dev, "stream": 7}})
        events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce",
                       "pid": dev, "tid": 13, "ts": 500, "dur": 300,
                       "args": {"device": dev, "stream": 13}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_every_device_of_a_trace_is_shown_with_its_nccl_stream(qtbot, tmp_path):
    p = tmp_path / "two_gpus.pt.trace.json.gz"
    _two_gpu_trace(p)
    report = analyze(load(p))
    v = TimelineView()
    qtbot.addWidget(v)
    v.streams_button.setChecked(True)
    v.set_report(report)
    labels = [lane.label.strip() for lane in v.lanes]
    assert labels[:1] == ["steps"] and "GPU 0" in labels and "GPU 1" in labels
    for dev in (0, 1):
        kinds = {lane.spec.extra["stream"]: lane.spec.extra["kind"] for lane in v.lanes
                 if lane.kind == "stream" and lane.device == dev}
        assert kinds == {7: "compute", 13: "communication"}
    v.grab()


def test_devices_are_lanes_in_numeric_order(qtbot, tmp_path):
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000}]
    events += [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": dev, "tid": 7, "ts": 100,
                "dur": 300, "args": {"device": dev, "stream": 7}} for dev in (10, 2, 0, 100)]
    p = tmp_path / "four.pt.trace.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump({"traceEvents": events}, f)
    v = TimelineView()
    qtbot.addWidget(v)
    v.set_report(analyze(load(p)))
    assert [lane.label for lane in v.lanes if lane.kind == "gpu"] == [
        "GPU 0", "GPU 2", "GPU 10", "GPU 100"]


def test_legend_names_every_cause_and_keeps_queued_work_apart():
    text = legend_html(gpu=True)
    for cause in causes.CAUSES:
        assert causes.label(cause) in text
    assert text.index(causes.label("gpu_wait")) < text.index("while the CPU was in")
    cpu = legend_html(gpu=False)
    assert "Main thread in" in cpu and "GPU" not in cpu and "other threads" in cpu


def test_cpu_only_trace_shows_the_threads_that_took_the_step(qtbot):
    report = analyze(load(fixture_path("hta_cpu_only")))
    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1200, 600)
    v.set_report(report)
    assert [lane.kind for lane in v.lanes] == ["steps", "cpu", "thread", "thread"]
    assert "Main thread in" in v.legend.text() and not v.streams_button.isVisibleTo(v)
    threads = [lane for lane in v.lanes if lane.kind == "thread"]
    for lane in threads:
        starts, ends, names = lane.texts
        longest = int(np.argmax(ends - starts))
        assert names[longest] == "gloo:all_reduce" and ends[longest] - starts[longest] > 150
        assert lane.layers[0].color == OTHER_THREAD_COLOR
    # no memory events: no empty memory panel, the lanes carry the time axis
    assert v.memory not in v.graphics.ci.items
    x = (threads[0].texts[0][0] + threads[0].texts[1][0]) / 2
    assert "gloo:all_reduce" in v.describe_at(x, threads[0].y + threads[0].h / 2)


def test_memory_curve_holds_every_sample(view, nw0_report):
    mem = nw0_report.memory[0]
    alloc, reserved = view.memory.lines[0]
    assert len(alloc.xData) == len(mem.ts) == 8220
    np.testing.assert_allclose(alloc.yData * view.memory.scale, mem.allocated)
    assert reserved is None  # the 2021 trace records no totals
    assert view.memory.unit == "GiB"  # binary units, like the summary's MiB


def _memory_trace(path):
    """A small trace whose reserved memory shrinks twice (allocator churn)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100,
               "dur": 300, "args": {"device": 0, "stream": 7}}]
    reserved = [100, 200, 150, 300, 100]
    for i, r in enumerate(reserved):
        events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 100 + 150 * i,
                       "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Bytes": 10,
                                          "Total Allocated": 50 * (i + 1) * 2**20,
                                          "Total Reserved": r * 2**20}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_reserved_drops_are_marked(qtbot, tmp_path):
    p = tmp_path / "churn.pt.trace.json.gz"
    _memory_trace(p)
    report = analyze(load(p))
    v = TimelineView()
    qtbot.addWidget(v)
    v.set_report(report)
    drops = v.memory.drops[0]
    x, y = drops.getData()
    assert len(x) == report.memory[0].reserved_drops == 2
    np.testing.assert_allclose(y * v.memory.scale, [150 * 2**20, 100 * 2**20])


def test_mouse_hover_and_double_click_fit(qtbot, view, nw0_report):
    gap = nw0_report.worst_gap("data_loading")
    view.zoom_to(*gap, pad=0.1)
    gpu = view.lane("gpu:0")
    mid = QPointF(((gap[0] + gap[1]) / 2 - view.t0_us) / 1000, gpu.y + 0.8 * gpu.h)
    pos = view.graphics.mapFromScene(view.view_box.mapViewToScene(mid))
    with qtbot.waitSignal(view.sig_hover_changed, timeout=5_000) as blocker:
        qtbot.mouseMove(view.graphics.viewport(), pos)
    assert "idle" in blocker.args[0] and "data loading" in blocker.args[0]
    assert view.hover_label.full_text() == blocker.args[0]
    # What a real double-click delivers: click, double-click, release.
    viewport = view.graphics.viewport()
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseDClick(viewport, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=pos)
    lo, hi = view.x_range_us()
    assert lo <= nw0_report.window[0] and hi >= nw0_report.window[1]


def test_a_step_name_that_does_not_fit_keeps_its_number(qapp):
    from PySide6.QtGui import QFont, QFontMetrics

    from stallscope.gui.views.lane_item import fitted

    metrics = QFontMetrics(QFont("DejaVu Sans", 9))
    full = metrics.horizontalAdvance("ProfilerStep#10")
    assert fitted("ProfilerStep#10", metrics, full + 1) == "ProfilerStep#10"
    assert fitted("ProfilerStep#10", metrics, full - 5) == "#10"
    assert fitted("aten::conv2d_long_name", metrics, 30).endswith("…")


def test_steps_in_one_row_are_named_alike(qapp):
    """hta_trace_diff_test at 1024x700 showed "#1010", then "ProfilerStep#1011" (a step a
    little longer), then "#1012": once one step shows its number alone, all of them do."""
    from PySide6.QtGui import QFont, QFontMetrics

    from stallscope.gui.views.lane_item import fitted_all

    metrics = QFontMetrics(QFont("DejaVu Sans", 9))
    full = metrics.horizontalAdvance("ProfilerStep#1011")
    names = ["ProfilerStep#1010", "ProfilerStep#1011", "aten::mm", "ProfilerStep#1012"]
    assert fitted_all(names, metrics, [full - 5, full + 9, full, full - 2]) == [
        "#1010", "#1011", "aten::mm", "#1012"]
    assert fitted_all(names, metrics, [full + 1] * 4) == names  # all fit: all whole


def test_communication_alone_has_its_own_colour_and_hover(qtbot, tmp_path):
    """In the two-GPU trace the all-reduce (500-800 µs) runs alone 580-700 and 780-800 µs: the
    device lane paints that time in the communication colour and the hover says so."""
    from stallscope.gui.colors import COMM_COLOR

    p = tmp_path / "two_gpus.pt.trace.json.gz"
    _two_gpu_trace(p)
    report = analyze(load(p))
    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(1200, 600)
    v.set_report(report)
    v.show()
    qtbot.waitExposed(v)
    gpu = v.lane("gpu:0")
    np.testing.assert_allclose(gpu.spec.extra["comm"], [[0.58, 0.70], [0.78, 0.80]])
    assert "comm" in v.legend.text() or "communication" in v.legend.text()
    busy = gpu.layer("comm")
    y = gpu.y + (busy.top + busy.height / 2) * gpu.h
    assert _close(_pixel(v, 0.64, y), COMM_COLOR)
    assert _close(_pixel(v, 0.54, y), BUSY_COLOR)  # the gemm beside the all-reduce: compute
    assert "communication, nothing else running" in v.describe_at(0.64, gpu.y + 0.3 * gpu.h)


# ------------------------------------------------------------------ restyle, not rebuild


def _items(view) -> dict:
    """Every lane item with the objects holding its data (coverages, memory lines)."""
    return {lane.key: (lane, [layer.coverage for layer in lane.layers]) for lane in view.lanes}


def _same_items(before: dict, view) -> None:
    for key, (lane, coverages) in before.items():
        assert view.lane(key) is lane, key
        assert all(a is b for a, b in zip(coverages, [ly.coverage for ly in lane.layers],
                                          strict=True)), key


def _shot(view):
    """The plots as painted once the pending layout (a wider label column) is done."""
    QApplication.processEvents()
    return view.graphics.grab().toImage()


def _fresh(qtbot, like, report):
    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(like.size())
    v.streams_button.setChecked(like.streams_button.isChecked())
    v.set_report(report)
    v.show()
    qtbot.waitExposed(v)
    return v


@pytest.mark.parametrize("name", ["kineto_nw0", "hta_nccl_parser_config_nccl_data"])
def test_a_theme_change_recolours_the_lanes_it_does_not_rebuild_them(qtbot, qapp, name):
    report = analyze(load(fixture_path(name)))
    theme.apply_theme(qapp, "light")
    try:
        view = _fresh(qtbot, TimelineView(), report)
        view.resize(1300, 700)
        qtbot.wait(10)
        before, lines = _items(view), dict(view.memory.lines)
        light = _shot(view)
        theme.apply_theme(qapp, "dark")
        _same_items(before, view)
        assert view.memory.lines == lines  # the memory series stay too
        steps = view.lane("steps")
        assert [ly.color for ly in steps.layers] == list(theme_steps := view.colors["steps"])
        assert QColor(theme_steps[0]).lightness() < 80
        # what the restyled view paints is what a view built under the dark theme paints
        dark = _shot(view)
        assert dark != light
        assert dark == _shot(_fresh(qtbot, view, report))
    finally:
        theme.apply_theme(qapp, "system")


def test_the_streams_toggle_moves_the_other_lanes_and_builds_streams_once(qtbot, view,
                                                                          nw0_report):
    before = _items(view)
    shown = _shot(view)
    view.streams_button.setChecked(True)
    _same_items(before, view)
    streams = {lane.key: lane for lane in view.lanes if lane.kind == "stream"}
    assert streams
    tops = np.cumsum([0.0] + [lane.h for lane in view.lanes])[:-1]
    assert [lane.y for lane in view.lanes] == pytest.approx(tops)  # stacked, no overlap
    assert _shot(view) == _shot(_fresh(qtbot, view, nw0_report))
    view.streams_button.setChecked(False)
    _same_items(before, view)
    assert _shot(view) == shown
    view.streams_button.setChecked(True)
    assert all(view.lane(key) is lane for key, lane in streams.items())


def test_the_other_threads_are_computed_once_per_report(qtbot):
    """Without a GPU the summary lists the threads the timeline draws: one computation."""
    from stallscope.gui.views.summary import SummaryPanel

    report = analyze(load(fixture_path("hta_cpu_only")))
    t0 = report.window[0]
    assert lane_model.thread_lanes(report, t0) is lane_model.thread_lanes(report, t0)
    v = TimelineView()
    qtbot.addWidget(v)
    v.set_report(report)
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(report)
    drawn = [lane.spec for lane in v.lanes if lane.kind == "thread"]
    assert len(drawn) == 2
    assert all(a is b for a, b in zip(drawn, lane_model.thread_lanes(report, t0), strict=True))
    assert analyze(load(fixture_path("hta_cpu_only"))) is not report  # a new report: new lanes
    assert lane_model.thread_lanes(analyze(load(fixture_path("hta_cpu_only"))), t0)[0] \
        is not drawn[0]


def test_launching_threads_are_the_analysis_launch_join(nw0_report):
    want = sorted({t for s in nw0_report.devices.values() for t in s.launch_tracks})
    assert lane_model.launch_tracks(nw0_report) == want and len(want) == 2
    backward = [lane for lane in lane_model.build_lanes(nw0_report) if lane.kind == "thread"]
    assert [lane.track for lane in backward] == [t for t in want
                                                  if t != nw0_report.main_track]


def test_the_lanes_kept_for_a_report_go_with_it():
    import gc
    import weakref

    report = analyze(load(fixture_path("hta_cpu_only")))
    lane_model.build_lanes(report, streams=True)
    gone = weakref.ref(report)
    del report
    gc.collect()
    assert gone() is None  # the lanes kept for it (per_report) hold no reference to it
