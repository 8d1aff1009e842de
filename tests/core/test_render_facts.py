"""core/render/facts.py: the memory facts say only what a trace recorded, alike in the CLI text,
the Markdown export and the summary panel's words; the window line; the one JSON writer."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from fixture_traces import fixture_path
from synthetic_traces import MAIN_TID, Synth, steps

from stallscope.core import units
from stallscope.core.analysis import analyze
from stallscope.core.render import text
from stallscope.core.render.export import report_to_json, report_to_markdown
from stallscope.core.render.facts import (
    json_text,
    memory_facts,
    no_memory_text,
    window_text,
    write_json,
)
from stallscope.core.trace import load

MIB = 2**20


def _allocator_trace(path: Path) -> Path:
    """3 steps; [memory] samples with the allocator's totals (reserved 64 -> 32 -> 96 MiB: it
    shrinks once); two cudaMalloc of 30 µs and one cudaFree of 10 µs on the main thread."""
    b = Synth()
    for k, t0 in enumerate(steps(b, 3, 10_000.0)):
        b.gpu(t0 + 100, 9_000.0, t0 + 50)
        b.memory(t0 + 10, MIB, (k + 1) * 10 * MIB, (64, 32, 96)[k] * MIB)
    for ts in (1_000_200.0, 1_010_200.0):
        b.x("cudaMalloc", "cuda_runtime", ts, 30.0, tid=MAIN_TID)
    b.x("cudaFree", "cuda_runtime", 1_020_200.0, 10.0, tid=MAIN_TID)
    return b.save(path)


def test_facts_of_a_trace_with_the_allocators_totals(tmp_path):
    report = analyze(load(_allocator_trace(tmp_path / "mem.json")))
    assert memory_facts(report) == {0: [
        ("peak allocated", "30.0 MiB"), ("peak reserved", "96.0 MiB"),
        ("reserved shrank", "1 time"), ("cudaMalloc", "2 times (60.0 µs)"),
        ("cudaFree", "1 time (10.0 µs)")]}
    line = next(x for x in text.render(report).splitlines() if x.startswith("memory "))
    assert line == ("memory GPU 0: peak allocated 30.0 MiB, peak reserved 96.0 MiB, reserved "
                    "shrank 1 time, cudaMalloc 2 times (60.0 µs), cudaFree 1 time (10.0 µs)")
    md = report_to_markdown(report)
    assert "## Memory\n\n- GPU 0: peak allocated 30.0 MiB, peak reserved 96.0 MiB" in md


def test_facts_say_only_what_was_recorded():
    """kineto_nw0: allocations without totals, no allocator calls in the window: one fact. A
    CPU-only trace: none, and the line that says why."""
    nw0 = analyze(load(fixture_path("kineto_nw0")))
    assert memory_facts(nw0) == {0: [("peak allocated", "2,662.3 MiB")]}
    md = report_to_markdown(nw0)
    assert "- GPU 0: peak allocated 2,662.3 MiB\n" in md
    for out in (md, text.render(nw0)):
        assert "0x" not in out and "peak reserved" not in out and "cudaMalloc" not in out
    cpu = analyze(load(fixture_path("hta_cpu_only")))
    assert memory_facts(cpu) == {}
    assert "## Memory" not in report_to_markdown(cpu)
    assert no_memory_text(cpu) == "No CUDA memory events recorded (no GPU in this trace)."


def test_markdown_names_an_mtia_device_and_counts_in_one_voice():
    report = analyze(load(fixture_path("hta_mtia_inference_rank_0")))
    md = report_to_markdown(report)
    gaps = report.devices[17].idle_gaps
    assert "## MTIA\n" in md and "| MTIA 17 | " in md and "GPU 17" not in md
    assert f" | {gaps:,} | " in md
    nw0 = report_to_markdown(analyze(load(fixture_path("kineto_nw0"))))
    assert "| 7,739 |" in nw0  # idle gaps with a thousands separator, as the CLI and app


def test_window_text():
    nw0 = analyze(load(fixture_path("kineto_nw0")))
    assert window_text(nw0) == "1.05 s · mean of the 6 profiled steps: 174.83 ms"
    one = analyze(load(fixture_path("hta_cpu_only")))
    assert len(one.steps) == 1
    assert window_text(one) == (f"{units.duration(one.window_us)} · 1 profiled step of "
                                f"{units.duration(one.steps[0].dur_us)}")
    mtia = analyze(load(fixture_path("hta_mtia_inference_rank_0")))
    assert window_text(mtia) == "459.67 ms · no ProfilerStep annotations: the whole trace"


def test_one_json_writer_strict_and_numpy_aware():
    obj = {"a": np.float64(1.5), "b": np.int32(3), "c": np.arange(3), "p": Path("/x/y")}
    assert json.loads(json_text(obj)) == {"a": 1.5, "b": 3, "c": [0, 1, 2], "p": "/x/y"}
    assert json_text({"a": 1}) == '{\n "a": 1\n}\n'
    out = io.StringIO()
    write_json([1, 2], out)
    assert out.getvalue() == json_text([1, 2])
    with pytest.raises(ValueError):
        json_text({"x": math.nan})  # never a file other JSON readers reject


def test_report_json_round_trips_through_the_writer():
    report = analyze(load(fixture_path("kineto_nw0")))
    doc = json.loads(report_to_json(report))
    assert doc == json.loads(json_text(report.to_json()))
    assert doc["devices"]["0"]["idle_gaps"] == 7739


def test_markdown_of_a_cpu_only_trace_speaks_of_the_main_thread():
    report = analyze(load(fixture_path("hta_cpu_only")))
    md = report_to_markdown(report)
    assert "## Main thread\n" in md and "## GPU" not in md and "queued work" not in md
    head = "| step | duration | data loading | optimizer | largest cause |\n|---|---|---|---|---|\n"
    assert head in md
    assert "| ProfilerStep#551 | 210.11 ms | 0.00 ms | 0.00 ms | Python |" in md
    assert "Withheld for a trace too short to judge." in md  # a one-step window of 3 events
