"""Fuzzing the trace loader (hypothesis): random events, metadata, nesting, number edge cases,
truncations and byte flips, plain and gzip'd. The loader either loads or raises a one-line
StallscopeError naming the file, never anything else, within the memory budget; and cutting the
event list into pieces (the fast path) reads exactly what the event-by-event path reads."""

from __future__ import annotations

import gzip
import json
import os
import random
import resource
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallscope.core.errors import StallscopeError
from stallscope.core.readers import chrome
from stallscope.core.trace import load

BUDGET = 64 << 20
COLUMNS = ("start", "end", "dur", "cat", "name", "track", "device", "stream", "corr")

# Documents are built by a random.Random seeded from a drawn integer: drawing hundreds of nested
# values through strategies one by one costs more than the loading (the failing file is printed
# whole, so a failure reproduces without shrinking).
TRICKY = ["},{", '}, {"ph": "X"}', "\\", '"', "ProfilerStep#1", "ProfilerStep#x", "[memory]",
          "ü€😀", "\n", "{}", "nccl", "", "a", "gemm", "stream 7", "\udcff"]
NUMBERS = [0, 1, -1, 7, 300, 2**31, 2**53, 2**63, 2**70, -(2**70), 0.5, 1e-320, 1e308, -1e308,
           float("inf"), float("-inf"), float("nan"), 1623142623460111, 12.345678]
PHASES = ["X", "X", "X", "X", "i", "I", "s", "f", "M", "C", "B", "Z", ""]
CATS = ["cpu_op", "kernel", "gpu_memcpy", "user_annotation", "cuda_runtime", "mtia_ccp_events",
        "cuda_profiler_range", "Trace", "Operator", "Kernel"]
ARG_KEYS = ["device", "stream", "correlation", "Device Type", "Device Id", "Bytes",
            "Total Allocated", "Total Reserved", "External id", "Input Dims"]
META_KEYS = ["deviceProperties", "distributedInfo", "schemaVersion", "traceName"]


class _Verbatim(str):
    """JSON text spliced into the document as is (json.dumps would recurse too deep)."""


def _text(r):
    return r.choice(TRICKY) if r.random() < 0.7 else "".join(r.choices(TRICKY, k=r.randint(1, 3)))


def _scalar(r):
    kind = r.random()
    if kind < 0.1:
        return None
    if kind < 0.15:
        return r.random() < 0.5
    if kind < 0.6:
        return r.choice(NUMBERS) if r.random() < 0.5 else r.randint(-5, 10**6)
    return _text(r)


def _value(r, depth=0):
    kind = r.random()
    if kind < 0.03:  # deep: a few levels, or past msgspec's limit
        n = r.choice([50, 990, 1100, 3000])
        o, c = r.choice([("[", "]"), ('{"a":', "}")])
        return _Verbatim(o * n + "1" + c * n)
    if depth > 3 or kind < 0.6:
        return _scalar(r)
    if kind < 0.8:
        return [_value(r, depth + 1) for _ in range(r.randint(0, 3))]
    return {_text(r): _value(r, depth + 1) for _ in range(r.randint(0, 3))}


def _event(r):
    if r.random() < 0.1:
        return _value(r)
    e = {}
    for key, make in (("ph", lambda: r.choice(PHASES) if r.random() < 0.9 else _scalar(r)),
                      ("name", lambda: _text(r) if r.random() < 0.8 else _scalar(r)),
                      ("cat", lambda: r.choice(CATS) if r.random() < 0.8 else _scalar(r)),
                      ("pid", lambda: r.randint(-2, 3) if r.random() < 0.7 else _scalar(r)),
                      ("tid", lambda: r.randint(-2, 3) if r.random() < 0.7 else _scalar(r)),
                      ("ts", lambda: r.randint(0, 1000) if r.random() < 0.7 else _scalar(r)),
                      ("dur", lambda: r.randint(0, 100) if r.random() < 0.7 else _scalar(r)),
                      ("args", lambda: {k: _value(r) for k in r.sample(ARG_KEYS, r.randint(0, 4))}
                       if r.random() < 0.8 else _value(r)),
                      ("id", lambda: _scalar(r))):
        if r.random() < 0.85:
            e[key] = make()
    return e


def _document(r):
    events = [_event(r) for _ in range(r.randint(0, 12))]
    meta = {k: _value(r) if r.random() < 0.5 else [{_text(r): _scalar(r)}]
            for k in r.sample(META_KEYS, r.randint(0, 3))}
    shape = r.choice(["doc", "doc", "doc_meta_after", "array", "other"])
    if shape == "array":
        return events
    if shape == "other":
        return _value(r)
    return {**meta, "traceEvents": events} if shape == "doc" else {"traceEvents": events, **meta}


@st.composite
def documents(draw):
    r = random.Random(draw(st.integers(0, 2**64)))
    return _dumps(_document(r), draw(st.sampled_from([None, 1, 2])))


def _dumps(value, indent) -> bytes:
    """json.dumps, with _Verbatim values written as they are; NaN/Infinity stay in, and lone
    surrogates become bytes that are not UTF-8."""
    marks: dict[str, str] = {}

    def swap(v):
        if isinstance(v, _Verbatim):
            key = f"@@verbatim{len(marks)}@@"
            marks[key] = str(v)
            return key
        if isinstance(v, list):
            return [swap(x) for x in v]
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        return v

    out = json.dumps(swap(value), indent=indent, ensure_ascii=False)
    for key, raw in marks.items():
        out = out.replace(json.dumps(key), raw)
    return out.encode("utf-8", "surrogateescape")


@st.composite
def files(draw):
    data = draw(documents())
    how = draw(st.sampled_from(["plain", "plain", "truncate", "flip", "gzip", "gzip_truncate",
                                "gzip_members"]))
    if how == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    elif how == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    elif how.startswith("gzip"):
        if how == "gzip_members":
            cut = draw(st.integers(0, len(data)))
            data = gzip.compress(data[:cut]) + gzip.compress(data[cut:])
        else:
            data = gzip.compress(data)
        if how == "gzip_truncate":
            data = data[:draw(st.integers(0, len(data)))]
    piece = draw(st.sampled_from([16 << 20, 40, 7, 1]))
    return data, how, piece


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


@contextmanager
def piece_size(n: int):
    with mock.patch.object(chrome, "_PIECE", n):
        yield


def _slow_only(p):
    """The same file through the event-by-event path only."""
    with mock.patch.object(chrome, "_fast", lambda *a: _none()):
        return load(p)


def _none():
    return None
    yield


def _load_or_error(p):
    try:
        return load(p), None
    except StallscopeError as exc:
        return None, exc


def test_loader_loads_or_says_why_in_one_line(workdir):
    """2,000 examples; the process's peak memory grows by less than a few budgets."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    _fuzz(workdir)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < 4 * BUDGET


@settings(max_examples=int(os.environ.get("STALLSCOPE_FUZZ_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(case=files())
def _fuzz(workdir, case):
    data, how, piece = case
    path = workdir / ("t.json.gz" if how.startswith("gzip") else "t.json")
    path.write_bytes(data)
    with mock.patch.dict(os.environ, {"STALLSCOPE_MEMORY_LIMIT": str(BUDGET)}), \
            warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy overflow/invalid warnings
        with piece_size(piece):
            trace, error = _load_or_error(path)
        if error is not None:
            text = str(error)
            assert "\n" not in text and text.startswith(str(path)), text
            assert "b'" not in text and "Traceback" not in text
            return
        assert np.all(np.diff(trace.start) >= 0) and np.all(trace.end >= trace.start)
        assert np.all(np.isfinite(trace.start)) and np.all(np.isfinite(trace.end))
        assert trace.name.max(initial=-1) < len(trace.names)
        assert trace.track.max(initial=-1) < len(trace.tracks)
        # the pieces read exactly what the event-by-event path reads
        slow = _slow_only(path)
        for col in COLUMNS:
            assert np.array_equal(getattr(trace, col), getattr(slow, col)), col
        assert trace.names == slow.names and trace.tracks == slow.tracks
        assert trace.dropped == slow.dropped and trace.notes == slow.notes
        assert trace.device_properties == slow.device_properties
        assert (trace.rank, trace.world_size) == (slow.rank, slow.world_size)
