"""Devices are named by kind ("MTIA 17", "GPU 0") and listed by id, in numeric order; `info`
prints the ids as ids ("devices    0, 1 (GPU)"), never as a count."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from stallscope.core.analysis import analyze
from stallscope.core.trace import load

pytestmark = pytest.mark.runner  # the CLI in a child process


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "stallscope.core.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _devices_trace(path, devices=(10, 2, 0, 100)):
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000}]
    for dev in devices:
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": dev, "tid": 7,
                       "ts": 100, "dur": 300, "args": {"device": dev, "stream": 7}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_an_mtia_device_is_named_mtia(real_trace):
    trace = load(real_trace("hta_mtia_inference_rank_0"))
    assert trace.device_kind == "MTIA" and trace.device_label(17) == "MTIA 17"
    out = _cli("info", real_trace("hta_mtia_inference_rank_0"))
    assert out.returncode == 0, out.stderr
    assert "devices    17 (MTIA)  [ARTEMIS]" in out.stdout
    assert "GPU devices" not in out.stdout
    doc = json.loads(_cli("info", real_trace("hta_mtia_inference_rank_0"), "--json").stdout)
    assert doc["device_kind"] == "MTIA" and doc["gpu_devices"] == [17]


def test_a_cuda_trace_names_gpus(real_trace):
    trace = load(real_trace("hta_nccl_parser_config_nccl_data"))
    assert trace.device_label(0) == "GPU 0"


def test_devices_are_listed_in_numeric_order(tmp_path):
    path = tmp_path / "four.pt.trace.json.gz"
    _devices_trace(path)
    out = _cli("info", path)
    assert "devices    0, 2, 10, 100 (GPU)" in out.stdout, out.stdout
    assert "steps      1: ProfilerStep#1\n" in out.stdout  # one step: no "#1 .. #1"
    assert set(analyze(load(path)).devices) == {0, 2, 10, 100}
