"""Nest skips its sort when a thread's events already come by start, outer first (as they do when
taken from the sorted trace): the levels it finds must be those of the sorted path."""

from __future__ import annotations

import numpy as np
import pytest
from fixture_traces import fixture_path

from stallscope.core.analysis.nesting import Nest, _outer_first
from stallscope.core.kineto import Cat
from stallscope.core.trace import load


def _nested(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Calls nested like a thread's: children inside parents, many sharing a start (µs ticks)."""
    starts, ends = [], []

    def call(lo: float, hi: float, depth: int) -> None:
        starts.append(lo)
        ends.append(hi)
        t = lo
        while depth < 6 and t < hi and len(starts) < n:
            d = float(rng.integers(0, max(int(hi - t), 1) + 1))
            call(t, min(t + d, hi), depth + 1)
            t = min(t + d, hi) + float(rng.integers(0, 3))

    t = 0.0
    while len(starts) < n:
        d = float(rng.integers(1, 500))
        call(t, t + d, 0)
        t += d + float(rng.integers(0, 5))
    # identical calls have no order of their own (a stable sort keeps the input's): one each
    pairs = np.unique(np.column_stack([starts, ends]), axis=0)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


@pytest.mark.parametrize("seed", range(5))
def test_presorted_events_give_the_levels_of_the_sorted_path(seed):
    rng = np.random.default_rng(seed)
    starts, ends = _nested(rng, 3000)
    order = np.lexsort((-ends, starts))
    s, e, ids = starts[order], ends[order], order
    assert _outer_first(s, e)
    shuffled = rng.permutation(len(s))
    assert not _outer_first(s[shuffled], e[shuffled])
    points = rng.uniform(s.min() - 5, e.max() + 5, 5000)
    fast = Nest(s, e, ids)
    slow = Nest(s[shuffled], e[shuffled], ids[shuffled])
    for innermost in (True, False):
        assert np.array_equal(fast.at(points, innermost), slow.at(points, innermost))
    assert len(fast.levels) == len(slow.levels)


def test_equal_starts_in_the_wrong_order_are_sorted():
    starts = np.array([0.0, 0.0, 5.0])
    ends = np.array([3.0, 10.0, 6.0])  # the outer call second: not outer first
    assert not _outer_first(starts, ends)
    nest = Nest(starts, ends)
    assert nest.at(np.array([1.0, 4.0, 5.5]), innermost=True).tolist() == [0, 1, 2]
    assert nest.at(np.array([1.0, 4.0, 5.5]), innermost=False).tolist() == [1, 1, 1]


def test_a_real_threads_ops_take_the_presorted_path():
    trace = load(fixture_path("kineto_nw0"))
    ops = np.flatnonzero((trace.cat == Cat.CPU_OP) & (trace.dur > 0))
    main = np.bincount(trace.track[ops]).argmax()
    ops = ops[trace.track[ops] == main]
    assert _outer_first(trace.start[ops], trace.end[ops])
