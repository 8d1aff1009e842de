"""The hover line of the timeline: what is under the pointer in each kind of lane, in words.

Plain functions of a LaneSpec (gui/lanes.py) and the trace's columns, no Qt; every time and
duration goes through core.units, so the hover and the status line print the same interval
the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stallscope.core import causes, units
from stallscope.core.kineto import GPU_CATS

Describe = Callable[[float], "str | None"]


def fmt_ms(ms: float) -> str:
    """A time or a duration given in ms, with core.units' formatter (one formatter app-wide)."""
    return units.duration(ms * 1000.0)


def describer(spec, trace, t0_us: float) -> Describe:
    if spec.kind == "gpu":
        return gpu_describer(spec, trace, t0_us)
    if spec.kind == "cpu":
        return phase_describer(spec)
    if spec.kind in ("steps", "thread") and spec.texts is not None:
        return named_describer(spec.label, *spec.texts)
    if spec.kind == "stream":
        mask = (np.asarray(trace.device) == spec.device) & \
            (np.asarray(trace.stream) == spec.extra["stream"])
        events = gpu_events(trace, mask, t0_us)

        def describe(x: float) -> str | None:
            name = events(x)
            return None if name is None else f"{spec.label.strip()}: {name}"

        return describe
    return lambda x: None


def gpu_describer(spec, trace, t0_us: float) -> Describe:
    """An idle piece: its duration, cause and start (and the whole gap's length when the gap
    holds several causes); else the GPU op under x; else the busy block."""
    dev, gaps, name = spec.device, spec.extra["gaps"], spec.label
    spans, codes = spec.extra["spans"], spec.extra["codes"]
    busy, comm = spec.extra["busy"], spec.extra["comm"]
    events = gpu_events(trace, np.asarray(trace.device) == dev, t0_us)

    def describe(x: float) -> str | None:
        g = index_at(gaps, x)
        if g is not None:
            k = index_at(spans, x)
            if k is not None:
                a, b = spans[k]
                cause = causes.CAUSES[codes[k]]
            else:
                a, b = gaps[g]
                cause = "uncovered"
            text = f"{name} idle {fmt_ms(b - a)} ({causes.label(cause)}) from {fmt_ms(a)}"
            if (a, b) != tuple(gaps[g]):
                text += f", in an idle gap of {fmt_ms(gaps[g, 1] - gaps[g, 0])}"
            return text
        op = events(x)
        alone = " (communication, nothing else running)" if index_at(comm, x) is not None else ""
        if op is not None:
            return f"{name}: {op}{alone}"
        b = index_at(busy, x)
        if b is not None:
            return f"{name} busy {fmt_ms(busy[b, 1] - busy[b, 0])} from {fmt_ms(busy[b, 0])}"
        return None

    return describe


def gpu_events(trace, mask: np.ndarray, t0_us: float) -> Describe:
    """Name, duration and start of the GPU event under x among the events in `mask`."""
    gpu = np.isin(trace.cat, np.array(GPU_CATS, dtype=np.int8))
    pick = np.flatnonzero(mask & gpu)
    starts = (np.asarray(trace.start)[pick] - t0_us) / 1000.0
    ends = (np.asarray(trace.end)[pick] - t0_us) / 1000.0
    name_ids = np.asarray(trace.name)[pick]

    def lookup(x: float) -> str | None:
        i = int(np.searchsorted(starts, x, "right"))
        lo = max(0, i - 256)
        hit = np.flatnonzero(ends[lo:i] >= x)
        if not len(hit):
            return None
        j = lo + int(hit[-1])
        return (f"{trace.names[name_ids[j]]}  {fmt_ms(ends[j] - starts[j])} from "
                f"{fmt_ms(starts[j])}")

    return lookup


def phase_describer(spec) -> Describe:
    layers = spec.layers  # disjoint: at most one covers x

    def describe(x: float) -> str | None:
        for layer in layers:
            k = index_at(layer.intervals, x)
            if k is not None:
                a, b = layer.intervals[k]
                return (f"{spec.label} in {causes.label(layer.key)}: {fmt_ms(b - a)} from "
                        f"{fmt_ms(a)}")
        return None

    return describe


def named_describer(label: str, starts, ends, names) -> Describe:
    def describe(x: float) -> str | None:
        i = int(np.searchsorted(starts, x, "right")) - 1
        if 0 <= i < len(starts) and x <= ends[i]:
            return f"{label}: {names[i]}  {fmt_ms(ends[i] - starts[i])} from {fmt_ms(starts[i])}"
        return None

    return describe


def index_at(intervals: np.ndarray, x: float) -> int | None:
    """Index of the sorted disjoint interval containing x, or None."""
    if not len(intervals):
        return None
    i = int(np.searchsorted(intervals[:, 0], x, "right")) - 1
    return i if i >= 0 and x <= intervals[i, 1] else None
