"""The timeline's painted areas are time: at overview each idle cause's share of the painted
cause band is its share of the idle time, the busy band is filled as much as the GPU was busy;
zoomed in, a tiny gap inside a busy stretch is whole columns of its colour. Pixels are counted
by colour on real renders, in the light and the dark theme."""

from __future__ import annotations

import gzip
import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor, QImage

from stallscope.core.analysis import analyze
from stallscope.core.causes import CAUSES
from stallscope.core.trace import load
from stallscope.gui import theme
from stallscope.gui.colors import BUSY_COLOR, CAUSE_COLORS, COMM_COLOR
from stallscope.gui.views.lane_item import stack_rows
from stallscope.gui.views.timeline import TimelineView

TRACES = ("kineto_nw0", "hta_nccl_parser_config_nccl_data")


@pytest.fixture(scope="module")
def reports():
    return {name: analyze(load(fixture_path(name))) for name in TRACES}


@pytest.fixture(params=("light", "dark"))
def themed(request, qapp):
    theme.apply_theme(qapp, request.param)
    yield request.param
    theme.apply_theme(qapp, "system")


def pixels(image: QImage) -> np.ndarray:
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    data = np.frombuffer(rgb.constBits(), np.uint8, count=rgb.sizeInBytes())
    return data.reshape(rgb.height(), rgb.bytesPerLine())[:, : 3 * rgb.width()].reshape(
        rgb.height(), rgb.width(), 3).copy()


def band(view: TimelineView, lane, layer_key: str) -> np.ndarray:
    """The pixels of one band of a lane over the analysis window (rows x columns x 3)."""
    layer = lane.layer(layer_key)
    top = view.view_box.mapViewToScene(QPointF(0.0, lane.y + layer.top * lane.h))
    bottom = view.view_box.mapViewToScene(
        QPointF(view.span_ms, lane.y + (layer.top + layer.height) * lane.h))
    image = pixels(view.graphics.grab().toImage())
    return image[round(top.y()):round(bottom.y()), round(top.x()):round(bottom.x())]


def count(px: np.ndarray, color: str) -> int:
    c = QColor(color)
    want = np.array([c.red(), c.green(), c.blue()], np.int16)
    return int((np.abs(px.astype(np.int16) - want).max(axis=2) <= 2).sum())


def overview(qtbot, report, size=(1400, 900)) -> TimelineView:
    view = TimelineView()
    qtbot.addWidget(view)
    view.resize(*size)
    view.set_report(report)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.mark.parametrize("name", TRACES)
def test_each_cause_paints_its_share_of_the_idle_time_at_overview(qtbot, reports, themed,
                                                                  name):
    report = reports[name]
    view = overview(qtbot, report)
    for dev, stats in report.devices.items():
        lane = view.lane(f"gpu:{dev}")
        px = band(view, lane, CAUSES[0])
        painted = {c: count(px, CAUSE_COLORS[c]) for c in CAUSES}
        total = sum(painted.values())
        assert total > 0
        # the band is filled as much as the GPU was idle
        assert total / px.shape[0] / px.shape[1] == pytest.approx(
            stats.idle_us / (stats.idle_us + stats.busy_us), abs=0.02)
        for cause in CAUSES:
            truth = stats.idle_by_cause.get(cause, 0.0) / stats.idle_us
            assert painted[cause] / total == pytest.approx(truth, abs=0.005), (
                f"{name} {themed}: {cause} paints {painted[cause] / total:.1%} of the idle "
                f"band, has {truth:.1%} of the idle time")


@pytest.mark.parametrize("name", TRACES)
def test_the_busy_band_is_filled_as_much_as_the_gpu_was_busy(qtbot, reports, themed, name):
    report = reports[name]
    view = overview(qtbot, report)
    for dev, stats in report.devices.items():
        lane = view.lane(f"gpu:{dev}")
        px = band(view, lane, "busy")
        busy, comm = count(px, BUSY_COLOR), count(px, COMM_COLOR)
        area = px.shape[0] * px.shape[1]
        assert (busy + comm) / area == pytest.approx(stats.utilization, abs=0.02)
        assert comm / area == pytest.approx(stats.exposed_comm_us / (stats.busy_us
                                                                     + stats.idle_us), abs=0.01)
        if name.startswith("hta_nccl"):
            assert comm > 0  # communication with nothing else running has its own colour
        # nothing in the band but the busy colours and the background (no paler or darker
        # "partly busy" shade): a partly busy column is partly filled
        bg = count(px, view.colors["bg"])
        assert (busy + comm + bg) / area > 0.99


def _duty_cycle_trace(path, busy_us=13.0, period_us=100.0, n=2000):
    """One 200 ms step on one GPU, a 13 µs kernel every 100 µs: 13% busy all along."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": n * period_us}]
    for i in range(n):
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                       "ts": i * period_us + 20, "dur": busy_us,
                       "args": {"device": 0, "stream": 7}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_a_gpu_busy_13_percent_fills_13_percent_of_each_column(qtbot, tmp_path, themed):
    path = tmp_path / "duty.pt.trace.json.gz"
    _duty_cycle_trace(path)
    report = analyze(load(path))
    assert report.devices[0].utilization == pytest.approx(0.13, abs=0.001)
    view = overview(qtbot, report, size=(1024, 700))
    px = band(view, view.lane("gpu:0"), "busy")
    filled = (np.abs(px.astype(np.int16) - np.array(QColor(BUSY_COLOR).getRgb()[:3]))
              .max(axis=2) <= 2)
    rows = px.shape[0]
    per_column = filled.sum(axis=0)[2:-2]  # the window's edge columns are cut by the view
    # no full-height pale block: a column holds 2 or 3 kernels of 13 µs, 11% to 18% of its time
    assert per_column.max() <= 0.2 * rows
    assert per_column.mean() == pytest.approx(0.13 * rows, rel=0.1)


def test_a_tiny_gap_in_a_busy_stretch_is_whole_columns_zoomed_in(qtbot, reports, themed):
    report = reports["kineto_nw0"]
    stats = report.devices[0]
    spans = stats.spans_of("gpu_wait")
    k = int(np.argmin(np.abs((spans[:, 1] - spans[:, 0]) - 5.0)))  # a gap of about 5 µs
    lo, hi = spans[k]
    assert hi - lo < 20
    view = overview(qtbot, report)
    view.zoom_to(lo, hi, pad=2.0)  # the gap is a fifth of the view
    lane = view.lane("gpu:0")
    px = band(view, lane, "gpu_wait")  # rows of the cause band, all columns of the view
    image = pixels(view.graphics.grab().toImage())
    x = view.view_box.mapViewToScene(QPointF(((lo + hi) / 2 - view.t0_us) / 1000, 0)).x()
    layer = lane.layer("gpu_wait")
    y = view.view_box.mapViewToScene(
        QPointF(0, lane.y + (layer.top + layer.height / 2) * lane.h)).y()
    assert px.shape[0] > 5
    column = image[round(y) - 2:round(y) + 2, round(x)]
    assert count(column[:, None, :], CAUSE_COLORS["gpu_wait"]) == len(column)


@pytest.mark.parametrize("seed", range(4))
def test_stacked_rows_add_up_to_each_layers_time(seed):
    """stack_rows: per column each layer within about a pixel of its exact height, none where
    it has no time, each column filled to its rounded total; over all columns each layer's
    pixels are its time (within 1%)."""
    rng = np.random.default_rng(seed)
    layers, columns, rows = 5, 900, 23
    raw = rng.random((layers, columns)) ** 3 * (rng.random((layers, columns)) < 0.6)
    shares = raw / np.maximum(raw.sum(axis=0), 1.0) * rng.random(columns)
    bounds = stack_rows(shares, rows)
    heights = np.diff(bounds, axis=0)
    exact = shares * rows
    assert (heights >= 0).all() and (heights[exact == 0] == 0).all()
    assert np.abs(heights - exact).max() <= 1.5
    np.testing.assert_array_equal(bounds[-1], np.rint(exact.sum(axis=0)))
    np.testing.assert_allclose(heights.sum(axis=1), exact.sum(axis=1), rtol=0.01, atol=2.0)
