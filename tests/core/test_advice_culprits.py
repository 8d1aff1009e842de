"""Issue 22 on small synthetic traces: each card names its culprits (the op, the runtime call,
the user's frame), the window's kind is said first, collectives on other threads are
communication, and the fixes carry the trace's own names and numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from synthetic_traces import LAUNCH_US, MAIN_TID, Synth, cause_trace, steps

from stallscope.core.analysis import analyze
from stallscope.core.analysis.nesting import owner_at
from stallscope.core.render.export import report_to_json
from stallscope.core.render.text import render
from stallscope.core.trace import load

STEP = 40_000.0


def _report(path):
    return analyze(load(path))


def _card(report, rule_id):
    return next(a for a in report.advice if a.id == rule_id)


# ----------------------------------------------------------------------------- nesting

def test_owner_at_finds_the_innermost_and_the_outermost_interval():
    starts = np.array([0.0, 10.0, 12.0, 50.0])
    ends = np.array([100.0, 40.0, 20.0, 60.0])
    points = np.array([5.0, 11.0, 15.0, 55.0, 100.0, -1.0])
    assert owner_at(starts, ends, points).tolist() == [0, 1, 2, 3, -1, -1]
    assert owner_at(starts, ends, points, innermost=False).tolist() == [0, 0, 0, 0, -1, -1]


# ----------------------------------------------------------------------------- sync

def _sync_trace(path, readback: bool = True, frames: bool = True):
    """Per step: the user's frame (train.py) -> torch's frame -> aten::item ->
    _local_scalar_dense -> cudaMemcpyAsync (a DtoH copy) + cudaStreamSynchronize for 30% of
    the step; the kernel after it."""
    b = Synth()
    g = 0.3 * STEP
    for t0 in steps(b, 10, STEP):
        end = t0 + g - LAUNCH_US
        if frames:
            b.x("train.py(57): train_step", "python_function", t0, g)
            b.x("/usr/lib/python3.12/site-packages/torch/_tensor.py(40): wrapped",
                "python_function", t0 + 1, g - 3)
        op = "aten::item" if readback else "aten::to"
        b.x(op, "cpu_op", t0 + 2, end - t0 - 3)
        b.x("aten::_local_scalar_dense" if readback else "aten::copy_", "cpu_op", t0 + 3,
            end - t0 - 5)
        b.corr += 1
        b.x("cudaMemcpyAsync", "cuda_runtime", t0 + 4, 3.0, correlation=b.corr)
        b.x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", t0 + 5, 2.0, pid=0, tid=7,
            device=0, stream=7, correlation=b.corr)
        b.x("cudaStreamSynchronize", "cuda_runtime", t0 + 8, end - t0 - 14)
        b.gpu(t0 + g, STEP - g, end)
    return b.save(path)


def test_sync_names_the_call_the_op_and_the_users_line(tmp_path):
    report = _report(_sync_trace(tmp_path / "sync.json"))
    card = report.advice[0]
    assert card.id == "sync_stalls"
    top = card.culprits[0]
    assert (top.name, top.kind, top.count) == ("cudaStreamSynchronize", "runtime", 10)
    assert top.covered_us == pytest.approx(10 * (0.3 * STEP - LAUNCH_US - 14), rel=1e-6)
    assert top.detail == "issued by aten::item; copies Memcpy DtoH (Device -> Pageable)"
    assert top.frame == "train.py(57): train_step"  # not torch's own frame inside it
    assert card.fix.startswith("aten::item at train.py(57): train_step reads a GPU value back "
                               "to Python every step")
    text = render(report)
    assert "culprit: cudaStreamSynchronize ×10" in text and "at train.py(57)" in text


def test_sync_of_a_copy_says_cpu_and_without_frames_names_no_line(tmp_path):
    report = _report(_sync_trace(tmp_path / "copy.json", readback=False, frames=False))
    card = report.advice[0]
    assert card.culprits[0].frame == ""
    assert card.fix.startswith("aten::to copies a GPU tensor to the host and waits for it "
                               "(.cpu(), .numpy(), .tolist())"), card.fix


# ----------------------------------------------------------------------------- window

def _startup_trace(path):
    """Two steps; the first holds one 30 ms cudaDeviceGetStreamPriorityRange inside aten::to."""
    b = Synth()
    for k, t0 in enumerate(steps(b, 2, STEP)):
        if k == 0:
            b.x("aten::to", "cpu_op", t0 + 10, 30_100.0)
            b.x("cudaDeviceGetStreamPriorityRange", "cuda_runtime", t0 + 20, 30_000.0)
        b.gpu(t0 + 31_000, 5_000.0, t0 + 30_500)
    return b.save(path)


def test_a_startup_window_is_said_first_and_its_ceilings_withheld(tmp_path):
    report = _report(_startup_trace(tmp_path / "startup.json"))
    assert report.window_kind == "startup"
    # the window's one card comes first; the cause cards and the headline are withheld
    assert [a.id for a in report.advice] == ["window"] and report.headlines == []
    head = report.advice[0]
    assert head.title == "This window is start-up, not steady training"
    assert head.evidence.startswith("One cudaDeviceGetStreamPriorityRange call takes 30.00 ms, "
                                    "37.5% of the 80.00 ms window, inside aten::to: first use")
    assert head.evidence.endswith("One-off: cudaDeviceGetStreamPriorityRange 30.00 ms (37.5%).")
    assert head.saving_us == 30_000.0
    assert "--wait 3" in head.fix
    assert report.withheld and all(a.id != "window" for a in report.withheld)
    text = render(report)
    assert text.index("!! This window is start-up") < text.index("GPU 0: utilization")
    assert "!! GPU 0 is busy only" not in text
    assert "up to" not in text.split("ceilings")[1].split("\n")[0]
    assert "ceilings: withheld for a start-up window" in text
    data = json.loads(report_to_json(report))
    assert data["window_kind"] == "startup" and data["ceilings"] == []
    assert data["withheld_ceilings"] and data["withheld_advice"]


def test_the_first_op_of_a_kind_far_longer_than_the_rest_is_warm_up(tmp_path):
    b = Synth()
    for k, t0 in enumerate(steps(b, 3, STEP)):
        conv = 30_000.0 if k == 0 else 500.0
        b.x("aten::conv2d", "cpu_op", t0 + 10, conv)
        b.gpu(t0 + 10 + conv + 100, 5_000.0, t0 + 10 + conv)
    report = _report(b.save(tmp_path / "first.json"))
    assert report.window_kind == "startup"
    assert report.window_finding.evidence.startswith(
        "The first aten::conv2d takes 30.00 ms, 25.0% of the 120.00 ms window; the 2 later "
        "ones take 500.0 µs (median): first-use warm-up"), report.window_finding.evidence


def test_a_steady_trace_is_steady(tmp_path):
    report = _report(cause_trace(tmp_path / "steady.json", "cpu_ops", 0.3))
    assert report.window_kind == "steady" and report.window_finding is None
    assert all(h.id != "window" for h in report.headlines)
    assert "ceilings (how much faster" in render(report)


def _capture_trace(path):
    """ROCm: a hipStreamBeginCapture ... hipGraphInstantiateWithFlags over half of each step."""
    b = Synth()
    for t0 in steps(b, 2, STEP):
        b.x("hipStreamBeginCapture", "cuda_runtime", t0 + 10, 5.0)
        b.x("hipLaunchKernel", "cuda_runtime", t0 + 100, 5.0)
        b.x("hipStreamEndCapture", "cuda_runtime", t0 + 15_000, 5.0)
        b.x("hipGraphInstantiateWithFlags", "cuda_runtime", t0 + 15_010, 5_000.0)
        b.corr += 1
        b.x("hipGraphLaunch", "cuda_runtime", t0 + 25_000, 5.0, correlation=b.corr)
        b.x("graph_kernel", "kernel", t0 + 25_010, 10_000.0, pid=0, tid=7, device=0, stream=7,
            correlation=b.corr)
    return b.save(path)


def test_a_graph_capture_window_is_said_first_in_hip_names(tmp_path):
    report = _report(_capture_trace(tmp_path / "capture.json"))
    assert report.window_kind == "graph_capture" and report.runtime == "hip"
    head = report.advice[0]
    assert head.title == "This window records a graph capture, not steady training"
    assert head.evidence.startswith("2 graph captures (hipStreamBeginCapture ... "
                                    "hipGraphInstantiateWithFlags) span 40.00 ms, 50.0%")
    text = render(report)
    assert "cuda" not in text.replace("torch.cuda.CUDAGraph", "").lower(), text


def test_one_step_is_said_first_on_every_trace(tmp_path):
    """Issue 33: a lone step is announced the same way whatever its number (it used to be only
    noted for a step numbered past the runner's warm-up)."""
    first = _report(cause_trace(tmp_path / "one.json", "cpu_ops", 0.3, n=1))
    assert first.window_kind == "one_step"
    # 4 events are too few to judge: one card says so, and what the window is
    assert [a.id for a in first.advice] == ["too_short"]
    assert "This window is a single step: The 40.00 ms window holds one step" \
        in first.advice[0].evidence
    b = Synth()
    b.step(551, 1_000_000.0, STEP)
    for k in range(6):
        b.x("aten::mm", "cpu_op", 1_000_010.0 + 1600.0 * k, 1_500.0)
    b.gpu(1_010_100.0, STEP - 10_100.0, 1_010_010.0)
    late = _report(b.save(tmp_path / "late.json"))
    assert late.window_kind == "one_step"
    assert [a.id for a in late.advice] == ["window"]
    assert late.advice[0].evidence.startswith("The 40.00 ms window holds one step "
                                              "(ProfilerStep#551)")
    assert "ceilings: withheld for a one-step window (see the first card)" in render(late)


# ----------------------------------------------------------------------------- collectives

def test_python_time_beside_collectives_on_other_threads_is_communication(tmp_path):
    """The main thread idles (no op recorded) 60% of each step while nccl:all_reduce runs on
    DDP's thread: a collective card, not Python."""
    b = Synth()
    for t0 in steps(b, 10, STEP):
        b.x("nccl:all_reduce", "cpu_op", t0 + 100, 0.6 * STEP, tid=5)
        b.x("record_param_comms", "cpu_op", t0 + 110, 0.3 * STEP, tid=5)
        b.x("aten::mm", "cpu_op", t0 + 0.6 * STEP + 200, 100.0)
        b.gpu(t0 + 0.6 * STEP + 400, 0.4 * STEP - 400, t0 + 0.6 * STEP + 300)
    report = _report(b.save(tmp_path / "coll.json"))
    wait = report.collective_wait
    assert wait is not None and wait.device == 0
    assert wait.us == pytest.approx(10 * 0.6 * STEP)
    assert list(wait.by_name) == ["nccl:all_reduce", "record_param_comms"]
    assert wait.threads == [("1", "5")]
    card = report.advice[0]
    assert card.id == "collective_wait"
    assert [c.name for c in card.culprits] == ["nccl:all_reduce", "record_param_comms"]
    assert "nccl:all_reduce 240.00 ms (100.0%), record_param_comms 120.00 ms (50.0%)" \
        in card.evidence, card.evidence
    python = [a for a in report.advice if a.id == "python_overhead"]
    assert not python or python[0].saving_us < 0.05 * report.window_us
    assert "the collectives card" in report.headlines[0].fix


# ----------------------------------------------------------------------------- fixes

def _optimizer_trace(path, cls: str, foreach: bool):
    b = Synth()
    for t0 in steps(b, 10, STEP):
        b.x(f"Optimizer.step#{cls}.step", "user_annotation", t0, 0.2 * STEP - LAUNCH_US)
        if foreach:
            b.x("aten::_foreach_add_", "cpu_op", t0 + 10, 0.1 * STEP)
        else:
            for i in range(20):
                b.x("aten::add_", "cpu_op", t0 + 10 + i * 300, 250.0)
        b.gpu(t0 + 0.2 * STEP, 0.8 * STEP, t0 + 0.2 * STEP - LAUNCH_US)
    return b.save(path)


@pytest.mark.parametrize(("cls", "foreach", "says"), [
    ("AdamW", False, "use a multi-tensor step: torch.optim.AdamW(..., foreach=True) or "
                     "fused=True"),
    ("SGD", True, "SGD already runs multi-tensor (aten::_foreach_* ops); "
                  "torch.optim.SGD(..., fused=True)"),
    ("RMSprop", False, "torch.optim.RMSprop(..., foreach=True)."),
    ("Shampoo", False, "Shampoo is not a torch.optim class"),
    ("FusedAdam", False, "FusedAdam is already fused"),
])
def test_the_optimizer_card_names_the_scripts_own_class(tmp_path, cls, foreach, says):
    report = _report(_optimizer_trace(tmp_path / "opt.json", cls, foreach))
    card = _card(report, "optimizer_bound")
    assert card.culprits[0].name == f"Optimizer.step#{cls}.step"
    assert says.lower() in card.fix.lower(), card.fix
    others = {"AdamW", "SGD", "RMSprop", "Shampoo", "FusedAdam"} - {cls}
    assert not any(f"optim.{o}(" in card.fix for o in others)


def test_host_bound_names_ops_launching_tiny_kernels(tmp_path):
    b = Synth()
    for t0 in steps(b, 10, STEP):
        b.x("aten::add", "cpu_op", t0, 0.3 * STEP)
        for i in range(50):
            b.gpu(t0 + 20 * i + 5, 3.0, t0 + 20 * i)
        b.gpu(t0 + 0.3 * STEP + 10, 0.7 * STEP - 10, t0 + 0.3 * STEP - LAUNCH_US)
    report = _report(b.save(tmp_path / "tiny.json"))
    card = _card(report, "host_bound")
    top = card.culprits[0]
    assert top.name == "aten::add" and top.count == 10
    # 50 tiny kernels and the long one launched at its end, per step
    assert "launches 510 tiny GPU ops, median 3.0 µs" in top.detail, top.detail
    assert card.fix.startswith("aten::add launches 510 tiny kernels (median 3.0 µs)")


def test_low_utilization_fix_follows_the_largest_cause(tmp_path):
    data = _report(cause_trace(tmp_path / "data.json", "data_loading", 0.6))
    sync = _report(cause_trace(tmp_path / "sync.json", "sync", 0.6))
    low = {r.headlines[-1].id: r.headlines[-1].fix for r in (data,)}
    assert "the DataLoader card" in low["low_utilization"]
    assert "raise the batch size" not in low["low_utilization"]
    assert "the sync card" in sync.headlines[-1].fix


def test_json_cards_carry_culprits(tmp_path):
    report = _report(_sync_trace(tmp_path / "sync.json"))
    data = json.loads(report_to_json(report))
    assert data["window_kind"] == "steady"
    top = data["advice"][0]["culprits"][0]
    assert set(top) >= {"name", "kind", "count", "covered_us", "frame"}
    assert top["name"] == "cudaStreamSynchronize" and top["frame"] == "train.py(57): train_step"


def test_main_thread_frame_is_the_main_threads(tmp_path):
    """Frames on another thread never name the main thread's line."""
    b = Synth()
    g = 0.3 * STEP
    for t0 in steps(b, 10, STEP):
        b.x("other.py(1): elsewhere", "python_function", t0, g, tid=9)
        b.x("cudaStreamSynchronize", "cuda_runtime", t0, g - LAUNCH_US, tid=MAIN_TID)
        b.gpu(t0 + g, STEP - g, t0 + g - LAUNCH_US)
    card = _report(b.save(tmp_path / "other.json")).advice[0]
    assert card.culprits[0].frame == ""


def test_a_long_first_copy_that_waits_is_a_sync_not_start_up(tmp_path):
    """An inference window where one aten::copy_ (a 256-byte DtoH hipMemcpyWithStream) waits
    97% of the time: a sync with its op and line, not warm-up."""
    b = Synth()
    t0 = 1_000_000.0
    b.x("server.py(276): populate", "python_function", t0, 470_000.0)
    b.x("aten::copy_", "cpu_op", t0 + 10, 463_100.0)
    b.corr += 1
    b.x("hipMemcpyWithStream", "cuda_runtime", t0 + 20, 463_000.0, correlation=b.corr)
    b.x("Memcpy DtoH (Device -> Host)", "gpu_memcpy", t0 + 462_990, 2.0, pid=0, tid=7,
        device=0, stream=7, correlation=b.corr)
    for k in range(6):
        b.x("aten::copy_", "cpu_op", t0 + 464_000 + 1000 * k, 9.0)
        b.gpu(t0 + 464_020 + 1000 * k, 500.0, t0 + 464_005 + 1000 * k)
    report = _report(b.save(tmp_path / "decode.json"))
    # issue 33: the window starts inside this copy, which waits for work queued before the
    # profiler started: the window's card comes first, the sync card is withheld (it was the
    # top card of a "steady" window)
    assert report.window_kind == "queued_before" and report.runtime == "hip"
    window = report.advice[0]
    assert [a.id for a in report.advice] == ["window"]
    assert window.title == "This window starts inside work queued before it"
    assert window.evidence.startswith("A 463.00 ms hipMemcpyWithStream (inside aten::copy_) "
                                      "begins 20.0 µs into the 470.00 ms window and covers "
                                      "98.5% of it"), window.evidence
    card = report.withheld[0]
    assert card.id == "sync_stalls"
    top = card.culprits[0]
    assert top.name == "hipMemcpyWithStream" and top.frame == "server.py(276): populate"
    assert top.detail == "issued by aten::copy_; copies Memcpy DtoH (Device -> Host)"
    assert card.fix.startswith("aten::copy_ at server.py(276): populate copies a GPU tensor "
                               "to the host and waits for it")
    assert "hipDeviceSynchronize / hipStreamSynchronize / hipMemcpy" in card.evidence
