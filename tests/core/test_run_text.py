"""The whole run's line states the steady statistic (issue 21, one statistic): elapsed over the
steps after the warm-up / their count, with the data wait share over the same time, the
figures tune and compare state for the same session."""

from __future__ import annotations

import pytest
from runner_helpers import run, write_script
from scripts import training

from stallscope.core.render.run_text import render_run
from stallscope.core.session.reader import open_session
from stallscope.core.session.record import load_record
from stallscope.core.session.stalls import analyze_run

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)

# 40 steps: a batch of 8 items sleeping 2 ms each (16 ms of data wait), 16 ms of compute
HALF_WAITING = training(items=320, item_s=0.002, step_s=0.016)


def test_the_whole_run_line_is_the_steady_statistic_of_its_steps(tmp_path):
    script = write_script(tmp_path, HALF_WAITING)
    proc, session = run(tmp_path, script, "--wait", "1000", "--no-stop-after-window",
                        "--no-profile-memory")
    assert proc.returncode == 0, proc.stderr
    s = open_session(session)
    report = analyze_run(load_record(s))
    found = s.steady()
    assert found is not None
    _, w = found
    assert report.steps == 40 and report.steady_steps == w.steps == 36  # step 0 + 3 settle
    # the record's clock and the events' clock give the same figure
    assert report.step_ms == pytest.approx(w.step_ms, rel=0.02)
    assert report.data_wait_share == pytest.approx(w.data_wait_share, abs=0.02)
    assert report.step_ms >= 32.0                    # 16 ms waiting + 16 ms computing
    assert 0.25 < report.data_wait_share < 0.9        # (a loaded machine stretches both)
    assert report.step_ms != pytest.approx(report.median_step_ms, rel=1e-6)  # not a median
    head, steady_line = render_run(report).splitlines()[:2]
    assert head.startswith("whole run  40 steps in ")
    assert "by the record's clock" in head
    assert steady_line.startswith(f"steady     {report.step_ms:.2f} ms per step over 36 steps "
                                  "after the warm-up (elapsed / steps); data wait ")
    assert f"{100 * report.data_wait_share:.1f}% incl. epoch starts" in steady_line
    assert "median" not in head + steady_line
