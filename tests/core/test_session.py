"""Reading session folders: replay, follow with torn lines, traces, closing a session."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stallscope.core.commands.run import summary_line
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
    t = 2.0
    for n, (wall, wait) in enumerate([(500.0, 400.0), (100.0, 80.0), (120.0, 60.0),
                                      (80.0, 40.0)]):
        t += wall / 1e3
        events += line(event="step", t=t, n=n, wall_ms=wall, data_wait_ms=wait,
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
    # the steady statistic: too short for steady state, so step 0 (start-up) is left out and
    # the rest stands as a mean over elapsed time, said as such
    assert summary["step_ms"] == pytest.approx(100.0)
    assert summary["data_wait_ms"] == pytest.approx(60.0)
    assert summary["data_wait_share"] == pytest.approx(180 / 300)
    assert summary["steady_steps"] == 3 and summary["steady_reached"] is False
    assert summary["steady_note"].startswith("only 4 steps: too short to reach steady state")
    # every one of them profiled: the figure is the profiler's as much as the script's, and
    # the run's last line says so (hunt: 405.86 ms "per step" against ~80 ms unprofiled)
    assert summary["steady_profiled"] == 3
    assert summary_line(summary).endswith(
        "means over 3 steady steps (too short to reach steady state; 3 of them profiled: the "
        "profiler's cost is in it)")
    assert s.stdout() == "hello\nworld\n"
    assert "lineprof" not in summary and "line profiling" not in summary_line(summary)
    # a line-profiled run says that its cost is in its figures (hunt: 172.82 ms a step with
    # --lineprof against 21.34 ms without, stated with no word of it)
    (root / "run.json").write_text(json.dumps({"script": "/x/train.py",
                                               "options": {"lineprof": "auto"}}))
    profiled = open_session(root).summary()
    assert profiled["lineprof"] is True
    assert summary_line(profiled).endswith("; line profiling was on (--lineprof): its cost is "
                                           "in these figures; run without it for the script's "
                                           "own step time")


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
    with pytest.raises(StallscopeError, match="run.json is not JSON"):
        open_session(tmp_path)


def test_typed_events_from_a_follower(tmp_path):
    from stallscope.core.session.events import (
        DataLoaderBuilt,
        Event,
        Finished,
        Message,
        Started,
        StepColumns,
        StepEvent,
        TraceReady,
    )

    make_session(tmp_path / "s", b"".join([
        line(event="started", t=1.0, torch="2.3", devices=["H100"], overrides=["num_workers=2"]),
        line(event="dataloader", t=1.5, index=1, site="train.py:9", line=9,
             overridden={"num_workers": {"from": 0, "to": 2}}, notes=[]),
        line(event="step", t=2.0, n=0, wall_ms=120.0, data_wait_ms=80.0, rss=1 << 28,
             phase="wait", batches=1),
        line(event="step", t=3.0, n=1, wall_ms=90.5, data_wait_ms="bad", phase="active"),
        line(event="warning", t=3.5, message="careful", code="line_profiler_missing",
             python="/p"),
        line(event="trace_ready", t=4.0, path="traces/a.pt.trace.json.gz", complete=False),
        line(event="something_new", t=4.5),
        line(event="finished", t=5.0, rc=1, reason="exception", steps=2,
             exception={"type": "ValueError", "message": "boom", "step": 2}),
    ]))
    events = EventFollower(tmp_path / "s").poll_typed()
    kinds = [type(e) for e in events]
    assert kinds == [Started, DataLoaderBuilt, StepEvent, StepEvent, Message, TraceReady, Event,
                     Finished]
    started, built, s0, s1, msg, ready, new, fin = events
    assert started.devices == ("H100",) and started.overrides == ("num_workers=2",)
    assert built.site == "train.py:9" and built.overridden["num_workers"]["to"] == 2
    assert (s0.n, s0.wall_ms, s0.data_wait_ms, s0.rss, s0.batches) == (0, 120.0, 80.0,
                                                                        float(1 << 28), 1)
    assert np.isnan(s1.data_wait_ms) and np.isnan(s1.cuda_allocated)  # not recorded: NaN
    assert (msg.message, msg.code, msg.python) == ("careful", "line_profiler_missing", "/p")
    assert ready.path == "traces/a.pt.trace.json.gz" and ready.complete is False
    assert new.kind == "something_new"
    assert (fin.rc, fin.reason, fin.steps) == (1, "exception", 2)
    assert fin.exception.text == "ValueError: boom" and fin.exception.step == 2

    cols = StepColumns()
    for e in (s0, s1):
        cols.add(e)
    assert len(cols) == 2 and cols.active == [1] and cols.last_phase == "active"
    assert list(cols["wall_ms"]) == [120.0, 90.5]
    for n in range(300):  # grows past its first block
        cols.add(StepEvent(kind="step", t=0.0, rank=None, n=n, wall_ms=float(n)))
    assert len(cols) == 302 and cols["wall_ms"][-1] == 299.0


def test_summary_and_no_trace_reason_name_the_exception(tmp_path):
    from stallscope.core.session.reader import no_trace_reason

    root = make_session(tmp_path / "s", line(event="started", t=1.0) + line(
        event="finished", t=2.0, rc=1, reason="exception", steps=0,
        exception={"type": "KeyError", "message": "'label'", "step": 0}), traces=())
    s = open_session(root)
    assert s.summary()["exception"] == {"type": "KeyError", "message": "'label'", "step": 0}
    assert no_trace_reason(root) == (
        f"{root}: train.py raised KeyError: 'label' at step 0 before a trace was written; its "
        f"output is in {root / 'stdout.log'}")
    with_trace = make_session(tmp_path / "t", line(event="finished", t=2.0, rc=0, reason="x"))
    assert no_trace_reason(with_trace) is None and no_trace_reason(tmp_path / "nothing") is None
