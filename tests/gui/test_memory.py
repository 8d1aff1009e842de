"""The memory plot names devices as the trace does ("GPU 0", "MTIA 17"), like the lanes."""

from __future__ import annotations

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
