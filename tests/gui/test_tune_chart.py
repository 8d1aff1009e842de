"""The tune chart's colours follow its legend (hunt: a tune that kept the script's own
settings drew the slowest trial, the script as written, green under "kept (faster)"), and a
finished tune leaves no empty slots for trials that never came."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from stallscope.core.tune.trial import OK, Trial
from stallscope.gui.colors import BETTER_COLOR, BUSY_COLOR, MUTED_TEXT
from stallscope.gui.dialogs.tune_chart import TuneChart


def trials() -> list[Trial]:
    return [Trial(1, "01", {}, {}, status=OK, step_ms=93.0),
            Trial(2, "02", {"num_workers": 1}, {"num_workers": 1}, status=OK, step_ms=74.0),
            Trial(3, "03", {"num_workers": 2}, {"num_workers": 2}, status=OK, step_ms=47.0),
            Trial(4, "04", {}, {}, status=OK, step_ms=90.0)]


def colours(chart: TuneChart) -> list[str]:
    return [b.name() for b in chart.steps.opts["brushes"]]


def test_keeping_the_script_s_settings_is_not_drawn_as_a_faster_setting(qtbot):
    chart = TuneChart()
    qtbot.addWidget(chart)
    chart.set_trials(trials(), best=1, baseline=1, done=True)  # nothing confirmed: kept as is
    assert colours(chart) == [MUTED_TEXT, BUSY_COLOR, BUSY_COLOR, MUTED_TEXT]
    assert chart.viewRange()[0][1] == pytest.approx(4.6)
    chart.set_trials(trials(), best=3, baseline=1, done=True)  # 2 workers confirmed
    assert colours(chart) == [MUTED_TEXT, BUSY_COLOR, BETTER_COLOR, MUTED_TEXT]
    chart.set_trials(trials()[:2], best=1, baseline=1)  # running: room for what comes
    assert chart.viewRange()[0][1] == pytest.approx(6.6)
