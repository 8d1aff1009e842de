"""The whole run's figures of a run long enough to fold into blocks (over 32,768 steps): the
real RunRecord fed in-process on a clock the test drives, so elapsed, the warm-up after the
last profiled window and the epoch starts' pause are known to the microsecond."""

from __future__ import annotations

import pytest
from fake_clock import Clock

from stallscope.core.capture import record as fmt
from stallscope.core.capture.record import RunRecord
from stallscope.core.session.record import read_record
from stallscope.core.session.stalls import analyze_run
from stallscope.core.session.whole_run import record_steady, run_clock

STARTUP_S, WALL_S, GAP_S = 2.0, 0.001, 0.0005  # each step: 1 ms, then 0.5 ms between steps
PROFILED = range(40_000, 40_004)


def test_a_folded_run_s_elapsed_and_steady_window(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(fmt, "time", clock)
    rec = RunRecord(tmp_path / "record.bin")
    n = 3 * fmt.RECENT_MAX + 1234
    for i in range(n):
        wall = STARTUP_S if i == 0 else WALL_S
        clock.now += wall
        rec.step({"wall_ms": wall * 1e3, "data_wait_ms": 0.25, "batches": 1,
                  "phase": "active" if i in PROFILED else "wait"})
        clock.now += GAP_S
    rec.close()
    back = read_record(tmp_path / "record.bin")
    assert len(back.blocks) > 40 and back.n_steps == n

    clock_figures = run_clock(back)
    assert clock_figures.startup_s == pytest.approx(STARTUP_S, rel=1e-6)
    # every gap between steps counts: 1.5 ms a step, where the walls sum to 1 ms a step
    assert clock_figures.elapsed_s == pytest.approx((n - 1) * (WALL_S + GAP_S), rel=1e-6)

    w = record_steady(back)
    first = (PROFILED[-1] // fmt.BLOCK + 1) * fmt.BLOCK  # after the last profiled block
    assert w.first == first and w.steps == n - first and w.reached
    assert w.step_ms == pytest.approx(1e3 * (WALL_S + GAP_S), rel=1e-6)
    assert w.data_wait_share == pytest.approx(0.25 / 1.5, rel=1e-5)

    report = analyze_run(back)
    assert report.wall_s == pytest.approx(STARTUP_S + (n - 1) * (WALL_S + GAP_S), rel=1e-6)
    assert report.step_ms == pytest.approx(w.step_ms) and report.steady_steps == w.steps
