"""Issue 33 in the summary panel: a window that is not steady shows its one card first and
folds the cause cards it withholds; a trace without CPU operators shows Python as unknown."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import sys
from pathlib import Path

from fixture_traces import fixture_path

from stallscope.core.analysis import analyze
from stallscope.core.trace import load
from stallscope.gui.views.summary import SummaryPanel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from fixture_twins import document  # noqa: E402  (tests/core's twins)


def test_a_start_up_window_folds_its_cause_cards(qtbot, tmp_path):
    panel = SummaryPanel(actions=True)
    qtbot.addWidget(panel)
    report = analyze(load(fixture_path("hta_amd_trace")))
    panel.set_report(report)
    panel.resize(460, 1100)
    panel.show()
    fold = panel.withheld_fold
    assert [a.id for a in report.advice] == ["window"]
    assert len(fold.cards) == len(report.withheld) == 3
    assert fold.toggle.text() == "If this were steady: 3 cards withheld (a start-up window)"
    assert not fold.isHidden() and fold.body.isHidden()
    # the window's card sits above the utilization, the fold below the cards
    card = panel.advice_cards[0]
    assert panel.window_box.indexOf(card) == 0
    assert card.mapTo(panel.widget(), card.rect().topLeft()).y() < \
        panel.util_heading.mapTo(panel.widget(), panel.util_heading.rect().topLeft()).y() < \
        fold.mapTo(panel.widget(), fold.rect().topLeft()).y()
    fold.toggle.click()
    assert not fold.body.isHidden()
    assert fold.cards[0].title.text() == "<b>The GPU waits for the backward launches</b>"
    panel.widget().grab().save(str(tmp_path / "amd.png"))
    assert (tmp_path / "amd.png").stat().st_size > 0
    steady = analyze(load(fixture_path("kineto_nw0")))
    panel.set_report(steady)
    assert fold.isHidden() and panel.window_box.count() == 0


def test_without_cpu_operators_python_is_unknown_in_the_table(qtbot, tmp_path):
    doc = document("hta_df_index_resolver")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cpu_op"]
    path = tmp_path / "noops.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    report = analyze(load(path))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(report)
    assert panel.cause_table.row("python") is None
    assert "Python: unknown (no CPU operators recorded)" in panel.cause_table.none_label.text()
    assert panel.lacks_label.text().startswith("The trace has no CPU operators")
    assert panel.withheld_fold.toggle.text() == \
        "If this were steady: 1 card withheld (a cause the trace cannot know)"


def test_a_long_fold_line_never_pushes_the_figures_past_the_panel(qtbot, tmp_path):
    # the fold's line ("... 2 cards withheld (a trace too short to judge)") was one button as
    # wide as its text: at 1400x900 the panel (which never scrolls sideways) cut every figure
    # at its right edge, "100.0" without its "%"
    panel = SummaryPanel(actions=True)
    qtbot.addWidget(panel)
    panel.set_report(analyze(load(fixture_path("hta_cpu_only"))))
    panel.resize(420, 1100)
    panel.show()
    qtbot.waitUntil(lambda: panel.widget().width() > 0)
    fold = panel.withheld_fold
    assert not fold.isHidden()
    assert panel.widget().width() <= panel.viewport().width()
    assert fold.toggle.text().endswith("…") and "too short to judge" in fold.toggle.toolTip()
    panel.widget().grab().save(str(tmp_path / "cpu_only.png"))
    panel.resize(900, 1100)  # room again: the whole line
    qtbot.waitUntil(lambda: not fold.toggle.text().endswith("…"))
    assert fold.toggle.text() == ("If this were steady: 2 cards withheld (a trace too short "
                                  "to judge)")
