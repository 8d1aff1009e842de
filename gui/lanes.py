"""What the timeline draws, as plain numpy: one LaneSpec per row, built from a Report.

No Qt here: the view (gui/views/timeline.py) paints these specs and tests read them. Rows, top to
bottom: the steps; per device its lane (busy rising in the top band, communication with nothing
else running in its own colour, the idle causes hanging in the band below it) and, on demand, one
labelled sub-lane per stream (compute, communication, copy); the CPU main thread (what it was in,
by cause); the other CPU threads that matter: the threads that launch GPU work besides
the main thread ("CPU backward": the autograd engine), or, in a trace without a GPU, the threads
that were busy during the steps (e.g. gloo collectives).

x is milliseconds since the window's start. The layers of a band are disjoint, so the view can
stack them per pixel column in proportion to time (gui/views/lane_item.py).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.kineto import GPU_CATS, Cat, is_comm_name
from stallscope.core.report import DeviceStats, Report
from stallscope.core.trace import Trace
from stallscope.gui.colors import (
    BUSY_COLOR,
    CAUSE_COLORS,
    COMM_COLOR,
    LAUNCH_THREAD_COLOR,
    OTHER_THREAD_COLOR,
    STREAM_COLORS,
)

P = ParamSpec("P")
T = TypeVar("T")

# Where the bands sit inside a row (fractions of the row height, from the top).
BUSY_BAND = (0.06, 0.50)     # GPU busy: rising from the band's bottom, on top
CAUSE_BAND = (0.60, 0.32)    # GPU idle by cause: hanging from the band's top, below it
FULL_BAND = (0.14, 0.72)     # CPU lanes and stream sub-lanes
MAX_THREAD_LANES = 6
ROW_HEIGHTS = {"steps": 0.55, "gpu": 1.3, "stream": 0.6, "cpu": 0.8, "thread": 0.7}
THREAD_CATS = (Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER,
               Cat.PYTHON_FUNCTION)


@dataclass
class LayerSpec:
    key: str
    intervals: np.ndarray     # (N, 2) ms, sorted
    color: str
    band: tuple[float, float]  # (top, height) as fractions of the row
    from_top: bool = False     # the band's stack hangs from its top (else rises from its bottom)


@dataclass
class LaneSpec:
    key: str                  # "steps", "gpu:0", "stream:0:7", "cpu:main", "thread:3"
    label: str
    kind: str                 # "steps" | "gpu" | "stream" | "cpu" | "thread"
    layers: list[LayerSpec]
    tooltip: str = ""
    device: int | None = None
    track: int | None = None  # the trace track of a CPU lane
    texts: tuple[np.ndarray, np.ndarray, list[str]] | None = None  # names drawn where they fit
    extra: dict = field(default_factory=dict)

    @property
    def height(self) -> float:
        """The row's height in lane units: GPU lanes get the most room, steps the least."""
        return ROW_HEIGHTS.get(self.kind, 1.0)


def per_report(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn(report, *args)` computed once per Report and arguments: the timeline, its Streams
    re-layout and the summary panel ask for the same rows. Dropped with the Report."""
    memo: dict[tuple, tuple[weakref.ref, T]] = {}

    @functools.wraps(fn)
    def once(*args: P.args, **kwargs: P.kwargs) -> T:
        report = args[0]
        key = (id(report), *args[1:], *sorted(kwargs.items()))
        hit = memo.get(key)
        if hit is not None and hit[0]() is report:
            return hit[1]
        out = fn(*args, **kwargs)
        memo[key] = (weakref.ref(report, functools.partial(_forget, memo, key)), out)
        return out

    return once


def _forget(memo: dict, key: tuple, _ref: weakref.ref) -> None:
    memo.pop(key, None)


def build_lanes(report: Report, streams: bool = False) -> list[LaneSpec]:
    """Every row of `report`'s timeline; `streams`: add each device's per-stream sub-lanes.
    The same report gives the same LaneSpec objects (per_report), so a view keeps its items."""
    t0 = float(report.window[0])
    lanes: list[LaneSpec] = [steps_lane(report, t0)] if report.steps else []
    for dev, lane in device_lanes(report, t0).items():
        lanes.append(lane)
        if streams:
            lanes += stream_lanes(report, dev, t0)
    main = main_thread_lane(report, t0)
    return lanes + ([main] if main is not None else []) + thread_lanes(report, t0)


def to_ms(intervals, t0: float) -> np.ndarray:
    arr = np.asarray(intervals, dtype=np.float64).reshape(-1, 2)
    return (arr - t0) / 1000.0


@per_report
def steps_lane(report: Report, t0: float) -> LaneSpec:
    starts = np.array([(s.start_us - t0) / 1000.0 for s in report.steps])
    ends = starts + np.array([s.dur_us / 1000.0 for s in report.steps])
    names = [s.name for s in report.steps]
    # Neighbouring steps touch, so even and odd steps are separate layers (two tints); the
    # view picks the tints from the theme.
    layers = [LayerSpec("steps", np.column_stack([starts[0::2], ends[0::2]]), "steps:0",
                        (0.05, 0.9)),
              LayerSpec("odd_steps", np.column_stack([starts[1::2], ends[1::2]]), "steps:1",
                        (0.05, 0.9))]
    return LaneSpec("steps", "steps", "steps", layers, "ProfilerStep#N annotations",
                    texts=(starts, ends, names))


@per_report
def device_lanes(report: Report, t0: float) -> dict[int, LaneSpec]:
    """Each device's lane, in numeric order of the devices."""
    return {dev: device_lane(dev, report.devices[dev], t0, report.trace.device_label(dev))
            for dev in sorted(report.devices)}


def device_lane(dev: int, stats: DeviceStats, t0: float, name: str) -> LaneSpec:
    spans = to_ms(stats.cause_spans, t0)
    codes = np.asarray(stats.cause_codes, dtype=np.int64)
    # The cause band: every cause's pieces, stacked per pixel column by their share of it.
    layers = [LayerSpec(cause, spans[codes == causes.index(cause)], CAUSE_COLORS[cause],
                        CAUSE_BAND, from_top=True) for cause in causes.CAUSES]
    busy = np.asarray(stats.busy, dtype=np.float64).reshape(-1, 2)
    alone = np.asarray(stats.exposed_comm, np.float64).reshape(-1, 2)
    # The busy band: communication with nothing else running in its own colour (it is what
    # the step waits on), every other busy moment as compute.
    layers.append(LayerSpec("busy", to_ms(iv.subtract(busy, alone), t0), BUSY_COLOR, BUSY_BAND))
    layers.append(LayerSpec("comm", to_ms(alone, t0), COMM_COLOR, BUSY_BAND))
    return LaneSpec(f"gpu:{dev}", name, "gpu", layers,
                    f"{name}: busy above (communication alone in its own colour), idle below "
                    "it by cause; a column's filled height is its share of the time",
                    device=dev, extra={"gaps": to_ms(stats.gaps, t0), "spans": spans,
                                       "codes": codes, "busy": to_ms(busy, t0),
                                       "comm": to_ms(alone, t0)})


def device_ops(trace: Trace, dev: int) -> np.ndarray:
    """Indices of device `dev`'s GPU ops."""
    gpu = np.isin(trace.cat, np.array(GPU_CATS, dtype=np.int8)) & (trace.device == dev)
    return np.flatnonzero(gpu)


def stream_kind(n_ops: int, n_comm: int, n_copies: int) -> str:
    """'communication' when at least half the stream's ops are collectives, 'copy' when at
    least half are copies or memsets, else 'compute'."""
    if n_ops and n_comm * 2 >= n_ops:
        return "communication"
    if n_ops and n_copies * 2 >= n_ops:
        return "copy"
    return "compute"


@per_report
def stream_lanes(report: Report, dev: int, t0: float) -> list[LaneSpec]:
    """One sub-lane per stream of device `dev` (from args.stream), busiest first."""
    trace = report.trace
    lo, hi = report.window
    idx = device_ops(trace, dev)
    if not len(idx):
        return []
    streams = np.asarray(trace.stream)[idx]
    comm = trace.mask_names(is_comm_name)[idx]
    copy = np.isin(trace.cat[idx], np.array([Cat.GPU_MEMCPY, Cat.GPU_MEMSET], dtype=np.int8))
    out = []
    for s in np.unique(streams).tolist():
        on = streams == s
        pick = idx[on]
        busy = iv.union(iv.clip(iv.as_intervals(trace.start[pick], trace.end[pick]), lo, hi))
        if not len(busy):
            continue
        kind = stream_kind(int(on.sum()), int(comm[on].sum()), int(copy[on].sum()))
        label = f"stream {s}" if s >= 0 else "stream ?"
        out.append((iv.length(busy), LaneSpec(
            f"stream:{dev}:{s}", f"{label} · {kind}", "stream",
            [LayerSpec("busy", to_ms(busy, t0), STREAM_COLORS[kind], FULL_BAND)],
            f"{trace.device_label(dev)}, {label}: {kind} ops ({len(pick):,})", device=dev,
            extra={"stream": s, "kind": kind})))
    out.sort(key=lambda pair: -pair[0])
    return [lane for _, lane in out]


@per_report
def main_thread_lane(report: Report, t0: float) -> LaneSpec | None:
    """What the main thread was in, by cause: the analysis' disjoint pieces (host_spans);
    None without a main thread."""
    if report.main_track is None:
        return None
    spans = to_ms(report.host_spans, t0)
    codes = np.asarray(report.host_codes, np.int64)
    pieces = {cause: spans[codes == causes.index(cause)] for cause in causes.HOST_CAUSES}
    layers = [LayerSpec(cause, got, CAUSE_COLORS[cause], FULL_BAND)
              for cause, got in pieces.items() if len(got)]
    pid, tid = report.trace.tracks[report.main_track]
    return LaneSpec("cpu:main", "CPU main thread", "cpu", layers,
                    f"the main thread (pid {pid}, tid {tid}), coloured by what it was in",
                    track=report.main_track)


def launch_tracks(report: Report) -> list[int]:
    """Tracks of the threads that launch GPU work (DESIGN: launching threads L(d)), all devices:
    the analysis' launch join (DeviceStats.launch_tracks)."""
    return sorted({int(t) for stats in report.devices.values() for t in stats.launch_tracks})


@per_report
def thread_lanes(report: Report, t0: float) -> list[LaneSpec]:
    """The other CPU threads worth a row: launching threads besides the main one (GPU traces),
    or the threads busy during the window (traces without a GPU), busiest first."""
    trace = report.trace
    lo, hi = report.window
    if report.devices:
        tracks = [t for t in launch_tracks(report) if t != report.main_track]
        color, name = LAUNCH_THREAD_COLOR, "CPU backward"
        why = "launches GPU work besides the main thread (the autograd engine's backward)"
    else:
        tracks = [t for t in range(len(trace.tracks)) if t != report.main_track]
        color, name = OTHER_THREAD_COLOR, "CPU thread"
        why = "busy during the steps besides the main thread"
    cats = np.isin(trace.cat, np.array(THREAD_CATS, dtype=np.int8))
    ranked = []
    for track in tracks:
        pick = np.flatnonzero(cats & (trace.track == track))
        spans = iv.union(iv.clip(iv.as_intervals(trace.start[pick], trace.end[pick]), lo, hi))
        busy = iv.length(spans)
        if busy > 0:
            ranked.append((busy, track, pick, spans))
    ranked.sort(key=lambda r: -r[0])
    out = []
    single = len(ranked) == 1 and report.devices
    for busy, track, pick, spans in ranked[:MAX_THREAD_LANES]:
        pid, tid = trace.tracks[track]
        label = name if single else f"{name} {tid}"
        out.append(LaneSpec(f"thread:{track}", label, "thread",
                            [LayerSpec("ops", to_ms(spans, t0), color, FULL_BAND)],
                            f"thread {tid} (pid {pid}): {why}", track=track,
                            texts=_top_level_names(trace, pick, lo, hi, t0),
                            extra={"busy_us": busy}))
    return out


def _top_level_names(trace: Trace, pick: np.ndarray, lo: float, hi: float, t0: float):
    """(starts, ends, names) in ms of the outermost events of a thread inside the window."""
    starts, ends = trace.start[pick], trace.end[pick]
    inside = (ends > lo) & (starts < hi)
    pick, starts, ends = pick[inside], starts[inside], ends[inside]
    if not len(pick):
        return None
    order = np.argsort(starts, kind="stable")
    pick, starts, ends = pick[order], starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    top = np.ones(len(pick), dtype=bool)
    top[1:] = starts[1:] >= reach[:-1]  # not inside an earlier event
    pick, starts, ends = pick[top], starts[top], ends[top]
    names = [trace.names[i] for i in trace.name[pick].tolist()]
    return ((np.maximum(starts, lo) - t0) / 1000.0, (np.minimum(ends, hi) - t0) / 1000.0, names)
