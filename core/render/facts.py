"""What every renderer says about a Report beside the tables, said once: the window and its
steps, each device's memory facts (only what the trace recorded), and the one JSON writer.

The CLI text, the Markdown export and the summary panel all print these, so a fact missing from
the trace (no reserved totals, no cudaMalloc calls) is missing from all three alike, never a
"-" or a "0x".
"""

from __future__ import annotations

import json
from typing import IO, Any

import numpy as np

from stallscope.core import units
from stallscope.core.compare import step_ms
from stallscope.core.report import Report

Fact = tuple[str, str]  # (label, value text): ("peak allocated", "2,662.3 MiB")

# A window that is not steady training, for people (Report.window_kind -> "a start-up window").
WINDOW_NAMES = {"steady": "steady", "startup": "start-up", "graph_capture": "graph-capture",
                "queued_before": "queued-work", "one_step": "one-step", "tail_cut": "cut-tail"}


def window_kind_text(report: Report) -> str:
    """"start-up window", "one-step window", "graph-capture window", "steady window"."""
    kind = report.window_kind
    return f"{WINDOW_NAMES.get(kind, kind.replace('_', ' '))} window"


def withheld_reason(report: Report) -> str:
    """Why the cause cards and ceilings are withheld: "a start-up window", "too short to
    judge" (a lack that withholds), "" when they stand."""
    lack = next((lack for lack in report.lacks if lack.withholds), None)
    if lack is not None:
        return {"too_short": "a trace too short to judge",
                "kernels_filtered": "a trace whose kernels were filtered out",
                "range_profiler": "range-profiler timing"}.get(lack.id, lack.id)
    return "" if report.steady else f"a {window_kind_text(report)}"


def window_text(report: Report) -> str:
    """"1.05 s · mean of the 6 profiled steps: 174.83 ms", "13.34 s · 1 profiled step of
    13.34 s", or the window alone when the trace has no ProfilerStep. The window's mean, never
    "the" step time: a session's steady figure is the whole run's (core/session/steady.py)."""
    window = units.duration(report.window_us)
    n = len(report.steps)
    if not n:
        return f"{window} · no ProfilerStep annotations: the whole trace"
    mean = units.duration(step_ms(report) * 1000.0)
    return f"{window} · " + (f"1 profiled step of {mean}" if n == 1
                              else f"mean of the {n:,} profiled steps: {mean}")


def memory_facts(report: Report) -> dict[int, list[Fact]]:
    """{device id: [(label, value), ...]} of the memory facts the trace recorded, in device
    order; a device with none is left out. Peaks only where samples (and, for reserved, the
    allocator's totals) were recorded; how often reserved memory shrank only when it did;
    the allocator's calls only when there were some."""
    rt = "hip" if report.runtime == "hip" else "cuda"
    out = {}
    for dev, m in report.memory.items():  # in device order (memory_by_device's)
        facts: list[Fact] = []
        if m.peak_allocated is not None and len(m.ts):
            facts.append(("peak allocated", units.mib(m.peak_allocated)))
        if m.peak_reserved is not None:
            facts.append(("peak reserved", units.mib(m.peak_reserved)))
            if m.reserved_drops:
                facts.append(("reserved shrank", units.times(m.reserved_drops)))
        if m.cuda_malloc_count or m.cuda_free_count:
            facts.append((f"{rt}Malloc", _calls(m.cuda_malloc_count, m.cuda_malloc_us)))
            facts.append((f"{rt}Free", _calls(m.cuda_free_count, m.cuda_free_us)))
        if facts:
            out[dev] = facts
    return out


def facts_text(facts: list[Fact], sep: str = ", ") -> str:
    """"peak allocated 2,662.3 MiB, cudaMalloc 12 times (3.40 ms)"."""
    return sep.join(f"{label} {value}" for label, value in facts)


def no_memory_text(report: Report) -> str:
    kind = report.trace.device_kind
    why = "profile_memory was off" if report.devices else f"no {kind} in this trace"
    memory = "CUDA memory" if kind == "GPU" else f"{kind} memory"
    return f"No {memory} events recorded ({why})."


def _calls(n: int, us: float) -> str:
    return units.times(n) + (f" ({units.duration(us)})" if n else "")


# ---------------------------------------------------------------- the one JSON writer

def json_text(obj: Any) -> str:
    """`obj` as strict JSON (no NaN/Infinity), one space of indent, numpy values as numbers,
    anything else unknown (paths) as its string; ends with a newline."""
    return json.dumps(obj, indent=1, allow_nan=False, default=_json_default) + "\n"


def write_json(obj: Any, out: IO[str]) -> None:
    """json_text(obj) written to a text stream (sys.stdout, an open file)."""
    out.write(json_text(obj))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
