"""The compare view on two real tune sessions states the speed-up `stallscope-cli compare` and
tune state: the steady statistic of the sessions' step events (issue 21)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from shots import save_shot

from stallscope.core.document import load_document_job
from stallscope.core.jobs import run_job
from stallscope.core.session.reader import open_session
from stallscope.gui.views.compare import CompareView

SESSIONS = Path(__file__).resolve().parents[1] / "core" / "steady_sessions"


def test_compare_view_says_the_steady_speed_up_of_two_sessions(qtbot):
    before, after = SESSIONS / "io-as-written-2", SESSIONS / "io-16workers-2"
    (_, b), (_, a) = open_session(before).steady(), open_session(after).steady()
    view = CompareView()
    qtbot.addWidget(view)
    view.set_reports(run_job(load_document_job(before)).reports[0],
                     run_job(load_document_job(after)).reports[0], "as written", "16 workers")
    text = view.verdict_label.text()
    assert f"faster: {b.step_ms / a.step_ms:.2f}x, {b.step_ms:.2f} ms → {a.step_ms:.2f} ms" in text
    assert "steady mean from the sessions' step events" in text
    rows = {view.table.item(r, 0).text(): view.table.item(r, 1).text()
            for r in range(view.table.rowCount())}
    assert rows["step time (steady mean)"] == f"{b.step_ms:.2f} ms"
    assert "data wait share (steady)" in rows and "step time (profiled window mean)" in rows
    for w, h in ((1024, 700), (1400, 900)):
        view.resize(w, h)
        view.show()
        qtbot.wait(50)
        save_shot(view, f"compare_steady_{w}x{h}")
