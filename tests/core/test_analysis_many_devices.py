"""A trace with many devices is analysed in time linear in its events (issue 29: 1,000 devices
took 269 s): core/analysis/by_device.py looks each device's events up instead of masking the
whole trace per device. These tests check the lookups give what the masks gave; the time is in
tests/bench/bench_hostile.py (--third-pass)."""

from __future__ import annotations

import json

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.analysis import analyze
from stallscope.core.analysis.by_device import index_for
from stallscope.core.analysis.threads import launch_tracks, roles, union_of
from stallscope.core.trace import load


def _trace(tmp_path, devices: int = 40, kernels: int = 6):
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
               "tid": 1, "ts": s * 10_000, "dur": 10_000} for s in range(3)]
    for dev in range(devices):
        for k in range(kernels):
            corr = dev * kernels + k
            tid = 1 if k % 3 else 2 + dev % 4  # some launches on helper threads
            events += [
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": tid, "ts": 12 + 700 * k + dev, "dur": 5, "args": {"correlation": corr}},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": tid,
                 "ts": 10 + 700 * k + dev, "dur": 9},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
                 "tid": tid, "ts": 300 + 700 * k, "dur": 20},
                {"ph": "X", "cat": "kernel", "name": "ncclAllReduce" if k == 5 else "gemm",
                 "pid": dev, "tid": 7, "ts": 15 + 700 * k + 3 * dev, "dur": 200 + dev,
                 "args": {"device": dev, "stream": 7, "correlation": corr}}]
    path = tmp_path / "devices.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return load(path)


def test_device_lookups_match_the_whole_trace_masks(tmp_path):
    trace = _trace(tmp_path)
    r = roles(trace)
    ix = index_for(trace, r)
    assert index_for(trace, r) is ix  # built once per analysis
    for dev in (0, 1, 17, 39):
        mask = r.gpu & (trace.device == dev)
        ops = ix.ops(dev)
        assert np.array_equal(ops, np.flatnonzero(mask))
        tracks = launch_tracks(trace, r, mask)
        assert np.array_equal(ix.launch_tracks(ops), tracks)
        assert len(tracks) == 2  # the main thread and one helper
        helpers = np.isin(trace.track, tracks) & r.cpu_op
        assert np.array_equal(ix.on_tracks(ix.cpu_ops, tracks), np.flatnonzero(helpers))
        syncs = np.isin(trace.track, tracks) & r.sync
        assert np.array_equal(ix.on_tracks(ix.syncs, tracks), np.flatnonzero(syncs))
        assert np.array_equal(union_of(trace, ops, r.lo, r.hi),
                              union_of(trace, mask, r.lo, r.hi))
    assert len(ix.ops(1000)) == 0  # no such device


def test_every_device_is_analysed_with_its_own_figures(tmp_path):
    trace = _trace(tmp_path)
    report = analyze(trace)
    assert len(report.devices) == 40
    for dev, stats in report.devices.items():
        assert stats.busy_us == iv.length(stats.busy) > 0
        assert abs(sum(stats.idle_by_cause.values()) - stats.idle_us) < 1e-6
        assert stats.comm_us > 0 and len(stats.launch_tracks) == 2, dev
