"""Device ids are ints in the model (Report.devices, Report.memory, the per-step dicts, every
`device` field) and strings only in JSON, in the same numeric order: 0, 2, 10, 100 (never the
text order 0, 10, 100, 2)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from stallscope.core.analysis import analyze
from stallscope.core.compare import primary_device
from stallscope.core.ranks.tasks import summarize
from stallscope.core.render.facts import memory_facts
from stallscope.core.render.perfetto import stallscope_events
from stallscope.core.trace import load

pytestmark = pytest.mark.runner  # the CLI in a child process

ORDER = [0, 2, 10, 100]
BUSY_US = {10: 500.0, 2: 300.0, 0: 300.0, 100: 100.0}  # 0 and 2 tie: the lower id is primary


def _trace(path):
    """One step; device d runs one kernel of BUSY_US[d]; memory samples on 10, 2 and 11 (11
    has samples but no GPU work)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000}]
    for dev, busy in BUSY_US.items():
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": dev, "tid": 7,
                       "ts": 100, "dur": busy, "args": {"device": dev, "stream": 7}})
    for dev in (10, 2, 11):
        for k, total in enumerate((1e6, 3e6, 2e6)):
            events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                           "ts": 50 + 100 * k, "args": {"Device Type": 1, "Device Id": dev,
                                                        "Bytes": 1, "Total Allocated": total,
                                                        "Total Reserved": 4e6 - k}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return path


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "stallscope.core.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_the_report_keys_devices_by_int_in_numeric_order(tmp_path):
    report = analyze(load(_trace(tmp_path / "four.pt.trace.json.gz")))
    assert list(report.devices) == ORDER
    assert list(report.memory) == [0, 2, 10, 11, 100]
    assert report.devices[10].busy_us == 500.0 and report.devices[100].busy_us == 100.0
    assert report.memory[11].peak_allocated == 3e6  # samples without GPU work still count
    step = report.steps[0]
    for per_device in (step.gpu_busy_us, step.idle_by_cause, step.comm_us,
                       step.exposed_comm_us, step.comm_overlap):
        assert list(per_device) == ORDER
    assert step.gpu_busy_us[2] == 300.0
    assert {c.device for c in report.ceilings} <= set(ORDER)
    assert all(isinstance(c.device, int) for c in report.ceilings)
    assert all(isinstance(a.device, int) for a in report.advice if a.device is not None)
    assert list(memory_facts(report)) == [2, 10, 11]  # only devices with recorded facts
    assert primary_device(report) == 10
    del report.devices[10]
    assert primary_device(report) == 0  # a tie on busy time: the lower id


def test_json_writes_the_ids_as_strings_in_the_same_order(tmp_path):
    report = analyze(load(_trace(tmp_path / "four.pt.trace.json.gz")))
    doc = json.loads(json.dumps(report.to_json(), allow_nan=False))
    want = [str(d) for d in ORDER]
    assert list(doc["devices"]) == want
    assert list(doc["memory"]) == ["0", "2", "10", "11", "100"]
    step = doc["steps"][0]
    for key in ("gpu_busy_us", "idle_by_cause", "comm_us", "exposed_comm_us", "comm_overlap"):
        assert list(step[key]) == want, key
    assert doc["devices"]["10"]["busy_us"] == 500.0 and step["gpu_busy_us"]["2"] == 300.0
    # a 1 ms, 5-event window is too short to judge: its ceilings are withheld, ids as strings
    assert doc["ceilings"] == [] and doc["withheld_ceilings"]
    assert {c["device"] for c in doc["withheld_ceilings"]} <= set(want)
    ranks = summarize(report, "r0").to_json()
    assert ranks["comm_device"] == "10" and list(ranks["devices"]) == want
    perfetto = [e["args"]["device"] for e in stallscope_events(report)
                if e.get("args", {}).get("cause")]
    assert perfetto and set(perfetto) == set(want)


def test_device_option_takes_an_int_id(tmp_path):
    path = _trace(tmp_path / "four.pt.trace.json.gz")
    one = _cli("analyze", path, "--json", "--device", "10")
    assert one.returncode == 0, one.stderr
    doc = json.loads(one.stdout)
    assert list(doc["devices"]) == ["10"] and list(doc["memory"]) == ["10"]
    assert _cli("analyze", path, "--json", "--device", "010").stdout == one.stdout
    bad = _cli("analyze", path, "--device", "x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "argument --device: invalid int value: 'x'" in bad.stderr
    none = _cli("analyze", path, "--device", "11")  # memory samples only: no GPU activity
    assert none.returncode == 2 and "Traceback" not in none.stderr
    assert "no GPU activity on device 11 (devices with activity: 0, 2, 10, 100)" in none.stderr
    out = tmp_path / "out.json"
    done = _cli("export", path, "--perfetto", out, "--device", "2")
    assert done.returncode == 0, done.stderr
    assert "(GPU 2 " in done.stderr and "GPU 10" not in done.stderr
