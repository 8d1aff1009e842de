"""Accelerators beside CUDA/ROCm kernels: device lanes and GPU activity, or named as not analysed
yet; never "CPU lanes only". Steps are exact names."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import pytest

from stallscope.core import intervals as iv
from stallscope.core.analysis import analyze
from stallscope.core.kineto import GPU_CATS, Cat
from stallscope.core.render.facts import no_memory_text
from stallscope.core.trace import load

pytestmark = pytest.mark.runner  # the CLI in a child process

CLI = [sys.executable, "-m", "stallscope.core.cli"]


def _cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def test_mtia_device_work_is_gpu_activity(real_trace):
    path = real_trace("hta_mtia_inference_rank_0")
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    ccp = [e for e in events if e.get("ph") == "X" and e.get("cat") == "mtia_ccp_events"]
    work = [e for e in ccp if e["name"] != "event_wait"]  # a wait on another stream is no work
    t = load(path)
    assert t.gpu_devices() == [17]  # the MTIA device's pid (deviceProperties id 17, "ARTEMIS")
    acc = np.flatnonzero(t.cat == Cat.ACCELERATOR)
    assert len(acc) == len(work) == 1265
    assert set(t.device[acc].tolist()) == {17}
    # busy = the union of the work events, computed here from the file's own numbers
    expected = iv.length(iv.union(iv.as_intervals([e["ts"] for e in work],
                                                  [e["ts"] + e["dur"] for e in work])))
    got = iv.length(iv.union(iv.as_intervals(t.start[acc], t.end[acc])))
    assert abs(got - expected) < 1e-6 * expected
    launches = sum(1 for e in events if e.get("cat") == "mtia_runtime")
    assert int((t.cat == Cat.CUDA_RUNTIME).sum()) == launches == 823
    assert t.unanalysed_accelerator is None


def test_mtia_is_not_called_cpu_only(real_trace):
    path = real_trace("hta_mtia_inference_rank_0")
    out = _cli("analyze", path)
    assert out.returncode == 0, out.stderr
    assert "CPU lanes only" not in out.stdout and "No GPU activity" not in out.stdout
    assert "MTIA 17: utilization" in out.stdout and "GPU 17" not in out.stdout
    assert "if the MTIA never waited" in out.stdout and "the GPU never" not in out.stdout
    report = analyze(load(path))
    assert {c.device_kind for c in report.ceilings} == {"MTIA"}
    assert not any(len(m.ts) for m in report.memory.values()) and no_memory_text(report) == \
        "No MTIA memory events recorded (profile_memory was off)."
    doc = json.loads(_cli("analyze", path, "--json").stdout)
    assert list(doc["devices"]) == ["17"] and doc["devices"]["17"]["busy_us"] > 0
    info = _cli("info", path).stdout
    assert "devices    17 (MTIA)  [ARTEMIS]" in info and "accelerator" in info


def test_cupti_profiler_ranges_are_gpu_activity(tmp_path):
    """CUPTI's range profiler records one range per kernel on the GPU's pid (no args.device) and
    no `kernel` events; the launches are cuda_runtime as usual."""
    events = [_x("ProfilerStep#7", 0, 1000, cat="user_annotation"),
              _x("cudaLaunchKernel", 10, 5, cat="cuda_runtime", correlation=1),
              _x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=2),
              _x("void gemm_kernel<float>", 100, 300, cat="cuda_profiler_range", pid=0, tid=0,
                 **{"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 38731776}),
              _x("elementwise_kernel", 350, 150, cat="cuda_profiler_range", pid=0, tid=0),
              _x("__missing__", 600, 100, cat="cuda_profiler_range", pid=0, tid=0)]
    path = tmp_path / "cupti_range.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [
        {"id": 0, "name": "NVIDIA A100-PG509-200"}]}))
    t = load(path)
    assert t.gpu_devices() == [0]
    assert (t.cat == Cat.RANGE).sum() == 3 and Cat.RANGE in GPU_CATS  # its own category
    doc = json.loads(_cli("analyze", path, "--json").stdout)
    dev = doc["devices"]["0"]
    assert dev["busy_us"] == 300 + 100 + 100  # [100, 500) and [600, 700) inside the step
    assert dev["idle_us"] == 1000 - 500 and dev["idle_gaps"] == 3


def test_an_accelerator_stallscope_does_not_analyse_is_named(tmp_path):
    events = [_x("ProfilerStep#1", 0, 100, cat="user_annotation"),
              _x("urLaunchKernel", 10, 5, cat="xpu_runtime", correlation=1),
              _x("aten::mm", 20, 30)]
    path = tmp_path / "xpu.json"
    path.write_text(json.dumps({"traceEvents": events,
                                "deviceProperties": [{"id": 0, "name": "Intel Max 1550"}]}))
    t = load(path)
    assert t.gpu_devices() == [] and t.unanalysed_accelerator == "Intel Max 1550"
    info = _cli("info", path)
    assert "none analysed: from Intel Max 1550, an accelerator stallscope does not analyse yet" \
        in info.stdout
    # without deviceProperties the runtime names it; unknown categories are listed
    path.write_text(json.dumps({"traceEvents": events + [
        _x("npu_op", 30, 5, cat="npu_kernel", pid=3, tid=3)]}))
    assert load(path).unanalysed_accelerator == "Intel XPU"
    path.write_text(json.dumps({"traceEvents": events + [
        _x("npu_op", 30, 5, cat="npu_kernel", pid=3, tid=3)],
        "deviceProperties": [{"id": 0, "name": "NPU 9"}]}))
    assert load(path).unanalysed_accelerator == "NPU 9 (categories npu_kernel)"


def test_cpu_only_and_cuda_without_kernels_are_not_called_accelerators(tmp_path, real_trace):
    assert load(real_trace("hta_cpu_only")).unanalysed_accelerator is None
    events = [_x("ProfilerStep#1", 0, 100, cat="user_annotation"),
              _x("cudaMalloc", 10, 5, cat="cuda_runtime")]
    path = tmp_path / "cuda.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert load(path).unanalysed_accelerator is None


def test_only_exact_step_names_are_steps(tmp_path):
    events = [_x("ProfilerStep#1", 0, 100, cat="user_annotation"),
              _x("ProfilerStep#end", 150, 900, cat="user_annotation"),
              _x("ProfilerStep#x", 200, 900, cat="user_annotation"),
              _x("ProfilerStep#2", 100, 100, cat="user_annotation"),
              _x("ProfilerStep#3 ", 300, 900, cat="user_annotation"),
              _x("ProfilerStep#2", 100, 100, cat="gpu_user_annotation", pid=0, tid=7)]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = load(path)
    assert [t.names[i] for i in t.name[t.step_indices()]] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert t.dropped == {}  # look-alikes are ordinary annotations, not duplicate steps
    doc = json.loads(_cli("analyze", path, "--json").stdout)
    assert doc["window_us"] == [0.0, 200.0]
    assert [s["name"] for s in doc["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
