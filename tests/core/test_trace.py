"""The trace loader: formats, columns, and bad input with one-line errors."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pytest

from stallscope.core.errors import TraceError
from stallscope.core.folder import plan_folder
from stallscope.core.kineto import Cat
from stallscope.core.trace import find_traces, load


def _write(tmp_path, name, events=None, doc=None, raw=None, gz=False):
    path = tmp_path / name
    data = raw if raw is not None else json.dumps(
        doc if doc is not None else {"traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


SMALL = [
    _x("ProfilerStep#1", 0, 100, cat="user_annotation"),
    _x("aten::mm", 10, 20),
    _x("gemm", 15, 30, cat="kernel", pid=0, tid=7, device=0, stream=7),
    _x("ProfilerStep#2", 100, 100, cat="user_annotation"),
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12, "s": "t",
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512, "Total Allocated": 512,
              "Total Reserved": 2048}},
]


def test_columns_are_sorted_numpy_with_interned_names(real_trace):
    t = load(real_trace("kineto_nw0"))
    assert t.start.dtype == np.float64 and t.end.dtype == np.float64
    assert np.all(np.diff(t.start) >= 0)
    assert np.all(t.end >= t.start)
    assert len(t.names) < t.n_events
    # 2021 format: Kernel/Memcpy/Memset become GPU categories on device 0, stream tid strings
    assert t.gpu_devices() == [0]
    assert (t.cat == Cat.KERNEL).sum() == 8772
    assert (t.cat == Cat.GPU_MEMCPY).sum() == 12
    # step annotations filed under "Operator" are annotations, not CPU ops
    steps = t.mask_names(lambda n: n.startswith("ProfilerStep#"))
    assert set(t.cat[steps].tolist()) == {Cat.USER_ANNOTATION}
    assert ("0", "stream 7") in t.tracks
    # pid/tid compare as strings: int pid and str tid of the main thread are one track
    assert ("25738", "25738") in t.tracks
    assert len(t.mem) == 12838


def test_json_plain_gz_and_bare_array_agree(tmp_path):
    a = load(_write(tmp_path, "a.json", SMALL))
    b = load(_write(tmp_path, "b.pt.trace.json.gz", SMALL, gz=True))
    c = load(_write(tmp_path, "c.json", raw=json.dumps(SMALL).encode()))
    for t in (b, c):
        assert np.array_equal(a.start, t.start) and np.array_equal(a.end, t.end)
        assert [a.names[i] for i in a.name] == [t.names[i] for i in t.name]
    assert a.gpu_devices() == [0]
    assert a.mem.total_reserved.tolist() == [2048.0]


def test_folder_opens_the_trace_the_folder_plan_picks_and_lists_all(tmp_path, real_trace):
    """load(folder) and find_traces follow core/folder.py: the trace's own clock says the rank-0
    file is newer (sampled rank 0 was recorded after rank 1), whatever the mtimes say; each
    folder is its own run, so the newer one is picked."""
    logdir = tmp_path / "tb"
    (logdir / "plugins").mkdir(parents=True)
    r0 = logdir / "plugins" / "host_rank0.1.pt.trace.json.gz"
    r1 = logdir / "host_rank1.2.pt.trace.json.gz"
    shutil.copy(real_trace("hta_sampled_rank-0"), r0)
    shutil.copy(real_trace("hta_sampled_rank-1"), r1)
    os.utime(r0, (1, 1))  # the older mtime: it no longer decides
    plan = plan_folder(logdir)
    assert [c.time_source for run in plan.runs for c in run.files] == ["trace", "trace"]
    assert find_traces(logdir) == [r0, r1] == plan.traces
    t = load(logdir)
    assert t.path == r0 and t.rank == 0


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.json", "no such file"),
    (lambda d: _write(d, "empty.json", raw=b""), "file is empty"),
    (lambda d: _write(d, "blank.json", raw=b"  \n"), "file is empty"),
    (lambda d: _write(d, "notjson.json", raw=b"hello world"), "not JSON"),
    (lambda d: _write(d, "bad.json", raw=b'{"traceEvents": [}'), "not valid JSON"),
    (lambda d: _write(d, "cut.json", raw=json.dumps({"traceEvents": SMALL}).encode()[:-40]),
     "truncated"),
    (lambda d: _write(d, "notatrace.json", doc={"hello": [1, 2]}), "not a trace"),
    (lambda d: _write(d, "wrongtype.json", doc={"traceEvents": 5}), "not a trace"),
    (lambda d: _write(d, "noevents.json", doc={"traceEvents": []}), "no usable trace events"),
    (lambda d: _write(d, "junk.json", raw=b'[1, "junk", {"a": 2}, null]'),
     "no usable trace events (3 malformed events)"),  # not "3 malformed event"
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(TraceError) as err:
        load(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_truncated_gzip(tmp_path):
    full = gzip.compress(json.dumps({"traceEvents": SMALL * 200}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(full[: len(full) // 2])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: gzip stream is truncated"):
        load(path)


def test_partly_valid_trace_loads_what_is_valid_and_counts_drops(tmp_path):
    bad = [
        {"ph": "X", "name": "no_ts", "cat": "cpu_op", "pid": 1, "tid": 1, "dur": 5},
        {"ph": "X", "name": "str_ts", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "abc", "dur": 5},
        {"ph": "X", "name": "num_str", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": "50", "dur": 5},
        _x("negative", 10, -4),
        {"ph": "X", "name": "list_ts", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": [1], "dur": 2},
        "not an event",
        _x("ProfilerStep#1", 0, 100, cat="user_annotation"),  # a duplicate step
    ]
    t = load(_write(tmp_path, "partial.json", SMALL + bad))
    names = [t.names[i] for i in t.name]
    assert "num_str" in names  # a number written as a string is still a number
    assert not {"no_ts", "str_ts", "negative", "list_ts"} & set(names)
    assert names.count("ProfilerStep#1") == 1
    assert t.dropped["negative duration"] == 1
    assert t.dropped["duplicate step"] == 1
    assert t.dropped["malformed event"] == 1
    assert t.dropped["missing or non-numeric ts/dur (or NaN)"] == 3


def test_nan_values_are_dropped(tmp_path):
    raw = json.dumps({"traceEvents": SMALL}).encode()[:-2] + \
        b', {"ph": "X", "name": "nan", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": NaN, "dur": 1},' \
        b' {"ph": "X", "name": "inf", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, ' \
        b'"dur": Infinity}]}'
    t = load(_write(tmp_path, "nan.json", raw=raw))
    assert t.n_events == 4
    assert t.dropped == {"missing or non-numeric ts/dur (or NaN)": 1, "infinite ts/dur": 1}


def test_too_large_for_memory_is_refused_up_front(tmp_path, monkeypatch):
    path = _write(tmp_path, "big.json.gz", SMALL * 5000, gz=True)
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", "100000")
    with pytest.raises(TraceError, match=r"big\.json\.gz: too large for the memory available: "
                                         r".* MiB of JSON .*; the budget of 0.1 MiB"):
        load(path)


def test_no_steps_no_device_properties(tmp_path):
    events = [_x("aten::add", 0, 10), _x("k", 2, 3, cat="kernel", pid=0, tid=7, device=0)]
    t = load(_write(tmp_path, "nosteps.json", events))
    assert t.device_properties == [] and t.rank is None
    assert t.gpu_devices() == [0]


def test_gzip_whose_size_trailer_understates_the_data(tmp_path):
    """A multi-member gzip records only its last member's size: the reader must grow."""
    text = json.dumps({"traceEvents": SMALL * 3000}).encode()
    cut = len(text) - 100
    path = tmp_path / "members.json.gz"
    path.write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]))
    t = load(path)
    assert t.n_events == 4 * 3000 - 2 * 2999  # duplicate steps dropped
    assert t.dropped == {"duplicate step": 2 * 2999}


def test_unknown_or_missing_phases_do_not_lose_the_batch(tmp_path):
    odd = [{"ph": "Z", "name": "custom", "ts": 1},  # a phase no writer we know uses
           {"name": "no phase at all", "ts": 2, "dur": 1, "cat": "cpu_op"},
           {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 11, "cat": "ac2g", "name": "flow"},
           {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    typed = load(_write(tmp_path, "plain.json", SMALL + odd[2:]))
    mixed = load(_write(tmp_path, "odd.json", SMALL + odd))
    for t in (typed, mixed):
        assert [t.names[i] for i in t.name] == ["ProfilerStep#1", "aten::mm", "gemm",
                                                "ProfilerStep#2"]
        assert t.mem.total_reserved.tolist() == [2048.0]
    assert mixed.dropped == {} and typed.dropped == {}


def test_pieces_cut_anywhere_read_what_the_slow_path_reads(tmp_path, monkeypatch):
    """The fast path cuts the event list at `},{`; cuts that fall inside a string or a nested
    object must move on, whatever the piece size."""
    from stallscope.core.readers import chrome

    tricky = [_x('},{"ph": "X"}, {', 1, 2), _x("a", 3, 4, shapes=[{"a": 1}, {"b": "},{"}]),
              {"ph": "s", "id": 1, "name": "},{", "ts": 5}, _x("\\\"},{", 6, 1)]
    text = json.dumps({"traceEvents": (SMALL + tricky) * 50, "distributedInfo": {"rank": 2}},
                      indent=1).encode()
    path = _write(tmp_path, "cuts.json", raw=text)
    with monkeypatch.context() as m:
        def no_fast(*args):
            return None
            yield
        m.setattr(chrome, "_fast", no_fast)
        slow = load(path)
    def slow_path(*args):
        raise AssertionError("the fast path gave up")

    monkeypatch.setattr(chrome, "_slow", slow_path)
    monkeypatch.setattr(chrome, "_MAX_MISCUTS", 10**6)
    for piece in (1, 7, 64, 1000):
        monkeypatch.setattr(chrome, "_PIECE", piece)
        t = load(path)
        assert [t.names[i] for i in t.name] == [slow.names[i] for i in slow.name]
        assert np.array_equal(t.start, slow.start) and np.array_equal(t.track, slow.track)
        assert t.rank == slow.rank == 2 and t.dropped == slow.dropped
    assert sorted(slow.names) == sorted({'},{"ph": "X"}, {', "a", '\\"},{', "ProfilerStep#1",
                                         "aten::mm", "gemm", "ProfilerStep#2"})
