"""Which of one thread's nested events covers a point: the nesting levels of a set of events,
built once (one sort), and the Python frames around a point, the user's own code first. Used by
the culprits (core/analysis/culprits.py) to attribute idle pieces to events."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.kineto import Cat, frame_tier, is_frame_name
from stallscope.core.trace import Trace, unique

MAX_LEVELS = 64          # deeper nesting (broken traces) is folded into the last level


class Nest:
    """One thread's events as nesting levels, built once (one sort): the innermost or outermost
    of them around any number of points, a searchsorted per level."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, ids: np.ndarray | None = None):
        ids = np.arange(len(starts)) if ids is None else ids.copy()
        if _outer_first(starts, ends):  # a thread's events, taken from the sorted trace
            self.s, self.e, self.ids = starts, ends, ids
        else:
            order = np.lexsort((-ends, starts))  # by start, outer first
            self.s, self.e, self.ids = starts[order], ends[order], ids[order]
        depth = np.arange(len(self.s)) - np.searchsorted(np.sort(self.e), self.s, side="right")
        depth = np.clip(depth, 0, MAX_LEVELS - 1).astype(np.int8)  # int8: a radix sort
        by = np.argsort(depth, kind="stable")  # each level stays sorted by start
        self.levels = [lv for lv in np.split(by, np.cumsum(np.bincount(depth))[:-1]) if len(lv)]

    def at(self, points: np.ndarray, innermost: bool = True) -> np.ndarray:
        """The id of the innermost (outermost) event covering each point, -1 where none."""
        out = np.full(len(points), -1, dtype=np.int64)
        for at in (reversed(self.levels) if innermost else self.levels):
            free = np.flatnonzero(out < 0)
            if len(free) == 0:
                break
            j = np.searchsorted(self.s[at], points[free], side="right") - 1
            jj = np.maximum(j, 0)
            hit = (j >= 0) & (points[free] < self.e[at][jj])
            out[free[hit]] = self.ids[at[jj[hit]]]
        return out


def _outer_first(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether the events already come by start, the outer (longer) first among equal starts:
    what np.lexsort((-ends, starts)) would give, unchanged (it is stable)."""
    if len(starts) < 2:
        return True
    if not (starts[1:] >= starts[:-1]).all():
        return False
    tie = starts[1:] == starts[:-1]
    return bool((ends[1:][tie] <= ends[:-1][tie]).all())


def owner_at(starts: np.ndarray, ends: np.ndarray, points: np.ndarray,
             innermost: bool = True) -> np.ndarray:
    """For each point, the index (into starts) of the innermost (or outermost) interval
    [start, end) covering it, else -1. Intervals are taken as nested (one thread's events)."""
    if len(starts) == 0 or len(points) == 0:
        return np.full(len(points), -1, dtype=np.int64)
    return Nest(starts, ends).at(points, innermost)


def pieces(spans: np.ndarray, events: np.ndarray, trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The idle `spans` cut at the bounds of `events` (indexes): (starts, ends) of the parts."""
    if len(spans) == 0:
        return np.zeros(0), np.zeros(0)
    lo, hi = spans[0, 0], spans[-1, 1]
    pts = unique(np.concatenate([spans.ravel(), np.clip(trace.start[events], lo, hi),
                                    np.clip(trace.end[events], lo, hi)]))
    a, b = pts[:-1], pts[1:]
    keep = iv.covers(spans, a) & (b > a)
    return a[keep], b[keep]


def attribute(trace: Trace, a: np.ndarray, b: np.ndarray, groups: list[np.ndarray],
              innermost: bool = True, nests: dict | None = None) -> np.ndarray:
    """Owner event of each piece [a, b): the first group (one thread's events each) with an
    event covering the piece's midpoint; -1 where none does. `nests` keeps each group's
    levels for the next call on the same group."""
    mid = (a + b) / 2
    owner = np.full(len(a), -1, dtype=np.int64)
    nests = {} if nests is None else nests
    for events in groups:
        free = np.flatnonzero(owner < 0)
        if len(events) == 0 or len(free) == 0:
            continue
        owner[free] = nest_of(trace, events, nests).at(mid[free], innermost)
    return owner


def touching(trace: Trace, events: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """The events that overlap the disjoint, sorted `spans` (only they can own a piece)."""
    if len(events) == 0 or len(spans) == 0:
        return events[:0]
    k = np.searchsorted(spans[:, 1], trace.start[events], side="right")
    ok = k < len(spans)
    ok[ok] = spans[k[ok], 0] < trace.end[events[ok]]
    found: np.ndarray = events[ok]
    return found


def nest_of(trace: Trace, events: np.ndarray, nests: dict) -> Nest:
    """The Nest of an array of event indexes, kept in `nests` by its contents."""
    key = hash(events.tobytes())
    nest = nests.get(key)
    if nest is None or len(nest.ids) != len(events):
        nest = nests[key] = Nest(trace.start[events], trace.end[events], events)
    return nest


def per_track(trace: Trace, mask: np.ndarray, tracks: Iterable[int]) -> list[np.ndarray]:
    """The events of `mask`, one array per track, in the order of `tracks`."""
    idx = np.flatnonzero(mask & (trace.dur > 0))
    return [idx[trace.track[idx] == t] for t in tracks]


# ----------------------------------------------------------------------------- frames

class Frames:
    """The innermost Python frame (cat python_function) around a point on a thread, preferring
    the user's own code over installed packages."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.nests: dict = {}
        frames = (trace.cat == Cat.PYTHON_FUNCTION) & (trace.dur > 0)
        self.any = np.flatnonzero(frames & trace.mask_names(is_frame_name))
        self.tiers = [np.flatnonzero(frames & trace.mask_names(lambda n, k=k: frame_tier(n) == k))
                      for k in (2, 1)] + [self.any]
        self.user = np.concatenate(self.tiers[:2])

    def __bool__(self) -> bool:
        return len(self.any) > 0

    def at(self, tracks: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Name id of the frame at each (track, point), -1 where the thread has none."""
        t = self.trace
        out = np.full(len(points), -1, dtype=np.int64)
        if not self:
            return out
        for track in unique(tracks):
            on = np.flatnonzero(tracks == track)
            for frames in self.tiers:
                frames = frames[t.track[frames] == track]
                free = on[out[on] < 0]
                if len(frames) == 0 or len(free) == 0:
                    continue
                k = nest_of(t, frames, self.nests).at(points[free])
                out[free[k >= 0]] = t.name[k[k >= 0]]
        return out
