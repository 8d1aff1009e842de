"""The compare view on two real tune sessions states the speed-up `stallscope-cli compare` and
tune state: the steady statistic of the sessions' recorded steps (issue 21)."""

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
    assert "steady mean of the sessions' recorded steps" in text
    rows = {view.table.item(r, 0).text(): view.table.item(r, 1).text()
            for r in range(view.table.rowCount())}
    assert rows["step time (steady mean)"] == f"{b.step_ms:.2f} ms"
    assert "data wait share (steady, incl. epoch starts)" in rows
    assert "step time (profiled window mean)" in rows
    for w, h in ((1024, 700), (1400, 900)):
        view.resize(w, h)
        view.show()
        qtbot.wait(50)
        save_shot(view, f"compare_steady_{w}x{h}")


def test_two_cpu_only_sessions_chart_the_main_threads_time_not_an_empty_gpu_chart(qtbot):
    """No GPU on either side: the chart shows the main thread's time per step by cause (its
    data wait first), from the reports' own numbers, instead of an empty GPU idle chart."""
    import pytest
    from fixture_traces import fixture_path

    from stallscope.core.causes import CAUSES
    from stallscope.gui.views.compare import GPU_IDLE_TITLE, HOST_AXIS, HOST_TITLE

    before = run_job(load_document_job(SESSIONS / "io-as-written-2")).reports[0]
    after = run_job(load_document_job(SESSIONS / "io-16workers-2")).reports[0]
    assert not before.devices and not after.devices
    view = CompareView()
    qtbot.addWidget(view)
    view.set_reports(before, after, "as written", "16 workers")
    view.resize(1024, 700)
    view.show()
    qtbot.waitExposed(view)
    chart = view.chart
    assert chart.isVisible() and view.chart_title.text() == HOST_TITLE
    assert chart.getAxis("bottom").labelText == HOST_AXIS
    assert "data_loading" in chart.values
    for cause, (b, a) in chart.values.items():
        assert cause in CAUSES
        assert b == pytest.approx(before.host_by_cause[cause] / 1000 / len(before.steps))
        assert a == pytest.approx(after.host_by_cause[cause] / 1000 / len(after.steps))
    top = max(max(v) for v in chart.values.values())
    lo, hi = chart.getViewBox().viewRange()[0]
    assert lo == 0 and hi == pytest.approx(1.08 * top)  # the data's range, not 0.1..0.9
    qtbot.wait(50)
    save_shot(view, "compare_cpu_only_sessions_1024x700")
    # a GPU pair keeps the GPU idle chart
    nw0 = run_job(load_document_job(fixture_path("kineto_nw0"))).reports[0]
    nw4 = run_job(load_document_job(fixture_path("kineto_nw4_worker0.1623212756351"))).reports[0]
    view.set_reports(nw0, nw4)
    assert view.chart_title.text() == GPU_IDLE_TITLE and "data_loading" in view.chart.values
    assert view.chart.isVisible()


def test_a_comparison_not_like_for_like_is_neither_green_nor_red(qtbot):
    # a GPU trace against a CPU-only session read "Steps are faster: 1.81x" in green beside
    # the "Not like for like" banner
    from fixture_traces import fixture_path

    from stallscope.gui.colors import BETTER_COLOR, MUTED_TEXT, WORSE_COLOR

    gpu = run_job(load_document_job(fixture_path("kineto_nw0"))).reports[0]
    cpu = run_job(load_document_job(SESSIONS / "io-16workers-2")).reports[0]
    view = CompareView()
    qtbot.addWidget(view)
    view.set_reports(gpu, cpu, "GPU", "CPU-only")
    text = view.verdict_label.text()
    assert "Not like for like" in text and "Steps are " in text
    steps = text[text.index("Steps are ") - 60:text.index("Steps are ")]
    assert MUTED_TEXT in steps and BETTER_COLOR not in steps and WORSE_COLOR not in steps
