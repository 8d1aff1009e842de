"""Window first, then causes (issue 33), on twins of the shared real traces: a window that is
not steady training or a trace that recorded too little gets ONE card that says so, the cause
cards and ceilings are withheld (kept under their own JSON keys), and what the trace lacks is
said before any card."""

from __future__ import annotations

import json

import pytest
from fixture_twins import analyzed, complete, document
from synthetic_traces import Synth

from stallscope.core.analysis import analyze
from stallscope.core.render.export import report_to_json, report_to_markdown
from stallscope.core.render.text import render
from stallscope.core.trace import load


def _json(report) -> dict:
    return json.loads(report_to_json(report))


def _withholds(report, card_id: str) -> None:
    """One card, the cause cards folded, no ceiling quoted anywhere."""
    assert [a.id for a in report.advice] == [card_id]
    assert report.headlines == [] and report.quoted_ceilings == []
    data = _json(report)
    assert data["ceilings"] == [] and [a["id"] for a in data["advice"]] == [card_id]
    assert data["withheld_ceilings"] == [c.to_json() for c in report.ceilings]
    assert [a["id"] for a in data["withheld_advice"]] == [a.id for a in report.withheld]
    assert "up to " not in render(report).split("ceilings")[1].split("\n")[0]


def _steps(doc: dict) -> list[dict]:
    return sorted((e for e in complete(doc) if str(e["name"]).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def test_a_window_that_starts_inside_a_blocking_copy_waits_for_earlier_work(tmp_path):
    """kineto's ResNet-50 (num_workers=0) whose first step opens 1.5 windows earlier in a
    cudaMemcpy that waits while the GPU runs nothing this trace launched: work queued before
    the profiler started."""
    doc = document("kineto_nw0")
    first, last = _steps(doc)[0], _steps(doc)[-1]
    width = last["ts"] + last["dur"] - first["ts"]
    wait = 1.5 * width
    first["ts"] -= wait
    first["dur"] += wait
    doc["traceEvents"].append({"ph": "X", "cat": "Runtime", "name": "cudaMemcpy",
                               "pid": first["pid"], "tid": first["tid"], "ts": first["ts"] + 5,
                               "dur": wait - 10, "args": {}})
    report = analyzed(doc, tmp_path / "queued.json")
    assert report.window_kind == "queued_before"
    _withholds(report, "window")
    card = report.advice[0]
    assert card.title == "This window starts inside work queued before it"
    assert card.evidence.startswith("A 1.57 s cudaMemcpy begins 5.0 µs into the "
                                    "2.62 s window and covers 60.0% of it"), card.evidence
    assert card.culprits[0].name == "cudaMemcpy"
    assert "--wait 3" in card.fix and "schedule(wait=3" in card.fix
    assert "dataloader_bound" in [a.id for a in report.withheld]  # steady advice, folded


def test_a_sync_on_the_windows_own_work_is_not_queued_before(tmp_path):
    """The same copy beginning the window but running beside the GPU work the window itself
    launched (a sync stall, not earlier work): the window stays steady."""
    doc = document("kineto_nw0")
    first, last = _steps(doc)[0], _steps(doc)[-1]
    width = last["ts"] + last["dur"] - first["ts"]
    doc["traceEvents"].append({"ph": "X", "cat": "Runtime", "name": "cudaMemcpy",
                               "pid": first["pid"], "tid": first["tid"], "ts": first["ts"] + 5,
                               "dur": 0.6 * width, "args": {}})
    report = analyzed(doc, tmp_path / "stall.json")
    assert report.window_kind == "steady" and report.advisable


def test_a_last_step_cut_by_the_profilers_stop_is_said(tmp_path):
    """HTA's trace_diff control with its last step cut to a fifth, ending at the profiler's
    stop (its `Trace` span)."""
    doc = document("hta_trace_diff_control")
    last = _steps(doc)[-1]
    last["dur"] *= 0.2
    span = next(e for e in complete(doc) if e.get("cat") == "Trace")
    span["dur"] = last["ts"] + last["dur"] - span["ts"]
    report = analyzed(doc, tmp_path / "cut.json")
    assert report.window_kind == "tail_cut"
    _withholds(report, "window")
    card = report.advice[0]
    assert card.title == "This window's last step was cut by the profiler's stop"
    assert card.evidence.startswith(f"{last['name']} ends where the profiler stopped")
    assert card.culprits[0].name == last["name"]


def test_a_window_too_short_gets_one_card_and_no_ceiling(tmp_path):
    """kineto's ResNet-50 with every time divided by 10,000 (a 105 µs window), as kineto's own
    test traces are: the numbers stand, no advice does."""
    doc = document("kineto_nw0")
    for e in doc["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), (int, float)):
                e[key] = e[key] / 10_000.0
    report = analyzed(doc, tmp_path / "short.json")
    assert [lack.id for lack in report.lacks][:1] == ["too_short"]
    _withholds(report, "too_short")
    card = report.advice[0]
    assert card.evidence.startswith("The window is too short to judge: 104.9 µs holding "), \
        card.evidence
    assert "at least 1.00 ms and 8 events" in card.evidence
    assert _json(report)["lacks"][0] == {"id": "too_short", "text": report.lacks[0].text,
                                         "withholds": True}


def test_kernels_filtered_out_are_said_and_nothing_is_advised(tmp_path):
    """HTA's rank-0 V100 trace with its `kernel` events removed: launches without kernels."""
    doc = document("hta_rank-0")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]
    report = analyzed(doc, tmp_path / "nokernels.json")
    assert "kernels_filtered" in [lack.id for lack in report.lacks]
    _withholds(report, "kernels_filtered")
    assert "with its kernel in the trace: the device's work was filtered out" \
        in report.advice[0].evidence
    assert "ProfilerActivity.CUDA" in report.advice[0].fix


def test_range_profiler_spans_say_the_timing_is_distorted(tmp_path):
    """The same trace recorded by CUPTI's range profiler: one `cuda_profiler_range` per kernel."""
    doc = document("hta_rank-0")
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["cat"] = "cuda_profiler_range"
    report = analyzed(doc, tmp_path / "ranges.json")
    assert report.devices  # still device activity
    _withholds(report, "range_profiler")
    assert "(cuda_profiler_range), not kernels: the range profiler replays each kernel" \
        in report.advice[0].evidence


def test_without_cpu_operators_python_time_is_unknown(tmp_path):
    """HTA's df_index_resolver with its `cpu_op` events removed (runtime calls and kernels
    only): the Python cause is unknown, not a number, and gets no card or ceiling."""
    doc = document("hta_df_index_resolver")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cpu_op"]
    report = analyzed(doc, tmp_path / "noops.json")
    assert "no_cpu_ops" in [lack.id for lack in report.lacks]
    assert report.unknown_causes == ["python"]
    assert all(a.id != "python_overhead" for a in report.advice)
    assert all(c.cause != "python" for c in report.quoted_ceilings)
    text = render(report)
    assert "lacks   The trace has no CPU operators" in text
    assert f"  {'Python':<14}{'unknown':>14}  (no CPU operators recorded)" in text
    assert "python by annotation" not in text
    assert "Python\n" not in text.split("steps\n")[1]  # no step's top idle cause is Python
    md = report_to_markdown(report)
    assert "| unknown |" in md
    data = _json(report)
    assert data["unknown_causes"] == ["python"]
    assert "no_cpu_ops" in [lack["id"] for lack in data["lacks"]]


def test_a_large_uncovered_share_names_the_thread_that_covers_it(tmp_path):
    """No steps; a tokenizer thread runs 20 ms before the main thread launches 30 ms of
    kernels: 40% of the window is idle with no cause, and the lack names who ran then."""
    b = Synth()
    for k in range(10):
        b.x("tokenize", "cpu_op", 1_000_000.0 + 2000.0 * k, 1990.0, tid=5)
    for k in range(10):
        t0 = 1_020_000.0 + 3000.0 * k
        b.x("aten::mm", "cpu_op", t0, 1000.0)
        b.gpu(t0 + 20.0, 2980.0, t0 + 2.0)
    report = analyzed({"traceEvents": b.events}, tmp_path / "uncovered.json")
    assert report.main_thread == ("1", "1")
    lack = next(lack for lack in report.lacks if lack.id == "uncovered")
    assert lack.text.startswith("40.0% of the 50.00 ms window on GPU 0 is idle with no "
                                "recorded cause"), lack.text
    assert "thread pid 1 tid 5, not the main thread, runs then (99.5% of it; tokenize)" \
        in lack.text
    assert not lack.withholds and report.advisable


@pytest.mark.parametrize(("prefix", "kind", "first"), [
    ("hta_amd_trace", "startup", "window"), ("hta_triton", "one_step", "too_short"),
    ("hta_cpu_only", "one_step", "too_short"), ("kineto_nw0", "steady", "dataloader_bound"),
    ("tracelens_resnet", "steady", "exposed_comm")])
def test_every_report_says_its_window_first(real_trace, prefix, kind, first):
    """On the fixtures as they are: a window that is not advisable shows one card and quotes
    no ceiling; a steady one quotes its ceilings and folds nothing."""
    report = analyze(load(real_trace(prefix)))
    data = _json(report)
    assert data["window_kind"] == report.window_kind == kind
    assert report.advice[0].id == first
    if report.advisable:
        assert data["withheld_advice"] == [] and data["ceilings"]
    else:
        assert len(report.advice) == 1 and data["ceilings"] == []
