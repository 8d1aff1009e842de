"""The per-device lookups of one analysis, built once per (trace, roles): a trace with 1,000
devices then costs each device the size of its own events, not another pass over all of them
(device_stats used to mask the whole trace ~10 times per device: quadratic, 269 s for a
hostile 1,000-device trace).

    ix = index_for(trace, r)
    ops = ix.ops(dev)                     # the device's GPU ops, ascending event index
    tracks = ix.launch_tracks(ops)        # threads that launched them (threads.launch_tracks)
    ix.on_tracks(ix.cpu_ops, tracks)      # events of those threads, ascending index
"""

from __future__ import annotations

import numpy as np

from stallscope.core.analysis.threads import Roles
from stallscope.core.kineto import RUNTIME_CATS
from stallscope.core.trace import Trace, in_codes, unique


class ByDevice:
    def __init__(self, trace: Trace, r: Roles) -> None:
        gpu = np.flatnonzero(r.gpu)
        order = np.argsort(trace.device[gpu], kind="stable")  # stable: ascending index kept
        self._gpu = gpu[order]
        devices = trace.device[self._gpu]
        self._devices, self._first = np.unique(devices, return_index=True)
        self._end = np.r_[self._first[1:], len(devices)]
        runtime = np.flatnonzero(in_codes(trace.cat, RUNTIME_CATS)
                                 & (trace.corr >= 0))
        by_corr = np.argsort(trace.corr[runtime], kind="stable")
        self._rt_corr = trace.corr[runtime][by_corr]
        self._rt_track = trace.track[runtime][by_corr]
        self.cpu_ops = self._by_track(trace, np.flatnonzero(r.cpu_op))
        self.syncs = self._by_track(trace, np.flatnonzero(r.sync))
        self.trace = trace

    @staticmethod
    def _by_track(trace: Trace, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(trace.track[idx], kind="stable")
        return idx[order], trace.track[idx][order]

    def ops(self, dev: int) -> np.ndarray:
        """The device's GPU ops (r.gpu & device == dev), ascending event index."""
        k = np.searchsorted(self._devices, dev)
        if k == len(self._devices) or self._devices[k] != dev:
            return np.zeros(0, dtype=np.int64)
        return self._gpu[self._first[k]:self._end[k]]

    def launch_tracks(self, ops: np.ndarray) -> np.ndarray:
        """L(d) of threads.launch_tracks: the tracks of runtime/driver events whose correlation
        is that of one of `ops`."""
        ids = self.trace.corr[ops]
        ids = unique(ids[ids >= 0])
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        lo = np.searchsorted(self._rt_corr, ids, side="left")
        hi = np.searchsorted(self._rt_corr, ids, side="right")
        return unique(self._rt_track[_ranges(lo, hi)]).astype(np.int64)

    @staticmethod
    def on_tracks(table: tuple[np.ndarray, np.ndarray], tracks: np.ndarray) -> np.ndarray:
        """The events of `table` (cpu_ops or syncs) on any of `tracks`, ascending index."""
        idx, track = table
        tracks = unique(tracks)
        lo = np.searchsorted(track, tracks, side="left")
        hi = np.searchsorted(track, tracks, side="right")
        return np.sort(idx[_ranges(lo, hi)])


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions lo[i]..hi[i]-1 of every i, concatenated."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
    return starts + np.arange(total)


def index_for(trace: Trace, r: Roles) -> ByDevice:
    """The ByDevice of this analysis, kept on its Roles (built on the first device, reused
    for the others, gone with the Roles when the analysis ends)."""
    ix = getattr(r, "_by_device", None)
    if ix is None or ix.trace is not trace:
        ix = ByDevice(trace, r)
        r._by_device = ix  # type: ignore[attr-defined]  # a cache, not one of its fields
    return ix
