"""Vectorised interval math on (N, 2) float64 arrays of [start, end).

A "set" here is sorted, disjoint intervals as produced by `union`. Zero-length intervals are
points: they count as covered (and so split an uncovered gap), but add no length.
"""

from __future__ import annotations

import numpy as np

EMPTY = np.zeros((0, 2), dtype=np.float64)


def as_intervals(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    return np.column_stack([np.asarray(start, np.float64), np.asarray(end, np.float64)])


def clip(iv: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Intervals overlapping [lo, hi], cut to it."""
    if len(iv) == 0:
        return EMPTY
    keep = (iv[:, 0] < hi) & (iv[:, 1] > lo)
    out = iv[keep].copy()
    np.clip(out, lo, hi, out=out)
    return out


def union(iv: np.ndarray) -> np.ndarray:
    """Merge overlapping or touching intervals into a sorted disjoint set."""
    if len(iv) == 0:
        return EMPTY
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    starts, ends = iv[:, 0], np.maximum.accumulate(iv[:, 1])
    new = np.empty(len(iv), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > ends[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(iv) - 1)
    return np.column_stack([starts[first], ends[last]])


def length(s: np.ndarray) -> float:
    return float((s[:, 1] - s[:, 0]).sum()) if len(s) else 0.0


def gaps(s: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Maximal uncovered intervals of [lo, hi] for a disjoint set `s` (clipped to [lo, hi])."""
    if hi <= lo:
        return EMPTY
    bounds = np.concatenate([[lo], s.ravel(), [hi]]).reshape(-1, 2)
    return bounds[bounds[:, 1] > bounds[:, 0]]


def covers(s: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each point x, whether the disjoint set s covers it (start <= x < end)."""
    x = np.asarray(x, dtype=np.float64)
    if len(s) == 0:
        return np.zeros(x.shape, dtype=bool)
    i = np.searchsorted(s[:, 0], x, side="right") - 1
    return (i >= 0) & (x < s[np.maximum(i, 0), 1])


def measure_in(s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Covered length of the disjoint set s inside each window [lo_k, hi_k]."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    before = lengths_before(s)
    return covered_upto(s, hi, before) - covered_upto(s, lo, before)


def lengths_before(s: np.ndarray) -> np.ndarray:
    """Prefix sums of the disjoint set's lengths (len(s) + 1): what covered_upto reuses."""
    return np.concatenate([[0.0], np.cumsum(s[:, 1] - s[:, 0])]) if len(s) else np.zeros(1)


def covered_upto(s: np.ndarray, x, before: np.ndarray | None = None) -> np.ndarray:
    """Covered length of the disjoint set s below each point x (O(log n) a point); `before`:
    lengths_before(s), kept by a caller that asks many times."""
    x = np.asarray(x, dtype=np.float64)
    if len(s) == 0:
        return np.zeros(x.shape, dtype=np.float64)
    before = lengths_before(s) if before is None else before
    i = np.searchsorted(s[:, 0], x, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(x - s[j, 0], 0.0, s[j, 1] - s[j, 0])
    return np.where(i >= 0, before[j] + inside, 0.0)


def longest(spans: np.ndarray) -> tuple[float, float] | None:
    """The longest of (N, 2) spans as (start, end); None for none (the first of equals)."""
    if len(spans) == 0:
        return None
    k = int(np.argmax(spans[:, 1] - spans[:, 0]))
    return float(spans[k, 0]), float(spans[k, 1])


def paint(base: np.ndarray, layers: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Split the disjoint set `base` by priority layers.

    Each piece of `base` gets the index of the first layer covering it, or len(layers) when
    none does. Returns (spans (K, 2), codes (K,) int8) with adjacent equal codes merged.
    """
    if len(base) == 0:
        return EMPTY, np.zeros(0, dtype=np.int8)
    lo, hi = base[0, 0], base[-1, 1]
    cuts = [base.ravel()] + [clip(layer, lo, hi).ravel() for layer in layers]
    points = np.unique(np.concatenate(cuts))
    # Elementary pieces [a, b) never straddle a boundary, so their left end decides membership
    # (a midpoint can round onto b at 1e15 µs).
    a, b = points[:-1], points[1:]
    keep = covers(base, a) & (b > a)
    a, b = a[keep], b[keep]
    if len(a) == 0:
        return EMPTY, np.zeros(0, dtype=np.int8)
    codes = np.full(len(a), len(layers), dtype=np.int8)
    for k in range(len(layers) - 1, -1, -1):
        codes[covers(layers[k], a)] = k
    # Merge neighbours that touch and share a code.
    new = np.ones(len(a), dtype=bool)
    new[1:] = (a[1:] != b[:-1]) | (codes[1:] != codes[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(a) - 1)
    return np.column_stack([a[first], b[last]]), codes[first]


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The parts of the disjoint set `a` that the disjoint set `b` does not cover."""
    if len(a) == 0 or len(b) == 0:
        return a
    pieces, codes = paint(a, [b])
    return pieces[codes == 1]
