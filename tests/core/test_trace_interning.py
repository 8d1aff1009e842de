"""The columns' interned ids (names, categories, threads) come out in the order their values first
appear in the file, and trace.unique (the sort-based np.unique the analysis uses) gives what
np.unique gives; in_codes and in_ids are np.isin."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from fixture_traces import fixture_path

from stallscope.core.readers.columns import in_ids
from stallscope.core.trace import in_codes, load, unique

TRACES = ["kineto_nw0", "hta_rank-0", "hta_amd_trace", "hta_mtia_inference"]


def _x_events(path) -> list[dict]:
    """The complete events as Python's json reads them, in file order."""
    with gzip.open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _first_seen(values) -> list:
    return list(dict.fromkeys(values))


@pytest.mark.parametrize("prefix", TRACES)
def test_names_and_threads_are_numbered_by_first_appearance(prefix):
    path = fixture_path(prefix)
    xs = _x_events(path)
    trace = load(path)
    assert trace.names == _first_seen(e.get("name", "") for e in xs)
    assert trace.tracks == _first_seen((str(e.get("pid", 0)), str(e.get("tid", 0))) for e in xs)


@pytest.mark.parametrize("prefix", TRACES)
def test_each_event_keeps_its_own_name_and_thread(prefix):
    """Every kept event's (name, thread) is one the file wrote for an event with the
    same start and duration."""
    path = fixture_path(prefix)
    trace = load(path)
    written: dict[tuple, set] = {}
    for e in _x_events(path):
        key = (float(e["ts"]), float(e["dur"])) if "ts" in e and "dur" in e else None
        if key is not None:
            written.setdefault(key, set()).add(
                (e.get("name", ""), (str(e.get("pid", 0)), str(e.get("tid", 0)))))
    assert trace.n_events > 0
    for i in range(0, trace.n_events, max(trace.n_events // 2000, 1)):
        key = (float(trace.start[i]), float(trace.dur[i]))
        got = (trace.names[trace.name[i]], trace.tracks[trace.track[i]])
        assert got in written[key], (i, got)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, bool])
def test_unique_is_np_unique(dtype):
    rng = np.random.default_rng(7)
    cases = [np.zeros(0, dtype), np.array([3], dtype),
             (rng.integers(0, 2, 1000) if dtype is bool
              else rng.integers(0, 100, 5000)).astype(dtype),
             np.repeat(np.arange(0, 3000, dtype=np.int64) * 7, 3).astype(dtype)
             if dtype not in (np.int8, bool) else (np.arange(50) % 5).astype(dtype)]
    if dtype in (np.int32, np.int64):
        cases.append(np.array([5, -1, -1, 2**20, 5, -7], dtype))
    for values in cases:
        got = unique(values)
        want = np.unique(values)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)


def test_unique_of_floats_folds_nans_as_np_unique_does():
    values = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    assert np.array_equal(unique(values), np.unique(values), equal_nan=True)
    assert len(unique(values)) == 3


def test_in_codes_and_in_ids_are_np_isin():
    rng = np.random.default_rng(3)
    cats = rng.integers(-3, 40, 20000).astype(np.int8)
    for codes in [(), (5,), (1, 2, 3), (7, 7, 39, -3), tuple(range(-3, 40))]:
        assert np.array_equal(in_codes(cats, codes),
                              np.isin(cats, np.array(codes, dtype=np.int8)))
    names = rng.integers(0, 500, 20000).astype(np.int32)
    for ids in [np.zeros(0, np.int32), np.array([0]), np.array([499, 3, 3, 250])]:
        assert np.array_equal(in_ids(names, ids, 500), np.isin(names, ids))


def test_mask_names_is_the_events_whose_name_passes():
    trace = load(fixture_path("kineto_nw0"))
    mask = trace.mask_names(lambda n: n.startswith("aten::"))
    assert mask.any() and not mask.all()
    assert mask.tolist() == [trace.names[i].startswith("aten::") for i in trace.name]
