"""Busy and idle time of one device, idle charged to the eight causes (docs/definitions.md), the
`python` time by annotation, and communication exposed outside compute. All numpy: masks,
one sort per device, interval sweeps."""

from __future__ import annotations

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.analysis.by_device import index_for
from stallscope.core.analysis.threads import Roles, union_of
from stallscope.core.kineto import is_comm_name
from stallscope.core.report import DeviceStats
from stallscope.core.trace import Trace, unique


def device_stats(trace: Trace, r: Roles, dev: int, phases: dict[str, np.ndarray],
                 comm: np.ndarray) -> DeviceStats:
    lo, hi = r.lo, r.hi
    ix = index_for(trace, r)  # per-device lookups: each device costs its own events only
    on_dev = ix.ops(dev)      # event indexes (ascending), where a mask would scan the trace
    busy = union_of(trace, on_dev, lo, hi)
    busy_us = iv.length(busy)
    width = hi - lo
    idle_us = width - busy_us
    gaps = iv.gaps(busy, lo, hi)
    tracks = ix.launch_tracks(on_dev)
    helpers = tracks[tracks != (-1 if r.main is None else r.main)]
    helper_busy = union_of(trace, ix.on_tracks(ix.cpu_ops, helpers), lo, hi)
    layers = {
        "gpu_wait": gaps[gpu_wait_gaps(trace, r, on_dev, gaps)],
        "data_loading": phases["data_loading"],
        "sync": iv.union(np.concatenate([
            phases["sync"], union_of(trace, ix.on_tracks(ix.syncs, tracks), lo, hi)])),
        "optimizer": phases["optimizer"],
        "cpu_ops": phases["cpu_ops"],
        "backward": iv.union(np.concatenate([helper_busy, phases["backward"]])),
        "python": phases["python"],
    }
    spans, codes = paint_causes(gaps, layers)
    by_cause = cause_totals(spans, codes)
    # The remainder keeps the eight adding up to idle_us exactly.
    by_cause[causes.REST] = max(idle_us - (sum(by_cause.values()) - by_cause[causes.REST]), 0.0)
    comm_union = union_of(trace, on_dev[comm[on_dev]], lo, hi)
    exposed = iv.EMPTY
    if len(comm_union):
        pieces, bare = iv.paint(comm_union, [union_of(trace, on_dev[~comm[on_dev]], lo, hi)])
        exposed = pieces[bare == 1]
    return DeviceStats(
        busy_us=busy_us, idle_us=idle_us, utilization=busy_us / width if width > 0 else 0.0,
        idle_gaps=len(gaps), idle_by_cause=by_cause, busy=busy, gaps=gaps,
        cause_spans=spans, cause_codes=codes,
        python_by_annotation=python_by_annotation(trace, r,
                                                  spans[codes == causes.index("python")]),
        comm_us=iv.length(comm_union), exposed_comm_us=iv.length(exposed), comm=comm_union,
        exposed_comm=exposed,
        launch_tracks=[int(t) for t in tracks], helper_busy=helper_busy)


def paint_causes(base: np.ndarray, layers: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Split `base` among the causes by priority (causes.CAUSES' order), joined by name: each
    piece gets the index in CAUSES of the first cause whose layer covers it, else REST's."""
    unknown = set(layers) - set(causes.CAUSES)
    if unknown:
        raise KeyError(f"not an idle cause: {sorted(unknown)}")
    order = [c for c in causes.CAUSES if c in layers]
    spans, k = iv.paint(base, [layers[c] for c in order])
    index = np.array([causes.index(c) for c in (*order, causes.REST)], dtype=np.int8)
    return spans, index[k]


def cause_totals(spans: np.ndarray, codes: np.ndarray) -> dict[str, float]:
    """Time per cause name of painted pieces (codes: indexes into causes.CAUSES)."""
    lengths = spans[:, 1] - spans[:, 0]
    by_index = np.bincount(codes.astype(np.int64), weights=lengths,
                           minlength=len(causes.CAUSES))
    return {c: float(by_index[k]) for k, c in enumerate(causes.CAUSES)}


def comm_mask(trace: Trace, r: Roles) -> np.ndarray:
    mask: np.ndarray = r.gpu & trace.mask_names(is_comm_name)
    return mask


def gpu_wait_gaps(trace: Trace, r: Roles, on_dev: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Per gap: whether its next GPU op (the first op on the device starting at or after the
    gap's end; of several starting then, the one launched first) was launched before the gap
    began: its launch event ended at or before the gap's start."""
    ops = np.flatnonzero(on_dev) if on_dev.dtype == bool else on_dev  # a mask, or indexes
    if len(gaps) == 0 or len(ops) == 0:
        return np.zeros(len(gaps), dtype=bool)
    launch = r.launch[ops]
    matched = launch >= 0
    launch_start = np.where(matched, trace.start[np.maximum(launch, 0)], np.inf)
    launch_end = np.where(matched, trace.end[np.maximum(launch, 0)], np.inf)
    order = np.lexsort((launch_start, trace.start[ops]))
    starts = trace.start[ops][order]
    k = np.searchsorted(starts, gaps[:, 1], side="left")
    has_next = k < len(ops)
    nxt = order[np.minimum(k, len(ops) - 1)]
    return has_next & matched[nxt] & (launch_end[nxt] <= gaps[:, 0])


def _main_annotations(trace: Trace, r: Roles) -> tuple[np.ndarray, np.ndarray]:
    """The main thread's annotations by start, outer first, and their nesting depths; kept
    on the Roles (the same for every device)."""
    cached = getattr(r, "_main_annotations", None)
    if cached is not None and cached[0] is trace:
        return cached[1], cached[2]
    ann = np.flatnonzero(r.annotation & (trace.track == r.main) & (trace.dur > 0))
    ann = ann[np.lexsort((-trace.end[ann], trace.start[ann]))]  # by start, outer first
    # Nesting depth: annotations begun before this one minus those already ended.
    depth = np.arange(len(ann)) - np.searchsorted(np.sort(trace.end[ann]), trace.start[ann],
                                                  side="right")
    r._main_annotations = (trace, ann, depth)  # type: ignore[attr-defined]  # a cache
    return ann, depth


def python_by_annotation(trace: Trace, r: Roles, spans: np.ndarray) -> dict[str, float]:
    """Split the `python` pieces by the innermost user annotation open on the main thread
    (steps aside); "" where none is. Largest first."""
    if len(spans) == 0:
        return {}
    ann, depth = _main_annotations(trace, r)
    if len(ann) == 0:
        return {"": iv.length(spans)}
    starts, ends = trace.start[ann], trace.end[ann]
    lo, hi = spans[0, 0], spans[-1, 1]
    pts = unique(np.concatenate([spans.ravel(), np.clip(starts, lo, hi),
                                    np.clip(ends, lo, hi)]))
    a, b = pts[:-1], pts[1:]
    keep = iv.covers(spans, a) & (b > a)
    a, b = a[keep], b[keep]
    owner = np.full(len(a), -1, dtype=np.int64)
    for level in range(int(depth.max()), -1, -1):  # innermost level first (a few levels)
        at = np.flatnonzero(depth == level)
        if len(at) == 0:
            continue
        j = np.searchsorted(starts[at], a, side="right") - 1
        hit = (owner < 0) & (j >= 0) & (a < ends[at][np.maximum(j, 0)])
        owner[hit] = at[j[hit]]
    names = np.where(owner >= 0, trace.name[ann][np.maximum(owner, 0)], -1)
    ids, inverse = np.unique(names, return_inverse=True)
    totals = np.bincount(inverse, weights=b - a)
    out = {("" if i < 0 else trace.names[i]): float(t) for i, t in zip(ids, totals, strict=True)}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
