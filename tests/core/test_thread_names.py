"""The profiler's own thread names (`ph: "M"` thread_name metadata) are read, and a thread it
names as an engine thread (`pt_autograd_0`) is never the main thread, even when it holds most
of the operator time and none of it is the engine's evaluate_function (issue 33). A twin
without the names shows they are what decides."""

from __future__ import annotations

import json

from fixture_traces import fixture_path

from stallscope.core.analysis import analyze
from stallscope.core.trace import load


def _trace(path, named: bool):
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 10, "tid": 10,
            "ts": 1000.0 + 100 * i, "dur": 5.0} for i in range(10)]
    ops += [{"ph": "X", "cat": "cpu_op", "name": "aten::convolution_backward", "pid": 10,
             "tid": 11, "ts": 1010.0 + 100 * i, "dur": 80.0} for i in range(10)]
    kernels = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                "ts": 1020.0 + 100 * i, "dur": 50.0, "args": {"device": 0, "stream": 7}}
               for i in range(10)]
    meta = [{"ph": "M", "name": "thread_name", "pid": 10, "tid": 10,
             "args": {"name": "thread 10 (python3)"}},
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11,
             "args": {"name": "thread 11 (python3)"}},
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11,  # renamed, as Kineto does
             "args": {"name": "thread 11 (pt_autograd_0)"}}] if named else []
    path.write_text(json.dumps({"traceEvents": meta + ops + kernels}))
    return load(path)


def test_a_thread_named_pt_autograd_is_never_the_main_thread(tmp_path):
    named = _trace(tmp_path / "named.json", True)
    assert named.thread_names[("10", "11")] == "thread 11 (pt_autograd_0)"  # the last name
    assert analyze(named).to_json()["main_thread"] == {"pid": "10", "tid": "10"}
    bare = _trace(tmp_path / "bare.json", False)
    assert bare.thread_names == {}
    assert analyze(bare).to_json()["main_thread"] == {"pid": "10", "tid": "11"}  # op time


def test_real_traces_carry_their_thread_names():
    trace = load(fixture_path("hta_amd"))
    names = set(trace.thread_names.values())
    assert "thread 598009 (pt_autograd_0)" in names and "thread 597913 (python3)" in names
    assert analyze(trace).to_json()["main_thread"] == {"pid": "597913", "tid": "597913"}
