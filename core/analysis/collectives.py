"""Collectives on other threads: the main thread's `python` time during which collective ops
(gloo:*, c10d::*, nccl:*, record_param_comms) run on other threads is communication, not
Python. A CPU-only DDP rank waits so on gloo's threads; GPU ranks beside NCCL's."""

from __future__ import annotations

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.analysis.threads import Roles, union_of
from stallscope.core.kineto import is_collective_name
from stallscope.core.report import CollectiveWait
from stallscope.core.trace import Trace, unique


def collective_wait(trace: Trace, r: Roles, python: np.ndarray,
                    device: int | None) -> CollectiveWait | None:
    """How much of the `python` spans (disjoint) collectives on other threads cover, by name."""
    if r.main is None or len(python) == 0:
        return None
    coll = trace.mask_names(is_collective_name) & (trace.track != r.main) & ~r.gpu
    coll &= (trace.dur > 0) & (trace.end > r.lo) & (trace.start < r.hi)
    if not coll.any():
        return None
    covered = _overlap(python, union_of(trace, coll, r.lo, r.hi))
    us = iv.length(covered)
    if us <= 0:
        return None
    by_name = {}
    for nid in unique(trace.name[coll]):
        part = iv.length(_overlap(covered, union_of(trace, coll & (trace.name == nid),
                                                     r.lo, r.hi)))
        if part > 0:
            by_name[trace.names[int(nid)]] = part
    idx = np.flatnonzero(coll)
    touching = idx[iv.covers(covered, np.clip(trace.start[idx], r.lo, r.hi))
                   | _any_inside(covered, trace.start[idx], trace.end[idx])]
    threads = [trace.tracks[int(k)] for k in unique(trace.track[touching])]
    return CollectiveWait(device=device, us=us, python_us=iv.length(python),
                          by_name=dict(sorted(by_name.items(), key=lambda kv: -kv[1])),
                          threads=threads)


def _overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The parts of the disjoint set `a` inside the disjoint set `b`."""
    if len(a) == 0 or len(b) == 0:
        return iv.EMPTY
    spans, codes = iv.paint(a, [b])
    inside: np.ndarray = spans[codes == 0]
    return inside


def _any_inside(spans: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each [start, end) holds the start of some interval of the disjoint set."""
    if len(spans) == 0:
        return np.zeros(len(starts), dtype=bool)
    k = np.searchsorted(spans[:, 0], starts, side="left")
    holds: np.ndarray = (k < len(spans)) & (spans[np.minimum(k, len(spans) - 1), 0] < ends)
    return holds
