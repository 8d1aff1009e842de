"""A session's trace: the runner's record decides which of its steps are whole (a step event
each), not their length (docs/definitions.md "Window kind"): a short last step the runner ended
is whole, one it never ended is what ran up to the script's end, and a script with no step
at all, recorded whole, is not sent back to the schedule that found none."""

from __future__ import annotations

import pytest
from runner_helpers import events, finished, run, write_script

from stallscope.core.document import analyze_path

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)

STEPS = """
import time, torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range({steps}):
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    time.sleep({sleep})
    opt.step()
{tail}
"""


def _report(tmp_path, source: str, *options: str):
    script = write_script(tmp_path, source, name="train.py")
    proc, session = run(tmp_path, script, *options)
    assert proc.returncode == 0, proc.stderr
    traces = finished(session)["traces"]
    assert len(traces) == 1
    return analyze_path(session / traces[0]), session, proc


def _durations_ms(report) -> dict[str, float]:
    return {s.name: s.dur_us / 1e3 for s in report.steps}


def test_a_short_last_step_the_runner_ended_is_whole(tmp_path):
    # steps 2-5 are the window; step 5 computes 20 ms against the others' 300 ms, the load
    # of the hunt's s4 run: a duration rule called it cut by the profiler's stop
    report, session, _ = _report(tmp_path, STEPS.format(
        steps=8, sleep="0.02 if i == 5 else 0.3", tail=""))
    took = _durations_ms(report)
    assert sorted(took) == [f"ProfilerStep#{k}" for k in range(2, 6)]
    assert took["ProfilerStep#5"] < 0.5 * min(took[f"ProfilerStep#{k}"] for k in (2, 3, 4))
    assert {e["n"] for e in events(session, "step")} >= {2, 3, 4, 5}  # the runner ended it
    assert report.window_kind == "steady"
    assert report.window_finding is None and report.advice  # the cause cards are shown


def test_a_last_step_the_runner_never_ended_was_cut_by_the_scripts_end(tmp_path):
    # 4 steps: the window (steps 2-5) is still open when the script ends 200 ms after step 3
    report, session, _ = _report(tmp_path, STEPS.format(
        steps=4, sleep="0.1", tail="time.sleep(0.2)"))
    assert sorted(_durations_ms(report)) == ["ProfilerStep#2", "ProfilerStep#3",
                                             "ProfilerStep#4"]
    assert finished(session)["steps"] == 4
    found = report.window_finding
    assert report.window_kind == "tail_cut" and found is not None
    assert "ProfilerStep#4" in found.evidence and "steps 2-3" in found.evidence
    # a window of the whole steps it holds, not the default it already ran under
    assert "`stallscope-cli run --wait 1 --active 2 -- " in found.fix
    assert "--active 4" not in found.fix
    assert [a.id for a in report.advice] == ["window"]


def test_the_whole_script_recorded_is_not_sent_back_to_the_default(tmp_path):
    """Following "--wait 0 --warmup 0 to record the whole script" ends there: its window is the
    whole script (no step: ProfilerStep#0 is the profiler's own span), not "a single step" or
    start-up to record again under a schedule (the default found no step)."""
    report, session, proc = _report(tmp_path, """
import torch
m = torch.nn.Linear(10, 10)
for i in range(50):
    y = m(torch.randn(64, 10)).sum()
""", "--wait", "0", "--warmup", "0")
    assert finished(session)["steps"] == 0
    found = report.window_finding
    assert found is not None and found.title == ("This window is the whole script: the runner "
                                                 "saw no steps")
    assert "--wait" not in found.fix and "your_script.py" not in found.fix
    assert [a.id for a in report.advice] == ["window"]
    assert "--wait 1" not in proc.stderr  # run's own summary says the same
