"""The run view's header and Whole run tab on a real long session (issue 34): the header states
the step the run reached and record.bin's steady figures, never the thinned step events'; one
slow first step cannot flatten the Whole run chart's y axis (it is marked off scale)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from shots import save_shot

from stallscope.core.capture import runner
from stallscope.core.render.run_text import steady_text
from stallscope.core.session.reader import open_session
from stallscope.core.session.record import load_record
from stallscope.core.session.stalls import analyze_run
from stallscope.gui.controllers.run import new_run_view

pytestmark = pytest.mark.runner

STEPS = 20_600  # step events thin out after 20,000: rows no longer count steps
SLOW_FIRST = f"""
import time, torch
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
for i in range({STEPS}):
    if i == 0:
        time.sleep(1.5)
    opt.step()
"""


def test_header_and_whole_run_from_the_record(tmp_path, qtbot):
    script = tmp_path / "slow_first.py"
    script.write_text(textwrap.dedent(SLOW_FIRST), encoding="utf-8")
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, str(runner.__file__), "--session", str(session),
                           "--no-stop-after-window", "--no-profile-memory", "--", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = analyze_run(load_record(open_session(session)))
    assert report.steps == STEPS

    view = new_run_view()
    qtbot.addWidget(view)
    view.resize(1100, 750)
    view.controller.replay(session)
    view.chart_tabs.setCurrentWidget(view.whole)
    view.show()
    qtbot.waitExposed(view)
    save_shot(view, "run_whole_figures")
    assert view.controller.series.n < STEPS  # the events hold fewer rows than steps
    header = view.figures.text()
    assert header.startswith(f"step {STEPS - 1:,} · {steady_text(report)}")
    assert f"over {report.steady_steps:,} steps after the warm-up" in header

    chart = view.whole.chart
    top = chart.step_plot.viewRange()[1][1]
    # step 0 took over 1.5 s; the axis is scaled to the other steps (well under 100 ms)
    assert top < 100 < 1500
    marks, text = chart.off_scale[chart.step_plot]
    # a point stands for several steps here: the one holding step 0
    assert text.toPlainText().startswith("from step 0: ") and "(off scale" in text.toPlainText()
    assert len(marks.data) >= 1
