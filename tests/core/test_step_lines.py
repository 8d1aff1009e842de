"""events.jsonl's step lines by time slice (issue 34): every step of the run's first steps and
of a profiled window and the steps after it, otherwise at most one line a SLICE_S, while
record.bin keeps every step; a line standing for steps left out carries their sums, so the
step events' steady figures still count every step's wait. And the stepper reads memory at most
once a MEMORY_EVERY_S, with one CUDA reading for both figures. In-process, on a clock the test
drives."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from fake_clock import Clock

from stallscope.core.capture import layout, stepping, writer
from stallscope.core.capture.record import RunRecord
from stallscope.core.session.events import StepColumns, typed
from stallscope.core.session.reader import Steps
from stallscope.core.session.record import read_record


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    for module in (writer, layout, stepping):
        monkeypatch.setattr(module, "time", c)
    return c


def step_lines(path: Path) -> list[dict]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return [e for e in lines if e["event"] == layout.STEP]


def feed(tmp_path: Path, clock: Clock, walls_ms, waits_ms, phases=None,
         tail_s: float = 0.0) -> list[dict]:
    log = writer.EventLog(tmp_path / "events.jsonl", None)
    log.record = RunRecord(tmp_path / "record.bin")
    for i, (wall, wait) in enumerate(zip(walls_ms, waits_ms, strict=True)):
        clock.now += wall / 1e3
        log.emit("step", n=i, wall_ms=wall, data_wait_ms=wait, batches=1,
                 phase=phases[i] if phases else "done")
    clock.now += tail_s  # what the script does after its last step (a final evaluation)
    log.close()
    return step_lines(tmp_path / "events.jsonl")


def test_lines_by_time_slice_after_the_first_steps_and_every_window_step(tmp_path, clock):
    full, per_slice = writer.FULL_STEPS, round(writer.SLICE_S / 0.001)  # 1 ms steps
    window = full + 2000  # a profiled window of 4 steps, late in the run
    n = window + 4 + full + 3000
    phases = ["active" if window <= i < window + 4 else "done" for i in range(n)]
    kept = [e["n"] for e in feed(tmp_path, clock, [1.0] * n, [0.25] * n, phases)]

    assert kept[:full] == list(range(full))  # the first steps, each
    after = [k for k in kept if full <= k < window]
    assert {*np.diff(after)} <= {per_slice, per_slice + 1}  # then one line a slice (float time)
    assert set(range(window, window + 4 + full)) <= set(kept)  # the window and the steps after
    tail = [k for k in kept if k >= window + 4 + full]
    assert tail and {*np.diff(tail)} <= {per_slice, per_slice + 1}
    assert len(kept) < full * 2 + 4 + (n // per_slice)

    assert read_record(tmp_path / "record.bin").n_steps == n  # the record: every step


def test_a_thinned_line_carries_the_sums_of_the_steps_it_stands_for(tmp_path, clock):
    # every 10th step waits 40 ms for its data, the others 0.1 ms: a line a slice lands on a
    # slow step far more often than one step in ten, so the lines' own waits alone mislead
    n = writer.FULL_STEPS + 20_000
    slow = [i % 10 == 9 for i in range(n)]
    walls = [41.0 if s else 1.0 for s in slow]
    waits = [40.0 if s else 0.1 for s in slow]
    lines = feed(tmp_path, clock, walls, waits, tail_s=600.0)
    thinned = [e for e in lines if e["n"] >= writer.FULL_STEPS]
    assert len(thinned) <= (n - writer.FULL_STEPS) // 10 + 1  # 10 steps a slice: one line

    # the lines' spans cover every step once, their sums every step's wall and wait
    covered = [e.get("span_steps", 1) for e in lines]
    assert sum(covered) == n
    assert sum(e.get("span_data_wait_ms", e["data_wait_ms"]) for e in lines) == \
        pytest.approx(sum(waits), rel=1e-6)
    assert sum(e.get("span_wall_ms", e["wall_ms"]) for e in lines) == \
        pytest.approx(sum(walls), rel=1e-6)

    # closing the log writes the last step's line, stamped with the step's end
    assert lines[-1]["n"] == n - 1
    assert lines[-1]["t"] == pytest.approx(1.7e9 + sum(walls) / 1e3, abs=1e-5)

    # the steady figures from the events (a live run: the app, tune's follower) count every
    # step's wait, as record.bin does
    for w in (Steps.from_events(lines).steady(), columns(lines).steady()):
        assert w is not None
        first = lines[w.first - 1]["n"]  # the row before the window
        assert w.steps == n - 1 - first
        assert w.data_wait_ms == pytest.approx(sum(waits[first + 1:]) / w.steps, rel=1e-6)
    # what the lines' own waits alone would say (the mean of the rows): far off
    own = np.mean([e["data_wait_ms"] for e in thinned])
    assert abs(own - sum(waits) / n) > 0.2 * sum(waits) / n


def columns(lines: list[dict]) -> StepColumns:
    cols = StepColumns()
    for e in lines:
        cols.add(typed(e))  # type: ignore[arg-type]  # step lines: StepEvents
    return cols


class FakeCuda:
    def __init__(self) -> None:
        self.readings = 0
        self.allocated = 1 << 30

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def memory_stats_as_nested_dict(self) -> dict:
        self.readings += 1
        return {"allocated_bytes": {"all": {"current": self.allocated}},
                "reserved_bytes": {"all": {"current": 2 << 30}}}


class FakeLog:
    rank = 0  # check_rank: the rank is known

    def __init__(self) -> None:
        self.steps: list[dict] = []

    def step(self, fields: dict) -> None:
        self.steps.append(dict(fields))


class Action:
    name = "NONE"


class FakeProf:
    def step(self) -> None:
        pass


def test_memory_is_read_once_a_slice_with_one_cuda_reading(clock, monkeypatch):
    rss = iter(range(1, 10_000))
    monkeypatch.setattr(stepping, "read_rss", lambda: next(rss))
    torch = argparse.Namespace(cuda=FakeCuda())
    opts = argparse.Namespace(stop_after_window=False, repeat=0, wait=0, warmup=0, active=1)
    log = FakeLog()
    st = stepping.Stepper(torch, FakeProf(), lambda n: Action(), log, opts)
    every = round(stepping.MEMORY_EVERY_S / 0.001)  # 1 ms steps
    for i in range(10 * every):
        clock.now += 0.001
        torch.cuda.allocated = i
        st.step()
    assert len(log.steps) == 10 * every and torch.cuda.readings == 10
    read_at = [i for i, f in enumerate(log.steps) if f["cuda_allocated"] == i]
    assert read_at == list(range(0, 10 * every, every))
    for i, f in enumerate(log.steps):  # every step carries the latest reading
        assert f["cuda_allocated"] == read_at[i // every]
        assert f["rss"] == 1 + i // every and f["cuda_reserved"] == 2 << 30
