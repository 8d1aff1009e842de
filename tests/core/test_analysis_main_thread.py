"""Who the main thread is and what the window holds, by what the trace says (issue 33):
every `Trace`-category span is the profiler's own, whatever its name; an autograd engine
thread is never the main thread, even when it holds the most operator time; allocator calls
count over the whole window when there are no steps."""

from __future__ import annotations

import numpy as np
from fixture_twins import analyzed, complete, document, without_steps

from stallscope.core.kineto import Cat


def test_a_trace_span_of_any_name_is_left_out_of_the_window(tmp_path):
    """libkineto's own test traces name the span "Test trace (0)": it is still the profiler's."""
    doc = document("hta_mtia_inference")
    plain = analyzed(doc, tmp_path / "plain.json")
    span = next(e for e in complete(doc) if e.get("cat") == "Trace")
    span["name"] = "Test trace (0)"
    span["ts"] -= 1_000_000.0  # the span now starts 1 s before any other event
    span["dur"] += 2_000_000.0
    renamed = analyzed(doc, tmp_path / "renamed.json")
    assert renamed.trace.cat[renamed.trace.names.index("Test trace (0)") ==
                             renamed.trace.name].tolist() == [Cat.PROFILER]
    assert renamed.window == plain.window
    assert renamed.window[0] > span["ts"] + 900_000.0


def _op_time(report, pid: str, tid: str) -> float:
    t = report.trace
    k = t.tracks.index((pid, tid))
    ops = (t.track == k) & (t.cat == Cat.CPU_OP)
    return float(t.dur[ops].sum())


def test_the_autograd_engine_thread_is_never_the_main_thread(tmp_path):
    """TraceLens' MI300 trace without its ProfilerStep events: the backward thread (639) holds
    the most operator time, but it runs autograd::engine::evaluate_function ops; the main
    thread is the process's own (tid 542 == pid), with the DataLoader annotations."""
    report = analyzed(without_steps(document("tracelens_resnet")), tmp_path / "nosteps.json")
    assert not report.steps
    assert _op_time(report, "542", "639") > 2 * _op_time(report, "542", "542")
    assert report.main_thread == ("542", "542")
    # the backward ops are charged as backward (a launching thread), not as the main thread's
    dev = next(iter(report.devices))
    assert report.devices[dev].idle_by_cause["backward"] > 0


def test_an_allocator_storm_without_steps_gets_its_card(tmp_path):
    """The same step-less twin with 400 hipFree calls of 50 µs each on the main thread (a
    ResNet on MI300 freeing after every iteration): counted over the whole window."""
    doc = without_steps(document("tracelens_resnet"))
    ops = [e for e in complete(doc) if e.get("tid") == 542 and e.get("cat") == "cpu_op"]
    lo = min(e["ts"] for e in ops)
    doc["traceEvents"] += [{"ph": "X", "cat": "cuda_runtime", "name": "hipFree", "pid": 542,
                            "tid": 542, "ts": lo + 100.0 * k, "dur": 50.0,
                            "args": {"correlation": -1}} for k in range(400)]
    report = analyzed(doc, tmp_path / "frees.json")
    card = next(a for a in report.advice if a.id == "allocator_churn")
    assert "400 hipMalloc/hipFree calls ran in the window (no steps recorded)" in card.evidence
    assert card.saving_us == np.float64(400 * 50.0)
    assert "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True" in card.fix
