"""Reading session folders: replay, follow with torn lines, traces, closing a session."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stallscope.core.errors import StallscopeError
from stallscope.core.session.reader import (
    EventFollower,
    is_session,
    open_session,
    read_events,
    write_finished,
)


def line(**record) -> bytes:
    return (json.dumps(record) + "\n").encode()


def make_session(root, events: bytes, traces=("a.pt.trace.json.gz",)):
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps({"script": "/x/train.py"}))
    (root / "events.jsonl").write_bytes(events)
    (root / "traces").mkdir(exist_ok=True)
    for name in traces:
        (root / "traces" / name).write_bytes(b"\x1f\x8b")
    (root / "stdout.log").write_text("hello\nworld\n")
    return root


def test_follower_never_hands_out_a_torn_line(tmp_path):
    path = tmp_path / "events.jsonl"
    whole = line(event="started", t=1.0) + line(event="step", t=2.0, n=0, wall_ms=5.5)
    follower = EventFollower(tmp_path)
    assert follower.poll() == []
    cut = len(whole) - 7  # the runner is in the middle of writing the step line
    path.write_bytes(whole[:cut])
    assert [e["event"] for e in follower.poll()] == ["started"]
    assert follower.poll() == []
    with open(path, "ab") as f:
        f.write(whole[cut:])
    got = follower.poll()
    assert got == [{"event": "step", "t": 2.0, "n": 0, "wall_ms": 5.5}]
    assert follower.bad_lines == 0


def test_follower_byte_by_byte_gets_every_event_once(tmp_path):
    data = b"".join(line(event="step", t=float(i), n=i) for i in range(20))
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"")
    follower = EventFollower(tmp_path)
    got = []
    for i in range(0, len(data), 13):
        with open(path, "ab") as f:
            f.write(data[i:i + 13])
        got += follower.poll()
    assert [e["n"] for e in got] == list(range(20))


def test_follower_picks_up_rank_files_and_tags_them(tmp_path):
    follower = EventFollower(tmp_path)
    (tmp_path / "events.jsonl").write_bytes(line(event="started", t=1.0))
    assert len(follower.poll()) == 1
    (tmp_path / "events.rank1.jsonl").write_bytes(line(event="step", t=3.0, n=0))
    (tmp_path / "events.rank0.jsonl").write_bytes(line(event="step", t=2.0, n=0))
    got = follower.poll()
    assert [(e["t"], e["rank"]) for e in got] == [(2.0, 0), (3.0, 1)]


def test_replay_skips_garbage_and_a_torn_last_line(tmp_path):
    data = (line(event="started", t=1.0) + b"not json\n" + b"[1, 2]\n"
            + line(event="step", t=2.0, n=0, wall_ms=10.0, data_wait_ms=4.0)
            + b'{"event": "step", "t": 3.0, "n"')
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    assert [e["event"] for e in read_events(path)] == ["started", "step"]


def test_open_session_steps_summary_and_traces(tmp_path):
    events = line(event="started", t=1.0)
    for n, (wall, wait) in enumerate([(500.0, 400.0), (100.0, 80.0), (120.0, 60.0),
                                      (80.0, 40.0)]):
        events += line(event="step", t=2.0 + n, n=n, wall_ms=wall, data_wait_ms=wait,
                       rss=1000 + n, phase="active")
    events += line(event="trace_ready", t=9.0, path="traces/b.pt.trace.json.gz")
    events += line(event="finished", t=10.0, rc=0, reason="stopped after profiling window")
    root = make_session(tmp_path / "s", events, ("a.pt.trace.json.gz", "b.pt.trace.json.gz"))
    (root / "traces" / ".b.pt.trace.json.gz.part").write_bytes(b"partial")
    assert is_session(root)
    s = open_session(root)
    assert s.run["script"] == "/x/train.py"
    steps = s.steps()
    np.testing.assert_array_equal(steps.wall_ms, [500, 100, 120, 80])
    assert np.isnan(steps.cuda_allocated).all() and steps.rss[-1] == 1003
    # the announced trace first; an unannounced complete one after; never the .part file
    assert [p.name for p in s.traces()] == ["b.pt.trace.json.gz", "a.pt.trace.json.gz"]
    summary = s.summary()
    assert summary["steps"] == 4 and summary["rc"] == 0
    assert summary["median_step_ms"] == 100.0  # step 0 (start-up) left out
    assert summary["data_wait_share"] == pytest.approx(180 / 300)
    assert s.stdout() == "hello\nworld\n"


def test_session_moved_from_another_machine_resolves_absolute_paths(tmp_path):
    events = line(event="trace_ready", t=1.0, path="/elsewhere/s/traces/a.pt.trace.json.gz")
    root = make_session(tmp_path / "s", events)
    assert [p for p in open_session(root).traces()] == [root / "traces" / "a.pt.trace.json.gz"]


def test_write_finished_once_and_after_a_torn_line(tmp_path):
    root = make_session(tmp_path / "s", line(event="started", t=1.0) + b'{"event": "st')
    assert open_session(root).finished is None
    assert write_finished(root, -9, "killed by SIGKILL")
    assert not write_finished(root, 0, "again")
    s = open_session(root)
    assert s.finished["rc"] == -9 and s.finished["reason"] == "killed by SIGKILL"
    assert [e["event"] for e in s.events] == ["started", "finished"]


def test_write_finished_creates_a_session_for_a_run_that_never_started(tmp_path):
    root = tmp_path / "never"
    assert write_finished(root, None, "cannot start the interpreter /nope/python")
    s = open_session(root)
    assert s.finished["reason"].startswith("cannot start") and (root / "stdout.log").exists()


def test_not_a_session(tmp_path):
    with pytest.raises(StallscopeError, match="not a stallscope session"):
        open_session(tmp_path)
    with pytest.raises(StallscopeError, match="not a folder"):
        open_session(tmp_path / "missing")
    (tmp_path / "run.json").write_text("{broken")
    with pytest.raises(StallscopeError, match="run.json: unreadable"):
        open_session(tmp_path)
