"""The memory plot names devices as the trace does ("GPU 0", "MTIA 17"), like the lanes."""

from __future__ import annotations

import json

import numpy as np
from fixture_traces import fixture_path

from stallscope.core.analysis import analyze
from stallscope.core.trace import load
from stallscope.gui import lanes
from stallscope.gui.views.memory import MemoryPlot


def test_memory_hover_names_the_device_by_the_traces_kind(real_trace):
    report = analyze(load(real_trace("kineto_nw0")))
    report.trace.device_kind = "MTIA"  # the same samples, named as an MTIA trace names them
    plot = MemoryPlot()
    lo, hi = report.window
    plot.set_memory(report.memory, lo, (hi - lo) / 1000.0, device_label=report.trace.device_label)
    x, _alloc, _reserved = plot._series[0]
    text = plot.describe(float(np.median(x)))
    assert text is not None and text.startswith("MTIA 0: allocated ") and "GPU" not in text


def test_device_lanes_are_named_by_the_trace():
    report = analyze(load(fixture_path("hta_mtia_inference_rank_0")))
    specs = lanes.device_lanes(report, report.window[0])
    assert specs and all(s.label == report.trace.device_label(d) for d, s in specs.items())
    assert all(s.label.startswith("MTIA ") for s in specs.values())


def test_devices_are_plotted_and_described_in_numeric_order(tmp_path):
    """2 before 10 before 11 (text order would put 10 and 11 before 2)."""
    events = [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": d, "tid": 7, "ts": 0,
               "dur": 500, "args": {"device": d, "stream": 7}} for d in (10, 2)]
    events += [{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 10 * k,
                "args": {"Device Type": 1, "Device Id": d, "Bytes": 1,
                         "Total Allocated": 2**20 * (d + k), "Total Reserved": 2**21 * d}}
               for d in (11, 10, 2) for k in range(3)]
    path = tmp_path / "three.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = analyze(load(path))
    plot = MemoryPlot()
    plot.set_memory(report.memory, report.window[0], 1.0, device_label=report.trace.device_label)
    assert list(plot.lines) == list(plot.drops) == [2, 10, 11]
    legend = [label.text for _sample, label in plot.legend.items]
    assert [t for t in legend if "allocated" in t] == [
        "allocated GPU 2", "allocated GPU 10", "allocated GPU 11"]
    text = plot.describe(0.01)
    assert text is not None and [part.split(":")[0] for part in text.split(" | ")] == [
        "GPU 2", "GPU 10", "GPU 11"]
    assert "GPU 10: allocated 11.0 MiB" in text


def test_grid_lines_follow_the_bottom_axis_ticks_after_a_pan(qtbot):
    """The grid is one item drawn from the axes' ticks: after a pan, a rendered column at a major
    x tick is tinted by the grid line, and a column between ticks is plain background."""
    import pyqtgraph as pg
    from PySide6.QtGui import QColor

    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.setBackground("w")
    widget.resize(800, 300)
    plot = MemoryPlot()
    widget.addItem(plot)
    plot.setYRange(0, 100, padding=0)
    plot.setXRange(1000, 2000, padding=0)
    widget.show()
    image = widget.grab().toImage()
    vb = plot.getViewBox()
    (_major, majors), (minor, _minors), *_ = plot.getAxis("bottom").tickValues(
        1000, 2000, vb.width())
    tick = float(majors[1])
    top = vb.mapViewToScene(pg.Point(tick, 87.3))
    between = vb.mapViewToScene(pg.Point(tick + minor / 2, 87.3))
    on_line = QColor(image.pixel(round(top.x()), round(top.y())))
    off_line = QColor(image.pixel(round(between.x()), round(between.y())))
    assert off_line.lightness() == 255
    assert on_line.lightness() < 250
