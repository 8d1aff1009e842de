"""Interval math against a brute-force reference on random intervals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope.core import intervals as iv

# Integer endpoints on a small grid: the brute force paints each unit cell [k, k+1).
GRID = 60
interval = st.tuples(st.integers(0, GRID), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1]))
interval_lists = st.lists(interval, max_size=25)


def _arr(pairs) -> np.ndarray:
    return np.array(pairs, dtype=np.float64).reshape(-1, 2)


def _cells(pairs, lo=0, hi=GRID + 12) -> np.ndarray:
    """Boolean per unit cell: covered by some positive-length interval."""
    cells = np.zeros(hi - lo, dtype=bool)
    for a, b in pairs:
        cells[max(a, lo) - lo:max(min(b, hi), lo) - lo] = True
    return cells


@settings(max_examples=300, deadline=None)
@given(interval_lists)
def test_union_is_disjoint_sorted_and_has_the_brute_force_length(pairs):
    u = iv.union(_arr(pairs))
    assert np.all(u[:, 1] >= u[:, 0])
    assert np.all(u[1:, 0] > u[:-1, 1])
    assert iv.length(u) == _cells(pairs).sum()


@settings(max_examples=300, deadline=None)
@given(interval_lists, st.integers(0, 30), st.integers(1, 40))
def test_gaps_are_the_uncovered_cells_of_the_window(pairs, lo, width):
    hi = lo + width
    u = iv.union(iv.clip(_arr(pairs), lo, hi))
    g = iv.gaps(u, lo, hi)
    covered = _cells(pairs, lo, hi)
    assert iv.length(g) == (~covered).sum()
    assert iv.length(u) + iv.length(g) == width
    # Maximal uncovered runs; a zero-length interval (a point) inside a run splits it.
    points = {a for a, b in pairs if a == b and lo < a < hi}
    runs = 0
    for k in range(width):
        if not covered[k] and (k == 0 or covered[k - 1] or (lo + k) in points):
            runs += 1
    assert len(g) == runs


@settings(max_examples=300, deadline=None)
@given(interval_lists, st.lists(interval_lists, min_size=1, max_size=4))
def test_paint_charges_each_cell_to_the_first_covering_layer(base_pairs, layer_pairs):
    base = iv.union(_arr(base_pairs))
    layers = [iv.union(_arr(p)) for p in layer_pairs]
    spans, codes = iv.paint(base, layers)
    base_cells = _cells(base_pairs)
    expected = np.full(len(base_cells), -1)
    for k in range(len(layers) - 1, -1, -1):
        expected[_cells(layer_pairs[k])] = k
    expected[expected == -1] = len(layers)
    for code in range(len(layers) + 1):
        got = (spans[:, 1] - spans[:, 0])[codes == code].sum()
        assert got == (base_cells & (expected == code)).sum()
    assert iv.length(spans) == iv.length(base)


@settings(max_examples=200, deadline=None)
@given(interval_lists, st.lists(st.tuples(st.integers(0, 70), st.integers(0, 20)), max_size=8))
def test_measure_in_windows(pairs, windows):
    u = iv.union(_arr(pairs))
    lo = np.array([w[0] for w in windows], dtype=np.float64)
    hi = lo + np.array([w[1] for w in windows], dtype=np.float64)
    got = iv.measure_in(u, lo, hi)
    for k, (a, b) in enumerate(zip(lo.astype(int), hi.astype(int), strict=True)):
        assert got[k] == _cells(pairs, 0, 100)[a:b].sum()


def test_covers_is_half_open():
    s = iv.union(_arr([(1, 3), (5, 6)]))
    assert iv.covers(s, np.array([0.5, 1, 2.9, 3, 5, 6])).tolist() == [
        False, True, True, False, True, False]


def test_fractional_intervals_touching_merge():
    u = iv.union(_arr([(0.25, 1.5), (1.5, 2.75), (3.0, 3.0)]))
    assert u.tolist() == [[0.25, 2.75], [3.0, 3.0]]


@settings(max_examples=200, deadline=None)
@given(interval_lists, st.lists(st.integers(-5, 80), max_size=12))
def test_covered_upto_counts_the_cells_below_each_point(pairs, xs):
    u = iv.union(_arr(pairs))
    before = iv.lengths_before(u)
    for kept in (None, before):  # computed per call, or kept by the caller (the timeline)
        got = iv.covered_upto(u, np.array(xs, dtype=np.float64), kept)
        want = [_cells(pairs, 0, 100)[:max(x, 0)].sum() for x in xs]
        assert got.tolist() == want


@given(interval_lists)
def test_longest_is_the_first_longest_span(pairs):
    spans = _arr(pairs)
    got = iv.longest(spans)
    if not pairs:
        assert got is None
        return
    best = max(b - a for a, b in pairs)
    assert got == next((float(a), float(b)) for a, b in pairs if b - a == best)
