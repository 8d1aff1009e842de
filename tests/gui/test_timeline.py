"""Timeline: interval merging/LOD against brute force, and what the lanes draw on real traces."""

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

from stallscope.core import intervals as iv
from stallscope.core.analysis import CAUSES, analyze
from stallscope.core.trace import load
from stallscope.gui.colors import CAUSE_COLORS, tint
from stallscope.gui.views.timeline import (
    PHASE_ORDER,
    IntervalPyramid,
    TimelineView,
    merge_close,
)


def brute_union(starts, ends):
    out = []
    for s, e in sorted(zip(starts, ends, strict=True)):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out).reshape(-1, 2)


def brute_merge(iv, gap):
    out = []
    for s, e in iv:
        if out and s - out[-1][1] < gap:
            out[-1][1] = e
        else:
            out.append([s, e])
    return np.array(out).reshape(-1, 2)


@pytest.mark.parametrize("seed", range(5))
def test_union_and_merge_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    starts = rng.uniform(0, 1000, 400)
    ends = starts + rng.exponential(3, 400)
    u = iv.union(iv.as_intervals(starts, ends))
    np.testing.assert_allclose(u, brute_union(starts, ends))
    s, e = u[:, 0], u[:, 1]
    gap = float(rng.uniform(0.1, 5))
    ms, me = merge_close(s, e, gap)
    np.testing.assert_allclose(np.column_stack([ms, me]), brute_merge(np.column_stack([s, e]), gap))


@pytest.mark.parametrize("seed", range(3))
def test_pyramid_visible_equals_merging_the_clipped_full_set(seed):
    """The LOD shortcut must draw exactly what merging all intervals would draw."""
    rng = np.random.default_rng(100 + seed)
    n = 8_000
    starts = np.cumsum(rng.exponential(10, n))
    ends = starts + rng.exponential(8, n) * (rng.random(n) < 0.7)
    pyr = IntervalPyramid(starts, ends)
    assert len(pyr.levels) > 3, "a big lane should get coarser levels"
    full = np.column_stack([pyr.starts, pyr.ends])
    for _ in range(10):
        lo = rng.uniform(0, starts[-1])
        hi = lo + rng.uniform(1, starts[-1] / 3)
        merge = float(10 ** rng.uniform(-1, 3))
        s, e = pyr.visible(lo, hi, merge)
        merged = brute_merge(full, merge)  # merge everything, then look at the view
        expect = np.clip(merged[(merged[:, 1] >= lo) & (merged[:, 0] <= hi)], lo, hi)
        got = np.clip(np.column_stack([s, e]), lo, hi)
        assert len(got) == len(expect)
        if len(got):
            # Inner edges are exact; the outer two may differ by less than one merge gap
            # (a block cut by the view edge), which is below 3 px on screen.
            np.testing.assert_allclose(got[1:, 0], expect[1:, 0])
            np.testing.assert_allclose(got[:-1, 1], expect[:-1, 1])
            assert abs(got[0, 0] - expect[0, 0]) < merge
            assert abs(got[-1, 1] - expect[-1, 1]) < merge
        np.testing.assert_allclose(pyr.density(s, e) * (e - s),
                                   [_covered(full, a, b) for a, b in zip(s, e, strict=True)],
                                   rtol=1e-9, atol=1e-6)


def _covered(full, a, b):
    return float(np.clip(np.minimum(full[:, 1], b) - np.maximum(full[:, 0], a), 0, None).sum())


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


def test_lanes_of_a_real_trace(view, nw0_report):
    report = nw0_report
    labels = [lane.label for lane in view.lanes]
    assert len(view.lanes) == 1 + len(report.devices) + len(PHASE_ORDER)
    assert labels[0] == "steps"
    assert labels[1] == "GPU 0"
    gpu = view.lanes[1]
    stats = report.devices["0"]
    # Every idle gap of the analysis is a shaded gap of the lane, at the same place.
    assert len(gpu.gaps) == stats.idle_gaps == 8375
    assert np.isclose((gpu.gaps[:, 1] - gpu.gaps[:, 0]).sum() * 1000, stats.idle_us)
    shaded = sum(len(gpu.layer(c).pyramid) for c in CAUSES)
    assert shaded == len(stats.cause_spans)
    # A full-window paint draws far fewer rectangles than events (merging), but draws.
    view.grab()
    assert 0 < gpu.last_drawn["busy"] <= view.width()
    assert gpu.last_drawn["data_loading"] > 0


def test_step_lane_labels_and_zoom_to_step(view, nw0_report):
    steps = nw0_report.steps
    assert view.lanes[0].texts[2] == [s.name for s in steps]
    view.zoom_to_step(2)
    lo, hi = view.x_range_us()
    step = steps[2]
    width = step.dur_us
    assert lo == pytest.approx(step.start_us - 0.02 * width, abs=1)
    assert hi == pytest.approx(step.start_us + 1.02 * width, abs=1)
    view.fit()
    lo, hi = view.x_range_us()
    assert lo <= nw0_report.window[0] and hi >= nw0_report.window[1]


def test_worst_data_loading_gap_is_painted_in_its_cause_colour(view, nw0_report):
    gap = nw0_report.worst_gap("data_loading")
    view.zoom_to(*gap, pad=0.1)
    image = view.graphics.grab().toImage()
    gpu = view.lanes[1]
    mid_x = (gap[0] + gap[1]) / 2
    center = view.view_box.mapViewToScene(QPointF((mid_x - view.t0_us) / 1000, gpu.row + 0.5))
    pixel = image.pixelColor(int(center.x()), int(center.y()))
    want = QColor(tint(CAUSE_COLORS["data_loading"], 0.35))  # lighten() in the light theme
    assert abs(pixel.red() - want.red()) < 12 and abs(pixel.green() - want.green()) < 12, \
        (pixel.name(), want.name())


def test_hover_names_the_gap_and_the_kernel(view, nw0_report):
    gap = nw0_report.worst_gap("data_loading")
    x = ((gap[0] + gap[1]) / 2 - view.t0_us) / 1000
    text = view.describe_at(x, 1.5)
    assert "idle gap" in text and "data loading" in text
    trace = nw0_report.trace
    k = int(np.flatnonzero(trace.device == 0)[100])
    x = ((trace.start[k] + trace.end[k]) / 2 - view.t0_us) / 1000
    assert trace.names[trace.name[k]] in view.describe_at(x, 1.5)


def test_memory_curve_holds_every_sample(view, nw0_report):
    mem = nw0_report.memory["0"]
    alloc, reserved = view.memory.lines["0"]
    assert len(alloc.xData) == len(mem.ts) == 8220
    np.testing.assert_allclose(alloc.yData * view.memory.scale, mem.allocated)
    assert reserved is None  # the 2021 trace records no totals


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
    drops = v.memory.drops["0"]
    x, y = drops.getData()
    assert len(x) == report.memory["0"].reserved_drops == 2
    np.testing.assert_allclose(y * v.memory.scale, [150 * 2**20, 100 * 2**20])


def test_mouse_hover_and_double_click_fit(qtbot, view, nw0_report):
    gap = nw0_report.worst_gap("data_loading")
    view.zoom_to(*gap, pad=0.1)
    gpu = view.lanes[1]
    mid = QPointF(((gap[0] + gap[1]) / 2 - view.t0_us) / 1000, gpu.row + 0.5)
    pos = view.graphics.mapFromScene(view.view_box.mapViewToScene(mid))
    with qtbot.waitSignal(view.sig_hover_changed, timeout=5_000) as blocker:
        qtbot.mouseMove(view.graphics.viewport(), pos)
    assert "idle gap" in blocker.args[0] and "data loading" in blocker.args[0]
    assert view.hover_label.text() == blocker.args[0]
    # What a real double-click delivers: click, double-click, release.
    viewport = view.graphics.viewport()
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseDClick(viewport, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=pos)
    lo, hi = view.x_range_us()
    assert lo <= nw0_report.window[0] and hi >= nw0_report.window[1]
